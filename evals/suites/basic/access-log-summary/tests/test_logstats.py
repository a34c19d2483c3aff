from datetime import datetime, timedelta, timezone

from logstats import parse_line, summarize


def line(target="/index.html", status=200, size="512", host="10.0.0.1"):
    return f'{host} - - [10/Oct/2000:13:55:36 -0700] "GET {target} HTTP/1.1" {status} {size}'


def test_parse_line_fields():
    record = parse_line(line(size="2326"))
    assert (record.host, record.method, record.path, record.status, record.size) == (
        "10.0.0.1", "GET", "/index.html", 200, 2326,
    )
    assert record.time == datetime(2000, 10, 10, 13, 55, 36, tzinfo=timezone(timedelta(hours=-7)))


def test_summary_counts():
    summary = summarize([line(), "", line(status=404, size="10"), line("/b")])
    assert summary.requests == 3
    assert summary.bytes_sent == 1034
    assert summary.statuses == {200: 2, 404: 1}


def test_dash_size_means_zero_bytes():
    assert parse_line(line(status=304, size="-")).size == 0
    assert summarize([line(size="-"), line(size="5")]).bytes_sent == 5


def test_query_string_is_split_off():
    record = parse_line(line("/search?q=a&p=2"))
    assert record.path == "/search"
    assert record.query == "q=a&p=2"
    assert parse_line(line("/plain")).query == ""


def test_malformed_lines_are_counted_not_raised():
    summary = summarize([line(), "garbage", line(size="x1"), "   ", line()])
    assert summary.requests == 2
    assert summary.malformed == 2


def test_top_paths_break_ties_alphabetically():
    lines = [line("/z"), line("/z"), line("/b?x=1"), line("/a"), line("/b"), line("/c")]
    assert summarize(lines).top_paths(3) == [("/b", 2), ("/z", 2), ("/a", 1)]

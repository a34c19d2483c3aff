from wordcount import cli


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def run(capsys, argv):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_default_lists_all_words_alphabetically(tmp_path, capsys):
    path = write(tmp_path, "a.txt", "b a b, c")
    code, lines, _ = run(capsys, [path])
    assert code == 0
    assert lines == ["a\t1", "b\t2", "c\t1"]


def test_counts_are_summed_over_files(tmp_path, capsys):
    first = write(tmp_path, "1.txt", "x y")
    second = write(tmp_path, "2.txt", "y")
    _, lines, _ = run(capsys, [first, second])
    assert lines == ["x\t1", "y\t2"]


def test_top_orders_by_count_then_word(tmp_path, capsys):
    path = write(tmp_path, "t.txt", "d d c c b a a a")
    code, lines, _ = run(capsys, ["--top", "3", path])
    assert code == 0
    assert lines == ["a\t3", "c\t2", "d\t2"]


def test_ignore_case(tmp_path, capsys):
    path = write(tmp_path, "t.txt", "The the THE cat")
    _, lines, _ = run(capsys, ["-i", path])
    assert lines == ["cat\t1", "the\t3"]
    _, lines, _ = run(capsys, ["--ignore-case", "--top", "1", path])
    assert lines == ["the\t3"]


def test_min_length(tmp_path, capsys):
    path = write(tmp_path, "t.txt", "a an ant ants")
    _, lines, _ = run(capsys, ["--min-length", "3", path])
    assert lines == ["ant\t1", "ants\t1"]


def test_missing_file_is_reported(tmp_path, capsys):
    missing = str(tmp_path / "nope.txt")
    code, lines, err = run(capsys, [missing])
    assert code == 2
    assert lines == []
    assert err.strip() == f"wordcount: cannot read {missing}"

"""Provider cache rules in the what-if simulators, one behaviour per test."""

from __future__ import annotations

import pytest

from hitrate.evals.whatif.anthropic import AnthropicSimConfig, simulate_anthropic
from hitrate.evals.whatif.local import LocalSimConfig, simulate_local
from hitrate.evals.whatif.naive import naive_requests
from hitrate.evals.whatif.openai import BreakpointSimConfig, PrefixSimConfig, simulate_openai_breakpoints, simulate_prefix_cache

from whatif_builders import request

K = 1000


def ant(requests, **config):
    config.setdefault("min_cacheable_tokens", 1024)
    return simulate_anthropic(requests, AnthropicSimConfig(**config))


def turn(at, n, *, marks="5m", **kw):
    """System 20K marked 1h-or-5m + n user messages of 1K, the last one marked."""
    sections = [("system", "sys", 20 * K, marks)] + [("history", f"m{i}", 1 * K) for i in range(n - 1)]
    sections.append(("history", f"m{n - 1}", 1 * K, marks))
    return request(at, sections, **kw)


# ---- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_read_refreshes_the_entry_from_the_reading_request_start():
    # 4-minute gaps: every read pushes expiry to its own start + 5 min, so the chain never breaks,
    # although the first entry alone would have expired at 5 min.
    reqs = [turn(240 * i, 1, rid=f"r{i}") for i in range(5)]
    reads = [p.usage.cache_read for p in ant(reqs, marks="recorded")]
    assert reads == [0, 21 * K, 21 * K, 21 * K, 21 * K]


def test_anthropic_ttl_counts_from_the_writer_start_not_its_end():
    # The writer streams for 200 s; its entry still expires 300 s after it *started*.
    writer = turn(0, 1, latency=200.0, rid="w")
    at_299 = turn(299, 1, rid="a")
    assert ant([writer, at_299], marks="recorded")[1].usage.cache_read == 21 * K
    at_301 = turn(301, 1, rid="b")
    late = ant([writer, at_301], marks="recorded")[1]
    assert late.usage.cache_read == 0 and "ttl_expired" in late.note


def test_anthropic_entry_is_readable_only_after_the_first_token():
    writer = turn(0, 1, ttft=8.0, rid="w")
    parallel = turn(5, 1, rid="p")
    after = turn(9, 1, rid="q")
    preds = ant([writer, parallel, after], marks="recorded")
    assert preds[1].usage.cache_read == 0 and preds[1].usage.cache_write_5m == 21 * K
    assert "not readable yet" in preds[1].note
    assert preds[2].usage.cache_read == 21 * K


def test_anthropic_mark_below_the_model_minimum_writes_nothing():
    small = [request(i * 10, [("system", "sys", 3 * K, "5m"), ("history", f"u{i}", 200, "5m")]) for i in range(3)]
    preds = ant(small, marks="recorded", min_cacheable_tokens=4096)
    assert all(p.usage.cache_read == 0 and p.usage.cache_write_5m == 0 and p.usage.fresh_input == 3_200 for p in preds)
    assert "below the 4096-token minimum" in preds[0].note


def test_anthropic_caches_are_per_model():
    reqs = [turn(0, 1, model="claude-opus-5"), turn(30, 1, model="claude-sonnet-4-6")]
    assert ant(reqs, marks="recorded")[1].usage.cache_read == 0


def _long_turn_requests():
    """A conversation whose second turn adds 30 text blocks (30 lookback positions) in one message."""
    head = ("system", "sys", 20 * K)
    first_user = {"kind": "history", "name": "u0", "tokens": 1 * K}
    reply = {"kind": "history", "name": "a0", "tokens": 100}
    blocks = {"kind": "history", "name": "u1", "tokens": 30 * 100, "block_tokens": (100,) * 30}
    return [
        request(0, [head, first_user], rid="one"),
        request(60, [head, first_user, reply, blocks], rid="two"),
    ]


def test_anthropic_planned_bridge_keeps_the_previous_entry_within_lookback():
    preds = ant(_long_turn_requests())
    # Planned: head mark + newest mark on turn one; turn two adds a bridge on turn one's end.
    assert preds[1].usage.cache_read == 21 * K
    assert preds[1].usage.cache_write_5m == 3_100


def test_anthropic_without_a_bridge_the_lookback_falls_back_to_the_head():
    one, two = _long_turn_requests()
    # Recorded marks: only the newest block of each request, 31 positions past the old entry.
    def mark_last(r):
        last = r.sections[-1]
        block = max(len(last.block_tokens) - 1, 0)
        from hitrate.evals.whatif.types import SimMark

        return r.model_copy(update={"sections": (*r.sections[:-1], last.model_copy(update={"marks": (SimMark(block=block, ttl="5m"),)}))})

    preds = ant([mark_last(one), mark_last(two)], marks="recorded")
    assert preds[1].usage.cache_read == 0
    assert "lookback_exceeded" in preds[1].note


def test_anthropic_tool_result_runs_collapse_into_one_position():
    head = ("system", "sys", 20 * K)
    u0 = {"kind": "history", "name": "u0", "tokens": 1 * K}
    # 30 tool calls share position 3, their 30 results share position 4: the turn adds 2 positions.
    calls = {"kind": "history", "name": "calls", "tokens": 3_000, "block_tokens": (100,) * 30, "positions": (3,) * 30}
    results = {"kind": "history", "name": "results", "tokens": 3_000, "block_tokens": (100,) * 30, "positions": (4,) * 30}
    from hitrate.evals.whatif.types import SimMark

    def marked(spec, block):
        return {**spec, "marks": (SimMark(block=block, ttl="5m"),)}

    reqs = [
        request(0, [head, marked(u0, 0)], rid="one"),
        request(60, [head, u0, calls, marked(results, 29)], rid="two"),
    ]
    preds = ant(reqs, marks="recorded")
    assert preds[1].usage.cache_read == 21 * K


def test_anthropic_recorded_marks_over_four_are_refused():
    sections = [("history", f"m{i}", 2 * K, "5m") for i in range(5)]
    with pytest.raises(ValueError, match="at most 4"):
        ant([request(0, sections)], marks="recorded")


def test_anthropic_config_refuses_5m_head_with_1h_messages():
    with pytest.raises(ValueError, match="1h entries before 5m"):
        AnthropicSimConfig(min_cacheable_tokens=0, head_ttl="5m", message_ttl="1h")


# ---- OpenAI automatic prefix -------------------------------------------------------------------


def prefix(requests, **kw):
    return [p.usage.cache_read for p in simulate_prefix_cache(requests, PrefixSimConfig(**kw))]


def test_openai_in_memory_entry_dies_after_idle_time_but_reads_keep_it_alive():
    reqs = [turn(t, 1, model="gpt-4.1", rid=f"r{t}") for t in (0, 200, 400, 1000)]
    assert prefix(reqs) == [0, 20_992, 20_992, 0]


def test_openai_in_memory_hard_cap_of_one_hour_from_the_write():
    reqs = [turn(240 * i, 1, model="gpt-4.1", rid=f"r{i}") for i in range(17)]
    reads = prefix(reqs)
    assert reads[14] > 0  # 56 minutes after the write
    assert reads[15] == 0  # 60 minutes: gone, written again
    assert reads[16] > 0


def test_openai_24h_retention_survives_a_long_pause():
    reqs = [turn(0, 1, model="gpt-4.1"), turn(7200, 1, model="gpt-4.1", rid="later")]
    assert prefix(reqs)[1] == 0
    reads = [p.usage.cache_read for p in simulate_prefix_cache(reqs, PrefixSimConfig.retention("24h"))]
    assert reads[1] == 20_992


def test_openai_prompts_below_1024_tokens_are_not_cached():
    reqs = [request(i, [("system", "sys", 900), ("history", f"u{i}", 50)], model="gpt-4.1") for i in range(3)]
    assert prefix(reqs) == [0, 0, 0]


def test_openai_hit_needs_a_common_prefix_of_1024():
    reqs = [request(i, [("system", "sys", 1000), ("history", f"u{i}", 2000)], model="gpt-4.1") for i in range(2)]
    assert prefix(reqs) == [0, 0]


# ---- OpenAI exact breakpoints (>= 5.6) -------------------------------------------------------


def test_openai_breakpoints_read_the_previous_request_end_exactly_and_bill_writes():
    head = ("system", "sys", 20 * K)
    u0 = {"kind": "history", "name": "u0", "tokens": 2 * K}
    a0 = {"kind": "history", "name": "a0", "tokens": 500}
    u1 = {"kind": "history", "name": "u1", "tokens": 1 * K}
    reqs = [request(0, [head, u0], model="gpt-5.6", rid="one"), request(60, [head, u0, a0, u1], model="gpt-5.6", rid="two")]
    preds = simulate_openai_breakpoints(reqs, BreakpointSimConfig())
    first, second = (p.usage for p in preds)
    assert (first.cache_read, first.cache_write_30m, first.fresh_input) == (0, 22 * K, 0)
    assert (second.cache_read, second.cache_write_30m) == (22 * K, 1_500)


def test_openai_breakpoints_have_no_fallback_to_an_unmarked_prefix():
    # Explicit marks recorded only at the newest block: the shared 20K system has no mark, so a
    # request with a different user message reads nothing (automatic prefix caching would).
    reqs = [request(i * 60, [("system", "sys", 20 * K), ("history", f"u{i}", 2 * K)], model="gpt-5.6") for i in range(2)]
    preds = simulate_openai_breakpoints(reqs, BreakpointSimConfig(marks="recorded"))
    assert preds[1].usage.cache_read == 0
    planned = simulate_openai_breakpoints(reqs, BreakpointSimConfig())
    assert planned[1].usage.cache_read == 20 * K


def test_openai_breakpoints_expire_after_30_minutes():
    reqs = [request(t, [("system", "sys", 20 * K), ("history", f"u{t}", 2 * K)], model="gpt-5.6") for t in (0, 1900)]
    assert simulate_openai_breakpoints(reqs, BreakpointSimConfig())[1].usage.cache_read == 0


# ---- local radix cache -----------------------------------------------------------------------


def test_local_radix_reads_shared_sections_and_evicts_with_a_small_pool():
    reqs = [request(i, [("system", "sys", 5 * K), ("history", f"u{i}", 1 * K)], model="tiny") for i in range(4)]
    big = [p.usage.cache_read for p in simulate_local(reqs, LocalSimConfig(pool_tokens=100 * K))]
    assert big == [0, 5 * K, 5 * K, 5 * K]
    # A pool of 6K tokens holds one request: the next one's unmatched part evicts LRU leaves,
    # but the shared system prefix is on the matched path (locked), so it survives.
    small = [p.usage.cache_read for p in simulate_local(reqs, LocalSimConfig(pool_tokens=6 * K))]
    assert small == [0, 5 * K, 5 * K, 5 * K]
    # A 3K pool keeps only the first 3K tokens of the first prompt: later requests read just those.
    tiny = [p.usage.cache_read for p in simulate_local(reqs, LocalSimConfig(pool_tokens=3 * K))]
    assert tiny == [0, 3 * K, 3 * K, 3 * K]


def test_local_page_size_rounds_matches_down():
    reqs = [request(i, [("system", "sys", 1000), ("history", f"u{i}", 100)], model="tiny") for i in range(2)]
    assert simulate_local(reqs, LocalSimConfig(page_size=16))[1].usage.cache_read == 992


def test_local_uses_recorded_token_ids_when_present():
    a = request(0, [("system", "sys", 4)], model="tiny").model_copy(update={"token_ids": (1, 2, 3, 4)})
    b = request(1, [("system", "other", 4)], model="tiny").model_copy(update={"token_ids": (1, 2, 3, 9)})
    assert [p.usage.cache_read for p in simulate_local([a, b])] == [0, 3]


# ---- naive assembly ----------------------------------------------------------------------------


def _conversation(model: str):
    """Three turns; the dynamic context changes on turns one and three (tail sections)."""
    tools = ("tools", "tools", 3 * K)
    sysp = ("system", "sys", 5 * K)
    docs = ("docs", "docs", 0)
    u0 = ("tail", "ctx0", 100)
    turns = [
        [tools, sysp, docs, ("history", "u0", 1 * K), u0],
        [tools, sysp, docs, ("history", "u0", 1 * K), ("history", "ctx0", 100), ("history", "a0", 500), ("history", "u1", 500)],
        [
            tools, sysp, docs, ("history", "u0", 1 * K), ("history", "ctx0", 100), ("history", "a0", 500),
            ("history", "u1", 500), ("history", "a1", 500), ("history", "u2", 500), ("tail", "ctx2", 100),
        ],
    ]
    return [request(60 * i, t, model=model, rid=f"t{i}") for i, t in enumerate(turns)]


def test_naive_requests_keep_tokens_drop_marks_and_rekey_after_a_context_change():
    reqs = _conversation("gpt-4.1")
    naive = naive_requests(reqs)
    assert [r.prompt_tokens for r in naive] == [r.prompt_tokens for r in reqs]
    assert all(not s.marks for r in naive for s in r.sections)
    # The tools section keeps its hash; the system differs between turn 2 and 3 (context changed).
    assert naive[0].sections[0].hash == reqs[0].sections[0].hash
    assert naive[1].sections[1].hash == naive[0].sections[1].hash
    assert naive[2].sections[1].hash != naive[1].sections[1].hash


def test_naive_assembly_reads_only_the_tools_prefix_after_a_context_change():
    reqs = _conversation("gpt-4.1")
    aware = prefix(reqs, granularity=1)
    naive = [p.usage.cache_read for p in simulate_prefix_cache(naive_requests(reqs), PrefixSimConfig(granularity=1))]
    assert aware == [0, 9_100, 10_100]
    assert naive == [0, 9_100, 3 * K]


def test_naive_per_request_volatility_reads_only_tools():
    reqs = _conversation("gpt-4.1")
    naive = naive_requests(reqs, "request")
    assert [p.usage.cache_read for p in simulate_prefix_cache(naive, PrefixSimConfig(granularity=1))] == [0, 3 * K, 3 * K]


def test_naive_on_anthropic_caches_nothing():
    reqs = _conversation("claude-sonnet-4-6")
    preds = simulate_anthropic(naive_requests(reqs), AnthropicSimConfig(min_cacheable_tokens=1024, marks="recorded"))
    assert all(p.usage.cache_read == 0 and p.usage.cache_write_total == 0 for p in preds)

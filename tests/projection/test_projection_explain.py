"""One example of every miss label, plus the provider-specific hit rules."""

from __future__ import annotations

from projection_builders import ANTHROPIC, TOOLS, Session, calls, results, user

from hitrate.projection.caching import CacheRules
from hitrate.projection.explain import explain_miss
from hitrate.projection.prompt import Prompt
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock, Transcript


def _explain(prev: Prompt | None, cur: Prompt, *, gap: float = 10, models=("model-a", "model-a"), rules=ANTHROPIC, read=None, **kw):
    return explain_miss(prev, cur, seconds_since_previous=gap, previous_model=models[0], current_model=models[1],
                        rules=rules, reported_cache_read=read, **kw)


def _two_requests(**session_kw) -> tuple[Session, Prompt, Prompt]:
    s = Session(**session_kw)
    s.append(user("please fix the failing test " * 40))
    first = s.send()
    second = s.tool_round("a", 2, output="line\n" * 100)
    return s, first, second


def test_cold_first_request() -> None:
    s = Session()
    s.append(user("hello " * 200))
    prompt = s.send()
    verdict = _explain(None, prompt, read=0)
    assert (verdict.label, verdict.tokens_missed) == ("cold", prompt.breakpoints[-1].prefix_tokens)


def test_first_request_with_a_partial_read_is_still_cold_with_the_unread_tokens() -> None:
    # Another session's entry can cover the request's opening bytes (the chat template before a
    # volatile system prompt, a shared tool list): a read, but far from all the request could read.
    local = CacheRules(family="local")
    s = Session()
    s.append(user("hello " * 400))
    prompt = s.send()
    whole = prompt.total_tokens
    partial = whole // 7
    verdict = _explain(None, prompt, rules=local, read=partial)
    assert (verdict.reason, verdict.label, verdict.tokens_missed) == ("cold", "cold", whole - partial)
    assert f"{partial} tokens read" in verdict.detail
    # Calibrated to the provider's own prompt count, like every other label.
    verdict = _explain(None, prompt, rules=local, read=partial * 2, reported_prompt_tokens=whole * 2)
    assert (verdict.label, verdict.tokens_missed) == ("cold", 2 * whole - 2 * partial)
    # Marks: what the request could cache ends at its last mark.
    marked = _explain(None, prompt, read=prompt.head_tokens)
    assert (marked.label, marked.tokens_missed) == ("cold", prompt.breakpoints[-1].prefix_tokens - prompt.head_tokens)
    # A read of (about) everything cacheable is a hit on an entry from outside the session.
    assert _explain(None, prompt, rules=local, read=whole - 3).label == "hit"
    assert _explain(None, prompt, read=prompt.breakpoints[-1].prefix_tokens).label == "hit"


def test_hit_when_the_provider_read_the_previous_prefix() -> None:
    _, first, second = _two_requests()
    ideal = first.breakpoints[-1].prefix_tokens
    assert _explain(first, second, read=ideal).label == "hit"
    assert _explain(first, second, read=None).label == "hit"  # predicted
    # Calibrated against the provider's own token count (estimates are ~4 bytes/token).
    scale = 1.3
    verdict = _explain(first, second, read=round(ideal * scale), reported_prompt_tokens=round(second.total_tokens * scale))
    assert verdict.label == "hit"


def test_ttl_expired_after_an_idle_gap() -> None:
    _, first, second = _two_requests()
    verdict = _explain(first, second, gap=400, read=0)
    assert verdict.label == "ttl_expired"
    assert verdict.tokens_missed == first.breakpoints[-1].prefix_tokens
    assert "300s lifetime" in verdict.detail


def test_one_hour_head_survives_a_gap_that_expires_the_history() -> None:
    rules = CacheRules(family="anthropic", min_cacheable_tokens=200, head_ttl="1h")
    _, first, second = _two_requests(rules=rules)
    verdict = _explain(first, second, gap=900, rules=rules, read=first.head_tokens)
    assert verdict.label == "ttl_expired"
    assert verdict.expected_read == first.head_tokens
    assert verdict.tokens_missed == first.breakpoints[-1].prefix_tokens - first.head_tokens


def test_prefix_changed_in_the_system_prompt_names_the_line() -> None:
    s, first, _ = _two_requests()
    s.append(calls("b", 1), results(calls("b", 1)))
    changed = s.send(system="You are hitrate, a coding agent.\nWork in BIG steps.\n")
    verdict = _explain(s.prompts[1], changed, read=0)
    assert verdict.label == "prefix_changed(system, line 2)"
    assert (verdict.section_kind, verdict.section_index, verdict.path) == ("system", 0, "line 2")
    assert verdict.tokens_missed == s.prompts[1].breakpoints[-1].prefix_tokens


def test_prefix_changed_in_a_tool_schema_names_the_json_path() -> None:
    s, _, second = _two_requests()
    altered = [t if t.name != "edit_file" else ToolSpec(name="edit_file", description="Replace text.",
                                                         input_schema=t.input_schema) for t in TOOLS]
    s.append(calls("b", 1), results(calls("b", 1)))
    third = s.send(tools=altered)
    verdict = _explain(second, third)
    assert verdict.label == "prefix_changed(tools, $[1].description)"
    assert verdict.expected_read == 0


def test_prefix_changed_in_history_names_message_block_and_line() -> None:
    s, first, second = _two_requests()
    # A condenser that rewrites an old tool result: the history is no longer append-only.
    edited = list(s.transcript.messages)
    old = edited[2]
    new_result = old.content[0].model_copy(update={"content": "line\n" * 50 + "CHANGED\n"})
    edited[2] = old.model_copy(update={"content": (new_result, *old.content[1:])})
    s.transcript = Transcript(messages=tuple(edited))
    s.append(calls("c", 1), results(calls("c", 1)))
    third = s.send()
    verdict = _explain(second, third, read=second.head_tokens)
    assert verdict.label == "prefix_changed(history[3], $.content[0].content, line 51)"
    assert verdict.expected_read == second.head_tokens
    assert verdict.tokens_missed == second.breakpoints[-1].prefix_tokens - second.head_tokens


def test_forgetting_to_freeze_the_tail_is_a_prefix_change() -> None:
    s = Session()
    s.append(user("start " * 200))
    first = s.send()
    s.context = {"date": "2026-11-29", "cwd": "/elsewhere"}
    unfrozen = Transcript(messages=s.transcript.messages[:-1] + (user("start " * 200),))
    s.transcript = unfrozen
    second = s.send()
    assert _explain(first, second).label == "prefix_changed(tail, $.text, line 2)"


def test_model_changed() -> None:
    s, first, _ = _two_requests()
    s.append(calls("b", 1), results(calls("b", 1)))
    other = s.send(model="model-b")
    verdict = _explain(s.prompts[1], other, models=("model-a", "model-b"), read=0)
    assert verdict.label == "model_changed"
    assert verdict.tokens_missed == s.prompts[1].breakpoints[-1].prefix_tokens


def test_below_min_tokens_when_the_previous_prompt_was_too_short() -> None:
    rules = CacheRules(family="anthropic", min_cacheable_tokens=4096)
    s = Session(rules=rules)
    s.append(user("hi"))
    first = s.send()
    second = s.tool_round("a", 1)
    verdict = _explain(first, second, rules=rules, read=0)
    assert verdict.label == "below_min_tokens"
    assert verdict.tokens_missed == first.total_tokens


def _burst_requests(rules: CacheRules) -> tuple[Prompt, Prompt]:
    s = Session(rules=rules)
    s.append(user("start " * 200))
    first = s.send()
    blocks: list = []
    for i in range(15):
        blocks += [TextBlock(text=f"step {i}"), ToolCallBlock(call_id=f"b{i}", name="bash", arguments="{}")]
    burst = AssistantMessage(content=tuple(blocks))
    s.append(burst, results(burst))
    return first, s.send()


def test_lookback_exceeded_when_no_mark_bridges_a_long_turn() -> None:
    first, second = _burst_requests(ANTHROPIC)
    assert _explain(first, second, read=None).label == "hit"  # our plan bridges it
    naive = second.model_copy(update={"breakpoints": tuple(b for b in second.breakpoints if b.purpose != "bridge")})
    verdict = _explain(first, naive, read=first.head_tokens)
    assert verdict.label == "lookback_exceeded"
    assert verdict.tokens_missed == first.breakpoints[-1].prefix_tokens - first.head_tokens


def test_breakpoint_budget_when_the_marks_ran_out() -> None:
    rules = CacheRules(family="anthropic", min_cacheable_tokens=200, max_marks=2)
    first, second = _burst_requests(rules)
    assert len(second.breakpoints) == 2
    assert _explain(first, second, rules=rules, read=None).label == "breakpoint_budget"


def test_exact_match_breakpoints_of_earlier_requests_are_still_searched() -> None:
    # "The latest 50 breakpoints in the conversation are considered": the previous request's own
    # (implicit) breakpoint is found again even when this request does not mark that block, or
    # implicit mode could never hit across turns. The replay and the explainer agree on it.
    rules = CacheRules(family="openai_breakpoints", min_cacheable_tokens=200)
    _, first, second = _two_requests(rules=rules)
    assert _explain(first, second, rules=rules).label == "hit"
    unsticky = second.model_copy(update={"breakpoints": second.breakpoints[-1:]})
    verdict = _explain(first, unsticky, rules=rules)
    assert verdict.label == "hit" and verdict.expected_read == first.breakpoints[-1].prefix_tokens


def test_unknown_when_nothing_explains_a_missing_read() -> None:
    _, first, second = _two_requests()
    verdict = _explain(first, second, gap=30, read=0)
    assert verdict.label == "unknown"
    assert verdict.tokens_missed == first.breakpoints[-1].prefix_tokens


def test_openai_implicit_rounds_to_128_and_ignores_prompts_under_1024() -> None:
    rules = CacheRules(family="openai_implicit", min_cacheable_tokens=1024)
    _, first, second = _two_requests(rules=rules)
    assert first.total_tokens < 1024
    assert _explain(first, second, rules=rules).label == "below_min_tokens"
    s = Session(rules=rules)
    s.append(user("long " * 2000))
    a = s.send()
    b = s.tool_round("x", 1)
    verdict = _explain(a, b, rules=rules, read=0)
    assert verdict.label == "unknown" and verdict.tokens_missed == (a.total_tokens // 128) * 128
    assert _explain(a, b, rules=rules, gap=600, read=0).label == "ttl_expired"


def test_deepseek_unit_rule_a_then_a_plus_c_misses() -> None:
    rules = CacheRules(family="deepseek", min_cacheable_tokens=0)
    s = Session(rules=rules)
    s.append(user("A " * 400))
    first = s.send()
    s2 = Session(rules=rules)
    s2.append(user("A " * 400 + "C"))
    other = s2.send()
    verdict = _explain(first, other, rules=rules, read=0)
    assert verdict.label.startswith("prefix_changed(history[0], $.content[0].text")
    assert verdict.expected_read == 0  # A alone was never a saved unit

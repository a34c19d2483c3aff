"""The planner, the miss explainer, the replay simulator and the TTL clock agree on every call.

Random sessions (turns, tool bursts, gaps, system and model changes) are projected with each family's
rules; every request is then
- explained against the previous one (`explain_miss`, no provider count: a prediction),
- stepped through one cache of the family that has seen the whole session (the what-if's replay),
- and put on the TTL clock anchored at the previous request.
The explainer's expected read must be what the simulator reads, its label must say "hit" exactly
when nothing the previous request left was lost, and a "warm" clock must never meet `ttl_expired`.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projection_builders import SYSTEM, Session, calls, results, user

from hitrate.projection.cache_view import cache_request, earlier_request_ends
from hitrate.projection.caching import CacheRules, family_for
from hitrate.projection.caching.ttl import ttl_seconds
from hitrate.projection.explain import explain_miss
from hitrate.projection.project import SystemPrompt
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock
from hitrate.tui.ttl import cache_clock

RULES = [
    CacheRules(family="anthropic", min_cacheable_tokens=300),
    CacheRules(family="anthropic", min_cacheable_tokens=0, head_ttl="1h", message_ttl="5m"),
    CacheRules(family="anthropic", min_cacheable_tokens=0, max_marks=2),
    CacheRules(family="openai_implicit", min_cacheable_tokens=256),
    CacheRules(family="openai_implicit", min_cacheable_tokens=256, extended_retention=True),
    CacheRules(family="openai_breakpoints", min_cacheable_tokens=300),
    CacheRules(family="deepseek"),
    CacheRules(family="gemini", min_cacheable_tokens=256),
    CacheRules(family="openai_compat"),
    CacheRules(family="local"),
]
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
OTHER_SYSTEM = SystemPrompt(template=SYSTEM.template + "Prefer the standard library.\n", variables=SYSTEM.variables)

step = st.one_of(
    st.tuples(st.just("turn"), st.integers(20, 400)),
    st.tuples(st.just("tools"), st.integers(1, 30)),
    st.tuples(st.just("rounds"), st.integers(2, 14)),
    st.tuples(st.just("system"), st.just(0)),
    st.tuples(st.just("model"), st.just(0)),
)
gap = st.sampled_from([1.0, 30.0, 200.0, 299.0, 301.0, 900.0, 1799.0, 1801.0, 3599.0, 3601.0, 7200.0])


def _session(rules: CacheRules, steps: list[tuple[str, int]], gaps: list[float]):
    """The prompts of one session and when each was sent."""
    s = Session(rules=rules)
    s.append(user("please fix the failing test " * 30))
    prompts = [s.send()]
    system, model = SYSTEM, "model-a"
    for i, (kind, n) in enumerate(steps):
        if kind == "turn":
            reply = calls(f"t{i}", 1)
            s.append(reply, results(reply, "line\n" * n, extra_text="and the next thing"))
        elif kind == "rounds":
            # A reply that narrates between its tool calls: text and tool_use alternate, so every
            # block is a lookback position of its own and one turn can outrun the lookback.
            blocks = []
            for k in range(n):
                blocks += [TextBlock(text=f"step {k}: reading the next file"), ToolCallBlock(call_id=f"w{i}-{k}", name="read_file", arguments='{"path": "a.py"}')]
            reply = AssistantMessage(content=tuple(blocks))
            s.append(reply, results(reply, "ok\n" * 5))
        elif kind == "tools":
            reply = calls(f"b{i}", n)
            s.append(reply, results(reply, "out\n" * 20))
        elif kind == "system":
            system = OTHER_SYSTEM if system is SYSTEM else SYSTEM
            reply = calls(f"s{i}", 1)
            s.append(reply, results(reply, "ok"))
        else:
            model = "model-b" if model == "model-a" else "model-a"
            reply = calls(f"m{i}", 1)
            s.append(reply, results(reply, "ok"))
        prompts.append(s.send(system=system, model=model))
    times = [T0]
    for g in gaps[: len(prompts) - 1]:
        times.append(times[-1] + timedelta(seconds=g))
    return prompts, times


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rules=st.sampled_from(RULES),
    steps=st.lists(step, min_size=1, max_size=7),
    gaps=st.lists(gap, min_size=7, max_size=7),
)
def test_explainer_simulator_and_clock_agree(rules: CacheRules, steps, gaps) -> None:
    prompts, times = _session(rules, steps, gaps)
    family = family_for(rules)
    # The explainer's cache: stepped with each request as the session sends it (marks as planned
    # by the projection). The replay's cache: the what-if's, planning its own marks for mark
    # families from what it remembers of the session, not from the transcript.
    explained = family.cache()
    replay = family.cache(marks="planned") if rules.places_marks else family.cache()
    structural = ("prefix_changed", "model_changed", "lookback_exceeded", "breakpoint_budget", "below_min_tokens")
    for i, (prompt, when) in enumerate(zip(prompts, times)):
        replayed = replay.step(cache_request(prompt, started_at=when)).read
        previous = prompts[i - 1] if i else None
        seconds = (when - times[i - 1]).total_seconds() if i else 0.0
        verdict = explain_miss(
            previous,
            prompt,
            seconds_since_previous=seconds,
            previous_model=previous.model if previous else prompt.model,
            current_model=prompt.model,
            rules=rules,
            reported_cache_read=None,
            cache=explained,
            started_at=when,
        )
        where = f"call {i} ({verdict.label}, {seconds:.0f}s after the previous)"
        if i == 0:
            assert verdict.reason == "cold" and replayed == 0, where
            continue
        # The planner and the replay agree on the marks, so on what is read.
        assert replayed == verdict.expected_read, where
        left = family.entries_left(cache_request(previous), earlier_request_ends(previous))
        ideal = max((e.tokens for e in left if e.tokens >= max(1, rules.min_cacheable_tokens)), default=0)
        if verdict.reason == "hit":
            # Nothing the previous request left was lost.
            assert verdict.tokens_missed == 0 and replayed >= ideal, where
        else:
            assert verdict.tokens_missed > 0 or verdict.reason == "below_min_tokens", where
            assert replayed < ideal or verdict.reason == "model_changed", where
        written = [m.ttl for m in previous.breakpoints]
        lifetime = family.lifetime(min(written, key=ttl_seconds) if written else None)
        clock = cache_clock(when, times[i - 1], lifetime)
        if verdict.reason == "ttl_expired":
            assert clock.state != "warm", where
        if clock.state == "warm" and verdict.reason not in structural:
            assert verdict.reason == "hit", where

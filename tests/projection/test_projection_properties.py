"""Property tests over random sessions: determinism, append-only sections, sound mark plans."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projection_builders import ANTHROPIC, SYSTEM, TOOLS

from hitrate.projection.caching import CacheRules
from hitrate.projection.explain import explain_miss
from hitrate.projection.project import Projector, project
from hitrate.projection.caching.ttl import TTL_SECONDS
from hitrate.projection.prompt import Prompt
from hitrate.projection.transcript import (
    AssistantMessage,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
    UserMessage,
)

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
# Large tool outputs without making hypothesis generate megabytes character by character.
BIG = st.builds(lambda piece, n: piece * n, st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12), st.integers(0, 3000))
CONTEXT = st.dictionaries(st.sampled_from(["date", "cwd", "git_status", "budget_left"]), TEXT, max_size=4)


@st.composite
def rounds(draw) -> list[tuple[AssistantMessage, UserMessage, dict[str, str]]]:
    """Model turns (text, thinking, parallel tool calls) each answered by a user turn."""
    out = []
    for r in range(draw(st.integers(1, 6))):
        blocks: list = []
        if draw(st.booleans()):
            blocks.append(ThinkingBlock(thinking=draw(TEXT), signature=draw(st.none() | TEXT)))
        for _ in range(draw(st.integers(0, 2))):
            blocks.append(TextBlock(text=draw(TEXT)))
        n_calls = draw(st.integers(0, 6))
        for i in range(n_calls):
            # Raw arguments: whatever the model emitted, valid JSON or not.
            blocks.append(ToolCallBlock(call_id=f"c{r}-{i}", name="read_file", arguments=draw(TEXT)))
        if not blocks:
            blocks.append(TextBlock(text="ok"))
        reply = AssistantMessage(content=tuple(blocks))
        answer: list = [
            ToolResultBlock(call_id=c.call_id, content=draw(BIG | TEXT), is_error=draw(st.booleans()))
            for c in reply.tool_calls
        ]
        if not answer or draw(st.booleans()):
            answer.append(TextBlock(text=draw(TEXT) or "next"))
        out.append((reply, UserMessage(content=tuple(answer)), draw(CONTEXT)))
    return out


RULES = st.sampled_from([
    ANTHROPIC,
    CacheRules(family="anthropic", min_cacheable_tokens=0, lookback=3, head_ttl="1h"),
    CacheRules(family="openai_breakpoints", min_cacheable_tokens=50),
    CacheRules(family="openai_implicit", min_cacheable_tokens=1024),
    CacheRules(family="deepseek"),
])

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _drive(first_text: str, first_context: dict, plan, rules: CacheRules) -> tuple[list[Prompt], Transcript, list[Transcript]]:
    projector = Projector(rules, session_id="prop")
    transcript = Transcript().append(UserMessage(content=(TextBlock(text=first_text or "start"),)))
    prompts, inputs = [], []
    contexts = [first_context] + [c for _, _, c in plan]
    for step in range(len(plan) + 1):
        if step:
            reply, answer, _ = plan[step - 1]
            transcript = transcript.append(reply).append(answer)
        inputs.append(transcript)
        prompt = projector.project(model="m", tools=TOOLS, system=SYSTEM, docs="Docs ✓", transcript=transcript, context=contexts[step])
        prompts.append(prompt)
        transcript = transcript.freeze_context(prompt.tail)
    return prompts, transcript, inputs


@FAST
@given(first=TEXT, ctx=CONTEXT, plan=rounds(), rules=RULES)
def test_appending_a_turn_never_changes_an_earlier_section(first, ctx, plan, rules) -> None:
    prompts, _, _ = _drive(first, ctx, plan, rules)
    for before, after in zip(prompts, prompts[1:]):
        assert len(after.sections) > len(before.sections)
        for old, new in zip(before.sections, after.sections):
            assert (old.data, old.hash, old.prefix_tokens) == (new.data, new.hash, new.prefix_tokens)
        # Messages already sent go out again as the very same objects, tail included.
        assert after.messages[: len(before.messages)] == before.messages


@FAST
@given(first=TEXT, ctx=CONTEXT, plan=rounds(), rules=RULES)
def test_same_inputs_give_the_same_bytes_hashes_and_marks(first, ctx, plan, rules) -> None:
    prompts, _, inputs = _drive(first, ctx, plan, rules)
    last_context = ([ctx] + [c for _, _, c in plan])[-1]
    copy = Transcript.model_validate_json(inputs[-1].model_dump_json())  # equal content, new objects
    fresh = project(rules=rules, model="m", tools=list(reversed(TOOLS)), system=SYSTEM, docs="Docs ✓",
                    transcript=copy, context=last_context, session_id="prop")
    last = prompts[-1]
    assert [s.data for s in fresh.sections] == [s.data for s in last.sections]
    assert fresh.section_hashes() == last.section_hashes()
    assert fresh.breakpoints == last.breakpoints
    assert fresh.prompt_cache_key == last.prompt_cache_key
    assert fresh.tail == last.tail


@FAST
@given(first=TEXT, ctx=CONTEXT, plan=rounds(), rules=RULES)
def test_planned_marks_respect_the_provider_limits_and_keep_hitting(first, ctx, plan, rules) -> None:
    prompts, _, _ = _drive(first, ctx, plan, rules)
    for prompt in prompts:
        marks = prompt.breakpoints
        if rules.family == "anthropic":
            assert len(marks) <= rules.max_marks
        ttls = [TTL_SECONDS[m.ttl] for m in marks]
        assert ttls == sorted(ttls, reverse=True)
        for m in marks:
            assert m.prefix_tokens >= rules.min_cacheable_tokens
            block = prompt.messages[m.message_index].content[m.block_index] if m.message_index is not None else None
            assert not isinstance(block, ThinkingBlock)
    # Within the TTL, with nothing but appends, every request after the first should read the last one.
    for before, after in zip(prompts, prompts[1:]):
        verdict = explain_miss(before, after, seconds_since_previous=1, previous_model="m", current_model="m",
                               rules=rules, reported_cache_read=None)
        assert verdict.reason in ("hit", "below_min_tokens"), verdict

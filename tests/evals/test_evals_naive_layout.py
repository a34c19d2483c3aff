"""The naive layout really differs from the cache-aware one: volatile head, unsorted tools, no marks."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from evals_task_factory import write_task
from runner_fakes import FakeRoutes, PrefixCacheBackend

from hitrate.evals.naive import NAIVE_TOOL_ORDER, NaiveAssembler, environment_block, registration_order
from hitrate.evals.nonce import run_nonce, with_run_nonce
from hitrate.evals.runner import run_eval
from hitrate.evals.settings import EvalSettings
from hitrate.harness.session import session_inputs
from hitrate.harness.wire.anthropic import render_messages_request
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.transcript import TextBlock, Transcript, UserMessage
from hitrate.store.ledger import Ledger

RULES = CacheRules(family="anthropic", min_cacheable_tokens=0)


class StepClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 30, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=7)
        return self.now


def _transcript(text: str = "Fix the bug.") -> Transcript:
    return Transcript().append(UserMessage(content=(TextBlock(text=text),)))


def test_naive_prompt_has_volatile_head_unsorted_tools_and_no_marks(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Run the tests.\n")
    inputs = session_inputs(tmp_path)
    context = {"date": "2026-03-01", "workspace": str(tmp_path), "budget left": "9 model calls"}
    naive = NaiveAssembler(RULES, clock=StepClock())
    aware = Projector(RULES).project(model="m", tools=inputs.tool_specs, system=inputs.system, transcript=_transcript(),
                                     docs=inputs.docs, context=context)  # fmt: skip
    first = naive.project(model="m", tools=inputs.tool_specs, system=inputs.system, transcript=_transcript(), docs=inputs.docs,
                          context=context)  # fmt: skip
    # Same content: the tools, the template and the docs; only the assembly differs.
    assert sorted(t.name for t in first.tools) == sorted(t.name for t in aware.tools)
    assert [t.name for t in first.tools] == [n for n in NAIVE_TOOL_ORDER if n in {t.name for t in aware.tools}]
    assert [t.name for t in first.tools] != [t.name for t in aware.tools]
    assert first.system.startswith(aware.system) and first.docs == aware.docs
    assert "Current date and time: 2026-03-01 09:30:07 UTC" in first.system
    assert f"Working directory: {tmp_path}" in first.system and "Budget left: 9 model calls" in first.system
    assert aware.breakpoints and aware.tail is not None
    assert first.breakpoints == () and first.prompt_cache_key is None and first.tail is None
    body = render_messages_request(first, max_tokens=16)
    assert "cache_control" not in str(body)
    assert "cache_control" in str(render_messages_request(aware, max_tokens=16))

    # The next request: same transcript, new time -> the system section and everything after it change.
    second = naive.project(model="m", tools=inputs.tool_specs, system=inputs.system, transcript=_transcript(), docs=inputs.docs,
                           context=context)  # fmt: skip
    assert second.sections[0].hash == first.sections[0].hash
    assert second.sections[1].hash != first.sections[1].hash and second.sections[-1].hash != first.sections[-1].hash
    assert first.epoch_started and not second.epoch_started
    # The cache-aware projection of the same turn keeps every section of its head.
    again = Projector(RULES).project(model="m", tools=inputs.tool_specs, system=inputs.system, transcript=_transcript(),
                                     docs=inputs.docs, context={**context, "budget left": "8 model calls"})  # fmt: skip
    assert [s.hash for s in again.sections[:4]] == [s.hash for s in aware.sections[:4]]


def test_registration_order_and_environment_block():
    inputs = session_inputs_for_order()
    ordered = registration_order(inputs)
    assert [t.name for t in ordered][:3] == ["read_file", "write_file", "edit_file"]
    assert [t.name for t in ordered][-1] == "zz_custom"  # unknown tools keep their place after the known ones
    block = environment_block({"git": "branch main, 0 changed files", "date": "2026-01-01"}, datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert block.splitlines() == ["# Environment", "Current date and time: 2026-01-01 00:00:00 UTC", "Git status: branch main, 0 changed files"]


def session_inputs_for_order():
    from hitrate.projection.tools_spec import ToolSpec

    names = ["shell", "zz_custom", "edit_file", "read_file", "write_file"]
    return [ToolSpec(name=n, description=n) for n in names]


def test_run_nonce_goes_first_in_both_layouts(tmp_path):
    inputs = session_inputs(tmp_path)
    nonce = run_nonce("run-1")
    assert nonce == run_nonce("run-1") != run_nonce("run-2") and len(nonce) == 16
    aware_first = sorted(t.name for t in inputs.tool_specs)[0]
    marked = with_run_nonce(inputs, nonce, aware_first)
    prompt = Projector(RULES).project(model="m", tools=marked.tool_specs, system=marked.system, transcript=_transcript())
    assert prompt.tools[0].description.startswith(f"[eval run {nonce}]")
    assert prompt.system.startswith(f"[eval run {nonce}]\n")
    assert sum(nonce in t.description for t in prompt.tools) == 1
    naive_first = registration_order(inputs.tool_specs)[0].name
    naive = NaiveAssembler(RULES).project(model="m", tools=with_run_nonce(inputs, nonce, naive_first).tool_specs,
                                          system=marked.system, transcript=_transcript())  # fmt: skip
    assert naive.tools[0].description.startswith(f"[eval run {nonce}]")
    plain = Projector(RULES).project(model="m", tools=inputs.tool_specs, system=inputs.system, transcript=_transcript())
    assert plain.sections[0].hash != prompt.sections[0].hash  # nothing cached without the nonce can match


def test_naive_run_reads_only_the_tools_prefix(tmp_path):
    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    backend = PrefixCacheBackend()
    db = tmp_path / "naive.db"
    settings = EvalSettings(suite=str(suite), model="openai-compat/fake@http://127.0.0.1:9/v1", policy="replay", layout="naive")
    result = run_eval(settings, db_path=db, routes=FakeRoutes(backend), naive_clock=StepClock())
    assert result.results[0].outcome == "pass"
    prompts = backend.prompts
    assert all(p.breakpoints == () and "Current date and time" in p.system for p in prompts)
    assert len({p.sections[1].hash for p in prompts}) == len(prompts)  # a new system section every request
    assert backend.usages[0].cache_read == 0
    assert all(u.cache_read == p.sections[0].prefix_tokens for u, p in zip(backend.usages[1:], prompts[1:]))
    with Ledger(db) as ledger:
        calls = ledger.calls(run_id=result.run_id)
    assert {c.layout for c in calls} == {"naive"}
    assert all(c.miss_reason and c.miss_reason.startswith("prefix_changed(system") for c in calls[1:])


def test_naive_first_call_that_reads_another_tasks_tools_is_recorded_cold(tmp_path):
    # Both tasks of a run share the nonce, so the second task's first request reads the first one's
    # tools section from the cache: a partial read, still a cold start of that session.
    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    write_task(suite, "fix-add-again")
    backend = PrefixCacheBackend()
    db = tmp_path / "naive.db"
    settings = EvalSettings(suite=str(suite), model="openai-compat/fake@http://127.0.0.1:9/v1", policy="replay", layout="naive")
    result = run_eval(settings, db_path=db, routes=FakeRoutes(backend), naive_clock=StepClock())
    assert [r.outcome for r in result.results] == ["pass", "pass"]
    with Ledger(db) as ledger:
        calls = ledger.calls(run_id=result.run_id)
    firsts = [next(c for c in calls if c.session_id == s) for s in dict.fromkeys(c.session_id for c in calls)]
    assert len(firsts) == 2
    partial = [c for c in firsts if c.usage.cache_read]
    assert len(partial) == 1  # the later task's first call
    (call,) = partial
    assert call.miss_reason == "cold"
    assert call.miss_tokens == call.usage.prompt_tokens - call.usage.cache_read > 0
    assert all(c.miss_reason == "cold" for c in firsts)


def test_an_effort_change_is_an_epoch_in_the_naive_layout_too():
    from hitrate.evals.naive import NaiveAssembler
    from hitrate.projection.caching import CacheRules
    from hitrate.projection.transcript import TextBlock, Transcript, UserMessage

    assembler = NaiveAssembler(CacheRules(family="anthropic"))
    transcript = Transcript().append(UserMessage(content=(TextBlock(text="hi"),)))
    args = dict(model="m", tools=[], system="s", transcript=transcript)
    first = assembler.project(**args, effort="high")
    same = assembler.project(**args, effort="high")
    changed = assembler.project(**args, effort="low")
    assert first.epoch_started and not same.epoch_started and changed.epoch_started
    assert changed.epoch.changes == ("effort",) and changed.epoch.reason == "effort high -> low"

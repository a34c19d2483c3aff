"""Lint findings: volatile text in the head, tool order, per-run values in schemas, mark limits."""

from __future__ import annotations

from projection_builders import ANTHROPIC, TOOLS, Session, results, user

from hitrate.projection.caching import CacheRules
from hitrate.projection.lint import lint
from hitrate.projection.prompt import Breakpoint, Prompt
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import AssistantMessage, ThinkingBlock, ToolCallBlock


def _codes(prompt: Prompt, rules: CacheRules = ANTHROPIC) -> dict[str, list]:
    found: dict[str, list] = {}
    for f in lint(prompt, rules):
        found.setdefault(f.code, []).append(f)
    return found


def _prompt(system: str = "You are a careful agent.", tools=TOOLS, docs: str = "", rules=ANTHROPIC, context=None) -> Prompt:
    s = Session(rules=rules, system=system, tools=tools, docs=docs)
    if context is not None:
        s.context = context
    s.append(user("go " * 300))
    return s.send()


def test_a_clean_prompt_has_no_findings() -> None:
    assert lint(_prompt(), ANTHROPIC) == []


def test_volatile_text_in_the_system_prompt_is_flagged_with_its_line() -> None:
    system = (
        "You are an agent.\n"
        "Current time: 14:05:33\n"
        "Today is Nov 29, 2026 (2026-11-29).\n"
        "Session 4f9c2a1e-7b3d-4c8e-9a0f-1d2e3f4a5b6c, turn 17, 12,000 tokens left.\n"
        "Scratch dir: /tmp/tmpa8f3k2l1/work\n"
    )
    found = _codes(_prompt(system=system))
    assert found["volatile_time"][0].location == "line 2"
    assert found["volatile_date"][0].location == "line 3"
    assert found["volatile_uuid"][0].location == "line 4"
    assert found["volatile_counter"][0].location == "line 4"
    assert found["volatile_temp_path"][0].location == "line 5"
    assert all(f.severity == "warning" and f.section == "system" for fs in found.values() for f in fs if f.code != "head_below_min")


def test_volatile_text_in_docs_is_only_informational() -> None:
    found = _codes(_prompt(docs="Last release 2024-05-01."))
    assert found["volatile_date"][0].severity == "info" and found["volatile_date"][0].section == "docs"


def test_tool_schema_embedding_the_cwd_is_an_error_with_its_json_path() -> None:
    bad = ToolSpec(
        name="bash",
        description="Run a command.",
        input_schema={"type": "object", "properties": {"cwd": {"type": "string", "default": "/home/dev/project-x"}}},
    )
    prompt = _prompt(tools=[bad], context={"cwd": "/home/dev/project-x", "date": "2026-11-29"})
    finding = _codes(prompt)["tool_schema_per_run_value"][0]
    assert finding.severity == "error" and finding.location == "$[0].input_schema.properties.cwd.default"
    assert "/home/dev/project-x" in finding.message


def test_home_paths_in_tool_schemas_are_flagged_without_context() -> None:
    bad = ToolSpec(name="bash", input_schema={"type": "object", "properties": {}, "description": "Logs go to /Users/ann/logs"})
    finding = _codes(_prompt(tools=[bad], context={}))["tool_schema_per_run_value"][0]
    assert finding.severity == "warning" and finding.location == "$[0].input_schema.description"


def test_cwd_in_the_system_prompt_is_a_warning() -> None:
    prompt = _prompt(system="Work inside /home/dev/project-x only.", context={"cwd": "/home/dev/project-x"})
    assert _codes(prompt)["head_per_run_value"][0].location == "line 1"


def test_unsorted_or_duplicate_tools_are_flagged() -> None:
    prompt = _prompt()
    shuffled = prompt.model_copy(update={"tools": tuple(reversed(prompt.tools))})
    found = _codes(shuffled)
    assert "tool_order" in found and "tools_not_canonical" in found
    dup = prompt.model_copy(update={"tools": (prompt.tools[0], prompt.tools[0])})
    assert "duplicate_tool" in _codes(dup)


def test_marks_below_the_minimum_too_many_and_bad_ttl_order() -> None:
    prompt = _prompt()
    head, newest = prompt.breakpoints
    extra = [newest.model_copy(update={"ttl": "1h"})] * 4
    crowded = prompt.model_copy(update={"breakpoints": (head, *extra)})
    found = _codes(crowded, CacheRules(family="anthropic", min_cacheable_tokens=100_000))
    assert found["too_many_marks"][0].severity == "error"
    assert len(found["mark_below_min"]) == 5
    assert found["ttl_order"][0].location == "breakpoint 1"


def test_a_mark_on_a_thinking_block_is_an_error() -> None:
    s = Session()
    s.append(user("go " * 300))
    s.send()
    reply = AssistantMessage(content=(ThinkingBlock(thinking="hm", signature="s"), ToolCallBlock(call_id="c", name="bash", arguments="{}")))
    s.append(reply, results(reply))
    prompt = s.send()
    section = next(i for i, sec in enumerate(prompt.sections) if sec.message_index == 1)
    wrong = Breakpoint(section=section, kind="history", message_index=1, block_index=0, ttl="5m", purpose="bridge",
                       position=prompt.sections[section].block_positions[0], prefix_tokens=5000)
    found = _codes(prompt.model_copy(update={"breakpoints": (*prompt.breakpoints, wrong)}))
    assert found["unmarkable_block"][0].severity == "error"


def test_head_below_the_minimum_and_marks_on_markless_providers() -> None:
    rules = CacheRules(family="anthropic", min_cacheable_tokens=4096)
    assert "head_below_min" in _codes(_prompt(rules=rules), rules)
    anthropic_prompt = _prompt()
    assert "marks_ignored" in _codes(anthropic_prompt, CacheRules(family="deepseek"))


def test_findings_in_docs_name_the_file_and_its_own_line() -> None:
    from hitrate.projection.docs import ProjectDoc

    docs = [
        ProjectDoc(path="AGENTS.md", text="# Notes\nBuilt 2026-11-29 by CI."),
        ProjectDoc(path="README.md", text="Intro\n\nSession 4f9c2a1e-7b3d-4c8e-9a0f-1d2e3f4a5b6c."),
    ]
    found = _codes(_prompt(docs=docs))
    assert found["volatile_date"][0].location == "AGENTS.md line 2"
    assert found["volatile_uuid"][0].location == "README.md line 3"

"""The projection: layout, canonical bytes, the dynamic tail, epochs, caches and project docs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projection_builders import ANTHROPIC, SYSTEM, TOOLS, Session, calls, results, user

from hitrate.projection.caching import CacheRules
from hitrate.projection.canonical import chain_hash
from hitrate.projection.docs import discover_docs, render_docs
from hitrate.projection.project import ProjectionError, Projector, SystemPrompt, project
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import AssistantMessage, TextBlock, Transcript


def _one(**kw):
    base = dict(rules=ANTHROPIC, model="m", tools=TOOLS, system=SYSTEM, transcript=Transcript().append(user("fix it")))
    base.update(kw)
    return project(**base)


def test_sections_come_in_layout_order_with_stability_and_chained_hashes() -> None:
    prompt = _one(docs="Be nice.", context={"date": "2026-11-29"})
    assert [s.label for s in prompt.sections] == ["tools", "system", "docs", "history[0]", "tail"]
    assert [s.stability for s in prompt.sections] == ["static", "static", "session", "session", "turn"]
    parent = "0" * 64
    total = 0
    for s in prompt.sections:
        assert s.parent_hash == parent and s.hash == chain_hash(parent, s.data)
        total += s.tokens
        assert s.prefix_tokens == total
        parent = s.hash
    assert prompt.system == "You are hitrate, a coding agent.\nWork in small steps.\n- Run the tests.\n- Keep diffs small.\n"


def test_tools_are_sorted_by_name_whatever_the_input_order() -> None:
    a = _one(tools=TOOLS)
    b = _one(tools=list(reversed(TOOLS)))
    assert [t.name for t in a.tools] == ["bash", "edit_file", "read_file"]
    assert a.sections[0].data == b.sections[0].data
    assert json.loads(a.sections[0].data)[0]["name"] == "bash"


def test_model_content_is_kept_byte_for_byte_in_the_section() -> None:
    raw = '{ "path":"ä.py" ,"n":1}'
    reply = AssistantMessage(content=(TextBlock(text="  spaced\n"), *calls("c", 1, args=raw).content))
    t = Transcript().append(user("go")).append(reply)
    t = t.append(results(reply))
    prompt = _one(transcript=t)
    body = json.loads(prompt.sections[4].data)
    assert body["content"][0]["text"] == "  spaced\n"
    assert body["content"][1]["arguments"] == raw
    assert prompt.messages[1] is reply


def test_the_first_request_carries_the_whole_context_then_only_changes() -> None:
    s = Session()
    s.append(user("start"))
    first = s.send()
    assert first.tail is not None and dict(first.tail.values) == {"cwd": "/work/repo", "date": "2026-11-29"}
    assert first.messages[-1].content[-1] == first.tail
    s.tool_round("a", 1)  # same context: nothing to add
    assert s.prompts[-1].tail is None and s.prompts[-1].sections[-1].kind == "history"
    s.context = {"date": "2026-11-30", "branch": "main"}
    s.append(calls("b", 1))
    s.append(results(s.transcript.messages[-1]))
    third = s.send()
    assert third.tail is not None
    assert third.tail.values == (("branch", "main"), ("cwd", None), ("date", "2026-11-30"))
    assert third.tail.text == "<context>\nbranch: main\ncwd: (removed)\ndate: 2026-11-30\n</context>"
    assert third.context == {"date": "2026-11-30", "branch": "main"}


def test_a_sent_tail_reappears_as_an_identical_history_section() -> None:
    s = Session()
    s.append(user("start"))
    first = s.send()
    second = s.tool_round("a", 2)
    tail = first.sections[-1]
    frozen = second.sections[len(first.sections) - 1]
    assert frozen.kind == "history" and (frozen.data, frozen.hash) == (tail.data, tail.hash)
    assert second.sections[: len(first.sections) - 1] == first.sections[:-1]


def test_multiline_context_values_are_indented() -> None:
    prompt = _one(context={"git_status": "M a.py\n?? b.py"})
    assert prompt.tail.text == "<context>\ngit_status: M a.py\n  ?? b.py\n</context>"


def test_context_needs_a_newest_user_message() -> None:
    t = Transcript().append(user("go")).append(AssistantMessage(content=(TextBlock(text="x"),)))
    with pytest.raises(ProjectionError, match="newest user message"):
        _one(transcript=t, context={"date": "d"})
    with pytest.raises(ProjectionError, match="must be a str"):
        _one(context={"budget": 3})
    with pytest.raises(ProjectionError, match="without ':'"):
        _one(context={"a:b": "x"})


def test_bad_inputs_get_clear_errors() -> None:
    with pytest.raises(ProjectionError, match="undefined"):
        _one(system=SystemPrompt(template="Hi {{ missing }}"))
    with pytest.raises(ProjectionError, match="invalid"):
        _one(system=SystemPrompt(template="{% for %}"))
    with pytest.raises(ProjectionError, match="two tools are named"):
        _one(tools=[*TOOLS, TOOLS[0].model_copy()])
    with pytest.raises(ProjectionError, match="ToolSpec"):
        _one(tools=[{"name": "x"}])
    with pytest.raises(ProjectionError, match="non-empty"):
        _one(model="")


def test_epochs_record_what_changed_and_why() -> None:
    s = Session()
    s.append(user("start"))
    assert s.send().epoch.reason == "session start"
    assert s.tool_round("a", 1).epoch_started is False
    extra = ToolSpec(name="grep", description="Search.")
    s.append(calls("b", 1), results(calls("b", 1)))
    p = s.send(tools=[*TOOLS, extra])
    assert p.epoch_started and p.epoch.number == 1 and p.epoch.changes == ("tools",)
    assert p.epoch.reason == "tools changed (+grep)"
    s.tools = [*TOOLS, extra]
    s.append(calls("c", 1), results(calls("c", 1)))
    p = s.send(model="model-b", system="Terse.")
    assert p.epoch.changes == ("model", "system")
    assert p.epoch.reason == "model model-a -> model-b; system prompt changed"
    assert [e.number for e in s.projector.epochs] == [0, 1, 2]


def test_epoch_reason_from_the_caller_is_kept() -> None:
    projector = Projector(ANTHROPIC)
    t = Transcript().append(user("x"))
    projector.project(model="a", tools=TOOLS, system="s", transcript=t)
    p = projector.project(model="b", tools=TOOLS, system="s", transcript=t, epoch_reason="user switched model")
    assert p.epoch.reason == "user switched model: model a -> b"


def test_incremental_projection_equals_a_fresh_one() -> None:
    s = Session(docs="Docs.")
    s.append(user("start"))
    s.send()
    for i in range(6):
        s.tool_round(f"r{i}", i % 3 + 1, output="out " * (i * 50))
    s.context = {"date": "2026-12-01"}
    s.append(calls("z", 2), results(calls("z", 2)))
    before = Transcript.model_validate_json(s.transcript.model_dump_json())  # new objects, same content
    incremental = s.send()
    fresh = project(
        rules=ANTHROPIC, model="model-a", tools=TOOLS, system=SYSTEM, docs="Docs.", transcript=before,
        context={"date": "2026-12-01"}, session_id="session-1",
    )
    assert fresh.section_hashes() == incremental.section_hashes()
    assert [s.data for s in fresh.sections] == [s.data for s in incremental.sections]
    assert fresh.breakpoints == incremental.breakpoints


def test_prompt_cache_key_is_stable_per_session_and_only_for_openai() -> None:
    openai = CacheRules(family="openai_implicit", min_cacheable_tokens=1024)
    s = Session(rules=openai)
    s.append(user("start"))
    key = s.send().prompt_cache_key
    assert key and key.startswith("hitrate-")
    assert s.tool_round("a", 1).prompt_cache_key == key
    other = Session(rules=openai, session_id="other")
    other.append(user("start"))
    assert other.send().prompt_cache_key != key
    assert _one().prompt_cache_key is None


def test_docs_are_found_in_priority_order_capped_and_normalised(tmp_path: Path) -> None:
    (tmp_path / "Readme.md").write_bytes(b"# Project\r\n" + b"line\r\n" * 2000)
    (tmp_path / "CLAUDE.md").write_text("Claude notes")
    (tmp_path / "AGENTS.md").write_text("Agent rules\n" + "é" * 20000)
    docs = discover_docs(tmp_path, max_doc_bytes=1000, readme_bytes=300)
    assert [d.path for d in docs] == ["AGENTS.md", "CLAUDE.md", "Readme.md"]
    assert docs[0].truncated and len(docs[0].text.encode()) <= 1000 + 20
    assert docs[0].text.endswith("[... truncated]")
    assert "\r" not in docs[2].text and docs[2].truncated
    text = render_docs(docs)
    assert text.startswith('<doc path="AGENTS.md" truncated="true">\nAgent rules\n')
    assert discover_docs(tmp_path, max_doc_bytes=1000, readme_bytes=300) == docs


def test_docs_total_cap_and_symlink_dedup(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("a" * 500)
    (tmp_path / "CLAUDE.md").symlink_to(tmp_path / "AGENTS.md")
    (tmp_path / "README.md").write_text("r" * 500)
    docs = discover_docs(tmp_path, max_total_bytes=700)
    assert [d.path for d in docs] == ["AGENTS.md", "README.md"]
    assert sum(len(d.text) for d in docs) <= 700 + 20
    with pytest.raises(FileNotFoundError):
        discover_docs(tmp_path / "nope")


def test_docs_objects_feed_the_docs_section(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Use pytest.")
    prompt = _one(docs=discover_docs(tmp_path))
    assert prompt.sections[2].text == '<doc path="AGENTS.md">\nUse pytest.\n</doc>'

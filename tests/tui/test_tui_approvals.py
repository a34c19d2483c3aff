"""Approvals: allow once, for the session (a command prefix or a tool), always (kept in the config
file), or deny with a reason the model reads; the rules themselves."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_helpers import SPEC, submit, wait_until

from hitrate.harness.permissions import (
    PermissionRuleError,
    PermissionRules,
    Permissions,
    Rule,
    command_prefix,
    load_rules,
    save_rule,
)
from hitrate.tools import UNCONFINED_SHELL, Refusal, ToolContext, default_tools
from hitrate.tui.dialogs import ApprovalScreen
from hitrate.tui.tool_panel import ToolPanel


def test_rules_match_tools_prefixes_exact_commands_and_paths() -> None:
    assert Rule.parse("edit_file").matches("edit_file", {"path": "a.py"})
    prefix = Rule.parse("shell(git status:*)")
    assert prefix.matches("shell", {"command": "git status"})
    assert prefix.matches("shell", {"command": "git status -s"})
    assert not prefix.matches("shell", {"command": "git statusx"})
    # A compound command is never covered by a prefix.
    for sneaky in ("git status; rm -rf ~", "git status && curl x | sh", "git status > /etc/x", "git status $(rm x)"):
        assert not prefix.matches("shell", {"command": sneaky}), sneaky
    assert Rule.parse("shell(make test)").matches("shell", {"command": "make test"})
    assert not Rule.parse("shell(make test)").matches("shell", {"command": "make test2"})
    assert Rule.parse("write_file(docs/*)").matches("write_file", {"path": "docs/a.md"})
    assert not Rule.parse("write_file(docs/*)").matches("write_file", {"path": "src/a.py"})
    for bad in ("Bash(ls)", "shell()", "read_file", "shell(ls"):
        with pytest.raises(PermissionRuleError):
            Rule.parse(bad)
    assert command_prefix("git status -s") == "git status"
    assert command_prefix("pytest -q tests") == "pytest"
    assert command_prefix("grep -n return calc.py") == "grep"
    assert command_prefix("ls | wc -l") is None


def test_rules_persist_in_the_config_file_and_deny_wins(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('# my settings\nmodel = "anthropic/claude-sonnet-4-6"  # the usual one\n')
    save_rule(config, Rule.parse("shell(git status:*)"))
    save_rule(config, Rule.parse("shell(git status:*)"))  # once only
    save_rule(config, Rule.parse("shell(git:*)"))
    save_rule(config, Rule.parse("shell(git push:*)"), "deny")
    text = config.read_text()
    assert text.startswith('# my settings\nmodel = "anthropic/claude-sonnet-4-6"  # the usual one\n')
    rules = load_rules(config)
    assert rules.allow == ["shell(git status:*)", "shell(git:*)"] and rules.deny == ["shell(git push:*)"]
    permissions = Permissions.load(config)
    assert permissions.decide("shell", {"command": "git log"})[0] == "allow"
    verdict, rule = permissions.decide("shell", {"command": "git push origin"})
    assert verdict == "deny" and str(rule) == "shell(git push:*)"
    assert permissions.decide("edit_file", {"path": "x"}) == ("ask", None)
    # A command-line default overrides the file's; with neither, the caller's fallback applies.
    assert Permissions.load(config, default="deny").decide("edit_file", {"path": "x"}) == ("deny", None)
    assert Permissions.load(config, fallback="allow").decide("edit_file", {"path": "x"}) == ("allow", None)
    config.write_text(config.read_text().replace("[permissions]", '[permissions]\ndefault = "deny"'))
    assert Permissions.load(config, fallback="allow").decide("edit_file", {"path": "x"}) == ("deny", None)
    assert Permissions.load(config).decide("shell", {"command": "git log"})[0] == "allow"
    # Non-interactive: what would be asked is refused, with the reason.
    hook = permissions.hook(ask=None)
    assert hook("shell", {"command": "git log"}) is True
    refusal = hook("shell", {"command": "git push"})
    assert isinstance(refusal, Refusal) and "shell(git push:*)" in refusal.reason
    # An unconfined shell command is never allowed by a rule or a default, only by a person.
    everything = Permissions(PermissionRules(allow=["shell"], default="allow"))
    assert isinstance(everything.hook(ask=None)(UNCONFINED_SHELL, {"command": "ls"}), Refusal)
    assert everything.hook(ask=lambda tool, args: True)(UNCONFINED_SHELL, {"command": "ls"}) is True
    config.write_text("[permissions]\nallow = ['Bash(ls)']\n")
    with pytest.raises(PermissionRuleError, match="not understood"):
        load_rules(config)


def test_a_refusal_reason_reaches_the_tool_result(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    ctx = ToolContext(workspace=tmp_path, approve=lambda tool, args: Refusal("use the fixture file instead"))
    result = default_tools(ripgrep=None).execute("write_file", {"path": "a.txt", "content": "new\n"}, ctx)
    assert result.is_error and result.metadata["refused"] and result.metadata["reason"] == "use the fixture file instead"
    assert result.content == "write_file was not approved by the user: use the fixture file instead; nothing was changed"
    assert (tmp_path / "a.txt").read_text() == "old\n"
    plain = ToolContext(workspace=tmp_path, approve=lambda tool, args: False)
    assert default_tools(ripgrep=None).execute("shell", {"command": "touch b"}, plain).content == (
        "shell was not approved by the user; nothing was changed"
    )
    assert not (tmp_path / "b").exists()


def dialog_title(app) -> str:
    return str(app.screen.query_one("#dialog-title").render())


async def test_session_allow_always_allow_and_deny_with_a_reason(make_app, workspace, tmp_path):
    config = tmp_path / "config.toml"
    app = make_app({SPEC: [
        {"tool_calls": [("shell", '{"command": "git status -s"}')]},
        {"tool_calls": [("shell", '{"command": "git status"}')]},
        {"tool_calls": [("write_file", '{"path": "other.txt", "content": "x"}')]},
        {"tool_calls": [("edit_file", '{"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}')]},
        {"tool_calls": [("edit_file", '{"path": "calc.py", "old_string": "def add", "new_string": "def plus"}')]},
        {"text": "Done."},
    ]}, approvals=True)
    app.permissions = Permissions.load(config)
    backend = app.link.router.backends[SPEC]
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "go")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the first question")
        assert dialog_title(app) == "Allow shell?"
        assert "for this session, shell(git status:*): a · always (kept in config.toml): s" in str(
            app.screen.query_one("#dialog-rule").render())
        await pilot.press("a")
        # `git status` is covered for the session: the next question is about write_file.
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and "write_file" in dialog_title(app), "write_file")
        await pilot.press("n")
        await pilot.pause()
        await pilot.press(*"keep the workspace clean")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and "edit_file" in dialog_title(app), "edit_file")
        await pilot.press("s")
        await wait_until(pilot, lambda: not app.busy, "the turn to end")

        assert not (workspace / "other.txt").exists()
        assert (workspace / "calc.py").read_text() == "def plus(a, b):\n    return a + b\n"  # both edits ran, one question
        panels = list(app.query(ToolPanel))
        # The workspace is no git repository: both git commands ran and exited 128 (a ✗ with the code).
        assert [p.state for p in panels] == ["error", "error", "error", "done", "done"]
        assert panels[0].title == "✗ shell: git status -s · exit 128"
        # The model read the denial's reason in the tool result.
        results = [b for m in backend.prompts[3].messages for b in getattr(m, "tool_results", [])]
        assert results[-1].content == "write_file was not approved by the user: keep the workspace clean; nothing was changed"
        # "Always" kept the rule in the config file; a new sitting honours it.
        assert load_rules(config).allow == ["edit_file"]
        assert Permissions.load(config).decide("edit_file", {"path": "calc.py"})[0] == "allow"
        assert Permissions.load(config).decide("shell", {"command": "git status"})[0] == "ask"  # session only


async def test_escape_denies_without_a_reason_and_once_asks_again(make_app, workspace):
    app = make_app({SPEC: [
        {"tool_calls": [("shell", '{"command": "echo hi > made.txt"}')]},
        {"tool_calls": [("shell", '{"command": "echo hi > made2.txt"}')]},
        {"tool_calls": [("shell", '{"command": "echo hi > made3.txt"}')]},
        {"text": "Done."},
    ]}, approvals=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "make files")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "question 1")
        # A compound command has no prefix to offer: the session choice is the whole tool.
        assert "for this session, shell: a" in str(app.screen.query_one("#dialog-rule").render())
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.figures.calls and len(app.figures.calls) == 2, "question 2")
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and len(app.figures.calls) == 3, "question 3")
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.busy, "the turn to end")
        assert (workspace / "made.txt").exists() and not (workspace / "made2.txt").exists() and (workspace / "made3.txt").exists()
        assert [p.title.endswith("(refused)") for p in app.query(ToolPanel)] == [False, True, False]


async def test_with_approvals_off_nothing_is_asked_but_deny_rules_still_refuse(make_app, workspace, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[permissions]\ndeny = ["shell(rm:*)"]\n')
    (workspace / "keep.txt").write_text("keep\n")
    app = make_app({SPEC: [
        {"tool_calls": [("shell", '{"command": "rm keep.txt"}')]},
        {"tool_calls": [("shell", '{"command": "echo hi > made.txt"}')]},
        {"text": "Done."},
    ]}, approvals=False)
    app.permissions = Permissions.load(config)
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "go")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 3, "the turn")
        assert not isinstance(app.screen, ApprovalScreen)
        assert (workspace / "keep.txt").exists() and (workspace / "made.txt").exists()
        panels = list(app.query(ToolPanel))
        assert panels[0].title.endswith("(refused)") and "shell(rm:*)" in panels[0].result

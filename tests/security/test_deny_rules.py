"""Deny rules against respelled and compound commands, and what "always allow" stores.

With `deny = ["shell(git push:*)", "shell(rm:*)"]`, 18 of these 20 spellings got through when
rules were matched on the command's text. Each must now be denied, or, when what runs is only
known at run time, asked about (refused when nobody can be asked).
"""

from __future__ import annotations

import pytest

from hitrate.harness.permissions import PermissionRules, Permissions, Rule, command_prefix, prefix_rule
from hitrate.tools.base import Refusal

DENIED = [
    "git push; true",
    "true && git push",
    "git push | cat",
    "git  push",
    "git -c x=y push",
    "env git push",
    "command git push",
    "\\git push",
    "'git' push",
    "cd sub && git push",
    "sh -c 'git push'",
    "GIT_X=1 git push",
    "/bin/rm -rf src",
    "rm -rf src >/dev/null",
    "(git push)",
    'echo "$(git push)"',
    "echo src | xargs rm -rf",
    "sudo -u me git push origin",
    "git push origin main",  # the control that always held
]
ASKED = ["$(echo git) push"]


@pytest.fixture
def permissions() -> Permissions:
    # Unattended and permissive: only the deny rules stand between the model and the command.
    return Permissions(PermissionRules(deny=["shell(git push:*)", "shell(rm:*)"], default="allow"))


@pytest.mark.parametrize("command", DENIED)
def test_every_spelling_of_a_denied_command_is_denied(permissions: Permissions, command: str) -> None:
    verdict, rule = permissions.decide("shell", {"command": command})
    assert verdict == "deny" and str(rule) in ("shell(git push:*)", "shell(rm:*)")


@pytest.mark.parametrize("command", [*ASKED, "$CMD push", "git push 'unterminated", "eval \"$X\""])
def test_a_command_that_cannot_be_read_is_asked_about_and_refused_unattended(permissions: Permissions, command: str) -> None:
    assert permissions.decide("shell", {"command": command}) == ("ask", None)
    assert isinstance(permissions.hook(ask=None)("shell", {"command": command}), Refusal)


@pytest.mark.parametrize("command", ["git status", "git pushx", "echo git push", "ls src | wc -l", "grep -r rm ."])
def test_commands_the_rules_do_not_name_go_through(permissions: Permissions, command: str) -> None:
    assert permissions.decide("shell", {"command": command}) == ("allow", None)


def test_an_allow_rule_covers_a_line_only_when_every_command_is_allowed() -> None:
    rules = Permissions(PermissionRules(allow=["shell(git status:*)", "shell(cd:*)"], default="ask"))
    assert rules.decide("shell", {"command": "cd sub && git status -s"})[0] == "allow"
    for sneaky in ("git status; rm -rf ~", "git status && curl x | sh", "git status > /etc/x", "git status $(rm x)",
                   "cd $(rm -rf ~)", "git status\nrm -rf ~"):
        assert rules.decide("shell", {"command": sneaky})[0] == "ask", sneaky
    # An allow rule is read literally: a quoted or path-qualified program is not the one allowed.
    assert rules.decide("shell", {"command": "/tmp/git status"})[0] == "ask"


@pytest.mark.parametrize(
    "approved",
    ["bash ./run_tests.sh", "python3 -c 'print(1)'", "env FOO=1 make", "npm run test", "node build.js",
     "sh -c 'make'", "sudo apt-get update", "xargs rm", "python3.12 -m pytest", "uv run pytest", "make test"],
)
def test_always_allow_stores_the_exact_command_for_interpreters_and_wrappers(approved: str) -> None:
    rule = prefix_rule(approved)
    assert rule == Rule(tool="shell", pattern=approved)
    assert command_prefix(approved) is None
    assert rule.matches("shell", {"command": approved})
    assert not rule.matches("shell", {"command": approved + " && rm -rf ~"})
    assert not rule.matches("shell", {"command": approved.split()[0] + " -c 'import os; os.system(\"x\")'"})


def test_always_allow_stores_a_prefix_for_ordinary_programs() -> None:
    assert prefix_rule("git status -s") == Rule(tool="shell", pattern="git status:*")
    assert prefix_rule("pytest -q tests") == Rule(tool="shell", pattern="pytest:*")
    assert prefix_rule("ls | wc -l") is None
    assert prefix_rule("git status > out.txt") is None

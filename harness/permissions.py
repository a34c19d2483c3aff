"""Permission rules for the tools that change things (shell, write_file, edit_file).

Rules are written the way Claude Code's allow-lists are (`Bash(npm run test:*)`), with hitrate's
tool names:

- `edit_file`, `write_file`, `shell`: every call of that tool;
- `shell(git status:*)`: commands that are `git status` or start with `git status ` (a prefix);
- `shell(make test)`: exactly that command;
- `edit_file(docs/*)`, `write_file(*.md)`: calls whose path matches the glob.

They live in the config file (`harness.defaults.config_path()`) under `[permissions]`:

    [permissions]
    default = "ask"            # when no rule matches: ask, allow or deny (unset: the TUI asks)
    allow = ["edit_file", "shell(git status:*)"]
    deny = ["shell(rm:*)"]

A deny rule wins over an allow rule. A shell command that no OS sandbox confines is never let
through by a rule or a default: only a person can allow it (`hitrate.tools.shell.UNCONFINED_SHELL`). A command prefix never matches a compound command (one with
`;`, `&&`, `|`, a redirection or a substitution): `git status; rm -rf ~` is not `git status`, so it
is asked about (Claude Code does the same for chained commands).
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hitrate.tools import UNCONFINED_SHELL
from hitrate.tools.base import ApprovalHook, Refusal

Verdict = Literal["allow", "deny", "ask"]
#: The tools that change the workspace: the only ones asked about (and that rules name).
GUARDED_TOOLS = ("shell", "write_file", "edit_file")

_RULE = re.compile(r"^(?P<tool>[a-z_]+)(?:\((?P<pattern>.+)\))?$", re.DOTALL)
# Anything that makes one command line run more than one program, or write where it likes.
_COMPOUND = re.compile(r"[;&|<>`\n]|\$\(")


class PermissionRuleError(ValueError):
    """A rule or a config table that cannot be understood; the message says how to write it."""


class Rule(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str
    pattern: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Rule":
        found = _RULE.match(text.strip())
        if found is None or found["tool"] not in GUARDED_TOOLS:
            raise PermissionRuleError(
                f"permission rule {text!r} is not understood; write a tool ({', '.join(GUARDED_TOOLS)}), "
                "optionally with a pattern: shell(git status:*), shell(make test), edit_file(docs/*)"
            )
        pattern = found["pattern"]
        if pattern is not None and not pattern.strip():
            raise PermissionRuleError(f"permission rule {text!r} has an empty pattern")
        return cls(tool=found["tool"], pattern=pattern.strip() if pattern else None)

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"

    def matches(self, tool: str, args: dict[str, Any]) -> bool:
        if tool != self.tool:
            return False
        if self.pattern is None:
            return True
        if tool == "shell":
            command = str(args.get("command", "")).strip()
            if self.pattern.endswith(":*"):
                prefix = self.pattern[:-2].strip()
                if _COMPOUND.search(command):
                    return False
                return command == prefix or command.startswith(prefix + " ")
            return command == self.pattern
        path = str(args.get("path", ""))
        return fnmatch.fnmatchcase(path, self.pattern)


def command_prefix(command: str) -> str | None:
    """The prefix a "always allow commands like this" answer would allow: the program and its
    subcommand (`git status -s` → `git status`, `npm run test` → `npm run`, `pytest -q` → `pytest`).
    None for a compound command, which no prefix rule matches."""
    if _COMPOUND.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words:
        return None
    kept = [words[0]]
    if len(words) > 1 and re.fullmatch(r"[A-Za-z][\w-]*", words[1]):
        kept.append(words[1])
    return " ".join(kept)


def prefix_rule(command: str) -> Rule | None:
    prefix = command_prefix(command)
    return None if prefix is None else Rule(tool="shell", pattern=f"{prefix}:*")


class PermissionRules(BaseModel):
    """The `[permissions]` table of the config file."""

    model_config = ConfigDict(extra="forbid")

    default: Verdict | None = Field(
        default=None, description="What happens when no rule matches; None: the caller's fallback (the TUI asks)."
    )
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)

    @field_validator("allow", "deny")
    @classmethod
    def _rules_parse(cls, rules: list[str]) -> list[str]:
        for rule in rules:
            Rule.parse(rule)
        return rules


def load_rules(path: Path) -> PermissionRules:
    """The rules in `path` (none when the file or its table is missing)."""
    if not path.is_file():
        return PermissionRules()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PermissionRuleError(f"config file {path} is not valid TOML: {exc}") from exc
    table = data.get("permissions", {})
    if not isinstance(table, dict):
        raise PermissionRuleError(f"[permissions] in {path} must be a table")
    try:
        return PermissionRules.model_validate(table)
    except ValueError as exc:
        raise PermissionRuleError(f"[permissions] in {path}: {exc}") from exc


def save_rule(path: Path, rule: Rule, kind: Literal["allow", "deny"] = "allow") -> None:
    """Add `rule` to the config file's allow (or deny) list, keeping the rest of the file as the
    user wrote it (comments included)."""
    import tomlkit  # only needed to write; reading is tomllib's

    path.parent.mkdir(parents=True, exist_ok=True)
    document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.is_file() else tomlkit.document()
    table = document.get("permissions")
    if table is None:
        table = tomlkit.table()
        document["permissions"] = table
    rules = table.get(kind)
    if rules is None:
        rules = tomlkit.array()
        table[kind] = rules
    if str(rule) not in [str(r) for r in rules]:
        rules.append(str(rule))
    path.write_text(tomlkit.dumps(document), encoding="utf-8")


class Permissions:
    """The rules in force: the config file's, plus those allowed for this sitting only."""

    def __init__(self, rules: PermissionRules | None = None, *, config: Path | None = None, fallback: Verdict = "ask") -> None:
        """`fallback`: what an unmatched call gets when the file sets no `default` (the TUI asks;
        a non-interactive `hitrate run` would rather allow, as it always has, or deny)."""
        self.rules = rules or PermissionRules()
        self.config = config
        self.fallback: Verdict = fallback
        self.session_allow: list[Rule] = []
        self._allow = [Rule.parse(r) for r in self.rules.allow]
        self._deny = [Rule.parse(r) for r in self.rules.deny]

    @classmethod
    def load(cls, config: Path, default: Verdict | None = None, *, fallback: Verdict = "ask") -> "Permissions":
        """The rules of `config`; `default` (a command-line flag) overrides the file's default."""
        rules = load_rules(config)
        if default is not None:
            rules = rules.model_copy(update={"default": default})
        return cls(rules, config=config, fallback=fallback)

    def decide(self, tool: str, args: dict[str, Any]) -> tuple[Verdict, Rule | None]:
        """What to do with this call, and the rule that said so (None: the default)."""
        for rule in self._deny:
            if rule.matches(tool, args):
                return "deny", rule
        for rule in [*self._allow, *self.session_allow]:
            if rule.matches(tool, args):
                return "allow", rule
        return self.rules.default or self.fallback, None

    def allow_for_session(self, rule: Rule) -> None:
        if rule not in self.session_allow:
            self.session_allow.append(rule)

    def allow_always(self, rule: Rule) -> None:
        """Allow from now on and keep the rule in the config file."""
        if self.config is None:
            raise PermissionRuleError("no config file to keep the rule in")
        save_rule(self.config, rule)
        self._allow.append(rule)
        self.rules = self.rules.model_copy(update={"allow": [*self.rules.allow, str(rule)]})

    def hook(self, ask: Callable[[str, dict[str, Any]], bool | Refusal] | None = None) -> ApprovalHook:
        """An approval hook for `Session.approve`: the rules first, then `ask` (None: a call that
        would be asked about is refused, as a non-interactive run must)."""

        def approve(tool: str, args: dict[str, Any]) -> bool | Refusal:
            if tool == UNCONFINED_SHELL:
                # No OS sandbox confines the command: no rule or default may let it through, only
                # a person who has seen it.
                if ask is None:
                    return Refusal("the shell is not confined on this machine and nobody can be asked to allow the command")
                return ask(tool, args)
            verdict, rule = self.decide(tool, args)
            if verdict == "allow":
                return True
            if verdict == "deny":
                why = f"the rule {rule} in {self.config or 'the permission rules'}" if rule else "the default permission (deny)"
                return Refusal(f"refused by {why}")
            if ask is None:
                return Refusal("this action needs approval and nobody can be asked (non-interactive run)")
            return ask(tool, args)

        return approve

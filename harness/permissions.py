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
through by a rule or a default: only a person can allow it (`hitrate.tools.shell.UNCONFINED_SHELL`).

Shell rules are matched on the parsed command (`harness.shell_parse`), never on its text:

- a deny rule matches when any simple command of the line matches it: in a list or pipeline, a
  subshell, a substitution, behind `env`/`command`/`exec`/`sudo`/`xargs`/`sh -c`/`eval`, whatever
  the quoting, the program's folder (`/bin/rm`) or the options before the subcommand
  (`git -c x=y push`). A line that does not parse, or whose program is only known when it runs
  (`$(echo git) push`), while deny rules exist, is asked about (refused when nobody can be asked);
- an allow rule covers a line only when every simple command of it is allowed, its program names
  are literal and it redirects into no file: `git status; rm -rf ~` is not `git status`.

"Always allow" stores a prefix (`git status:*`) only for ordinary programs; for an interpreter or a
program that runs other commands (`bash`, `python3`, `node`, `env`, `sudo`, `npm run`, ...) it
stores the exact command, since a prefix would allow any code at all.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hitrate.harness.shell_parse import (
    GLOBAL_OPTIONS,
    OPAQUE_WRAPPERS,
    SHELLS,
    TRANSPARENT_WRAPPERS,
    ParsedCommand,
    SimpleCommand,
    parse_command,
)
from hitrate.tools import UNCONFINED_SHELL
from hitrate.tools.base import ApprovalHook, Refusal

Verdict = Literal["allow", "deny", "ask"]
#: The tools that change the workspace: the only ones asked about (and that rules name).
GUARDED_TOOLS = ("shell", "write_file", "edit_file")

_RULE = re.compile(r"^(?P<tool>[a-z_]+)(?:\((?P<pattern>.+)\))?$", re.DOTALL)

# Programs that run whatever code their arguments say: "always allow" stores the exact command for
# them, never a prefix (`python3:*` would allow `python3 -c 'anything'`).
_INTERPRETERS = re.compile(
    r"^(?:python[\d.]*|pypy[\d.]*|node|nodejs|deno|bun|ruby|perl|php|lua(?:jit)?|Rscript|julia|osascript|pwsh|"
    r"powershell|awk|gawk|mawk|nawk|fish|csh|tcsh|source|\.|eval|npx|bunx|pnpx|uvx|pipx|su|chroot|unshare|"
    r"nsenter|watch|parallel|ssh|script|find|make|just)$"
)
# Programs whose subcommand runs arbitrary scripts or code: `npm run:*` would allow any script.
_RUNNER_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "npm": frozenset({"run", "run-script", "exec", "x", "start", "test", "t"}),
    "pnpm": frozenset({"run", "exec", "dlx", "x", "start", "test"}),
    "yarn": frozenset({"run", "exec", "dlx", "node", "start", "test"}),
    "bun": frozenset({"run", "x", "exec"}),
    "uv": frozenset({"run", "tool"}),
    "poetry": frozenset({"run"}),
    "pdm": frozenset({"run"}),
    "hatch": frozenset({"run"}),
    "pipenv": frozenset({"run"}),
    "rye": frozenset({"run"}),
    "cargo": frozenset({"run"}),
    "go": frozenset({"run", "generate"}),
    "dotnet": frozenset({"run"}),
    "docker": frozenset({"run", "exec"}),
    "podman": frozenset({"run", "exec"}),
    "kubectl": frozenset({"exec", "run"}),
    "git": frozenset({"-c", "-C"}),
}


def runs_arbitrary_code(command: SimpleCommand) -> bool:
    """True for an interpreter or a program that runs commands its arguments name: a rule for it
    can only ever be its exact command."""
    name = command.program_name
    if name is None:
        return True
    if name in SHELLS or name in TRANSPARENT_WRAPPERS or name in OPAQUE_WRAPPERS or _INTERPRETERS.match(name):
        return True
    subcommand = command.words[1] if len(command.words) > 1 else None
    return subcommand in _RUNNER_SUBCOMMANDS.get(name, frozenset())


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

    @property
    def is_prefix(self) -> bool:
        return self.pattern is not None and self.pattern.endswith(":*")

    @property
    def _pattern_words(self) -> tuple[str | None, ...]:
        assert self.pattern is not None
        text = self.pattern[:-2] if self.is_prefix else self.pattern
        parsed = parse_command(text)
        return parsed.commands[0].words if parsed.commands and parsed.error is None else tuple(text.split())

    def matches(self, tool: str, args: dict[str, Any]) -> bool:
        """Whether this rule, alone, allows the call (for a shell command: every command of the line)."""
        if tool != self.tool:
            return False
        if self.pattern is None:
            return True
        if tool == "shell":
            command = str(args.get("command", "")).strip()
            if not self.is_prefix and command == self.pattern:
                return True
            parsed = parse_command(command)
            return allowable(parsed) and all(self.allows_command(c) for c in parsed.own_commands)
        path = str(args.get("path", ""))
        return fnmatch.fnmatchcase(path, self.pattern)

    def allows_command(self, command: SimpleCommand) -> bool:
        """An allow rule read literally: the program as written, the words in their places."""
        if self.tool != "shell":
            return False
        if self.pattern is None:
            return True
        want = self._pattern_words
        if self.is_prefix:
            return command.words[: len(want)] == want
        return command.words == want

    def denies(self, tool: str, args: dict[str, Any]) -> bool | None:
        """Whether this deny rule matches the call: True, False, or None when the command cannot be
        read well enough to tell (it does not parse, or a program or word in the way is only known
        when it runs)."""
        if tool != self.tool:
            return False
        if self.pattern is None:
            return True
        if tool != "shell":
            return fnmatch.fnmatchcase(str(args.get("path", "")), self.pattern)
        parsed = parse_command(str(args.get("command", "")))
        if parsed.error is not None:
            return None
        answers = [self._denies_command(command) for command in parsed.commands]
        if True in answers:
            return True
        return None if None in answers else False

    def _denies_command(self, command: SimpleCommand) -> bool | None:
        want = self._pattern_words
        if not want or want[0] is None:
            return False
        name = command.program_name
        if name is None:
            return None
        if name != os.path.basename(want[0]):
            return False
        rest, valued = command.words[1:], GLOBAL_OPTIONS.get(name, frozenset())
        index = 0
        for word in want[1:]:
            # Options before the next word of the rule are skipped (`git -c x=y push`).
            while index < len(rest) and rest[index] is not None and rest[index] != word and str(rest[index]).startswith("-"):
                index += 2 if rest[index] in valued else 1
            if index >= len(rest):
                return False
            if rest[index] is None:
                return None
            if rest[index] != word:
                return False
            index += 1
        if not self.is_prefix and index != len(rest):
            return False
        return True


def allowable(parsed: ParsedCommand) -> bool:
    """Whether any allow rule may cover the line at all: it parses, names its programs literally
    and writes into no file."""
    return parsed.error is None and not parsed.dynamic and not parsed.writes_files and bool(parsed.commands)


def command_prefix(command: str) -> str | None:
    """The prefix a "always allow commands like this" answer would allow: the program and its
    subcommand (`git status -s` → `git status`, `pytest -q` → `pytest`). None for a line of several
    commands, and for an interpreter or a program that runs other commands (see `prefix_rule`)."""
    parsed = parse_command(command)
    if not allowable(parsed) or len(parsed.commands) != 1 or runs_arbitrary_code(parsed.commands[0]):
        return None
    single = parsed.commands[0]
    words = [w for w in single.words if w is not None]
    kept = [words[0]]
    if len(words) > 1 and re.fullmatch(r"[A-Za-z][\w-]*", words[1]):
        kept.append(words[1])
    return " ".join(kept)


def prefix_rule(command: str) -> Rule | None:
    """The rule "always allow" stores: a prefix for an ordinary program, the exact command for an
    interpreter or a wrapper (`bash ./run_tests.sh`, `python3 -c 'print(1)'`, `env FOO=1 make`,
    `npm run test`), nothing for a line of several commands."""
    parsed = parse_command(command)
    if not allowable(parsed):
        return None
    if any(runs_arbitrary_code(simple) for simple in parsed.commands):
        return Rule(tool="shell", pattern=command.strip())
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
        unsure = False
        for rule in self._deny:
            answer = rule.denies(tool, args)
            if answer is True:
                return "deny", rule
            unsure = unsure or answer is None
        if unsure:
            # A deny rule might match a command that cannot be read: a person decides (and with
            # nobody to ask, the hook refuses).
            return "ask", None
        allow = [*self._allow, *self.session_allow]
        if tool == "shell":
            rule = self._allowing_shell_rule(str(args.get("command", "")), allow)
            if rule is not None:
                return "allow", rule
        else:
            for rule in allow:
                if rule.matches(tool, args):
                    return "allow", rule
        return self.rules.default or self.fallback, None

    @staticmethod
    def _allowing_shell_rule(command: str, allow: list[Rule]) -> Rule | None:
        """The rule that allows the line: a whole-tool rule, its exact text, or rules that between
        them allow every command of it (the first of them is named)."""
        for rule in allow:
            if rule.tool == "shell" and (rule.pattern is None or (not rule.is_prefix and rule.pattern == command.strip())):
                return rule
        parsed = parse_command(command)
        if not allowable(parsed):
            return None
        used: list[Rule] = []
        for simple in parsed.own_commands:
            found = next((rule for rule in allow if rule.tool == "shell" and rule.allows_command(simple)), None)
            if found is None:
                return None
            used.append(found)
        return used[0] if used else None

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

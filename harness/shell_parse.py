"""A shell command line as the simple commands it runs, for permission rules.

Matching rules on the text (`command.startswith("git push ")`) misses every other spelling of the
same command: `git push; true`, `true && git push`, `git  push`, `\\git push`, `'git' push`,
`env git push`, `sh -c 'git push'`, `GIT_X=1 git push`, `/usr/bin/git push`... So the line is parsed
by tree-sitter's bash grammar (the parser Codex uses for the same job; `tree-sitter-bash` on PyPI,
kept by the tree-sitter organisation) and every simple command is collected: in lists, pipelines,
subshells, groups, control flow, command and process substitutions, and inside the wrappers that
run another command (`env`, `command`, `exec`, `sudo`, `xargs`, `nice`, `timeout`, `sh -c '...'`,
`eval`, `find -exec`, ...). Quoting and backslashes are undone; a word whose value is only known
when the shell runs (`$(echo git)`, `$CMD`) is None.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any

# Wrappers whose inner command runs as if typed alone: a rule about the inner command decides,
# and an allow rule for the wrapper alone is not needed. Value: options that take a separate value.
TRANSPARENT_WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "setsid": frozenset(),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u"}),
    "chrt": frozenset(),
    "taskset": frozenset(),
}
# Wrappers that change who or how the command runs: both the wrapper and the inner command are
# commands a rule can be about.
OPAQUE_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host",
                       "-p", "--prompt", "-r", "--role", "-t", "--type", "-U", "--other-user", "-T", "--command-timeout"}),
    "doas": frozenset({"-u", "-C"}),
    "xargs": frozenset({"-a", "--arg-file", "-d", "--delimiter", "-E", "-e", "-I", "-i", "-L", "-l", "-n",
                        "--max-args", "-P", "--max-procs", "-s", "--max-chars"}),
}
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox"})
# Options before a subcommand that take a separate value, for the programs rules usually name:
# `git -c x=y push` is `git push`.
GLOBAL_OPTIONS: dict[str, frozenset[str]] = {
    "git": frozenset({"-c", "-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"}),
    "npm": frozenset({"--prefix", "-w", "--workspace"}),
    "docker": frozenset({"-H", "--host", "--context", "-c", "--config", "-l", "--log-level"}),
    "kubectl": frozenset({"-n", "--namespace", "--context", "--kubeconfig", "-s", "--server"}),
    "cargo": frozenset({"-C", "--config", "-Z"}),
}
# Redirection targets that write nothing.
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
# Depth of `sh -c` / `eval` inside each other we follow; deeper is unparseable.
_MAX_NESTING = 8


@dataclass(frozen=True)
class SimpleCommand:
    """One program run: its words with quoting undone (None: only known when the shell runs)."""

    words: tuple[str | None, ...]
    wrapper: str | None = None  # "transparent" or "opaque" when this command only wraps another

    @property
    def program(self) -> str | None:
        return self.words[0] if self.words else None

    @property
    def program_name(self) -> str | None:
        """The program without its folder: `/bin/rm` -> `rm`."""
        return os.path.basename(self.program) if self.program else None


@dataclass
class ParsedCommand:
    """Every simple command of a command line. `error`: why it could not be parsed (then nothing
    else can be relied on)."""

    commands: list[SimpleCommand] = field(default_factory=list)
    writes_files: bool = False  # a redirection to a file (other than /dev/null and friends)
    error: str | None = None

    @property
    def dynamic(self) -> bool:
        """A program name only known when the shell runs (`$(echo git) push`, `$CMD`)."""
        return any(command.program is None for command in self.commands)

    @property
    def own_commands(self) -> list[SimpleCommand]:
        """The commands an allow rule must cover: transparent wrappers stand for their inner command."""
        return [command for command in self.commands if command.wrapper != "transparent"]


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


@functools.lru_cache(maxsize=512)
def parse_command(text: str) -> ParsedCommand:
    """The simple commands of `text` (cached: rules are checked against the same line many times;
    callers must not change the result)."""
    result = ParsedCommand()
    _collect_script(text, result, depth=0)
    return result


def _collect_script(text: str, result: ParsedCommand, depth: int) -> None:
    if depth > _MAX_NESTING:
        result.error = "commands nested too deeply"
        return
    tree = _parser().parse(text.encode("utf-8", errors="surrogateescape"))
    if tree.root_node.has_error:
        result.error = "the command line does not parse as bash"
        return
    _walk(tree.root_node, result, depth)


_WRITING_OPERATORS = frozenset({">", ">>", "&>", "&>>", ">|"})


def _walk(node: Any, result: ParsedCommand, depth: int) -> None:
    """Every command under `node`: a `command` node is one; the commands in substitutions inside
    its words are walked too (`echo $(git push)` runs `git push`)."""
    if node.type == "command":
        _command(node, result, depth)
    elif node.type == "file_redirect":
        _redirect(node, result)
    for child in node.children:
        _walk(child, result, depth)


def _redirect(node: Any, result: ParsedCommand) -> None:
    operators = [child.type for child in node.children if not child.is_named]
    target = node.child_by_field_name("destination")
    value = _literal(target) if target is not None else None
    if target is not None and target.type == "number":
        return  # `2>&1`: a descriptor, not a file
    if any(op in _WRITING_OPERATORS for op in operators) and value not in _HARMLESS_TARGETS:
        result.writes_files = True


def _command(node: Any, result: ParsedCommand, depth: int) -> None:
    name = node.child_by_field_name("name")
    words: list[str | None] = []
    if name is not None:
        words.append(_literal(name.children[0] if name.children else name))
        words += [_literal(arg) for arg in node.children_by_field_name("argument")]
    _add(tuple(words), result, depth)


def _add(words: tuple[str | None, ...], result: ParsedCommand, depth: int) -> None:
    if not words:
        return
    program = os.path.basename(words[0]) if words[0] else None
    inner: tuple[str | None, ...] | None = None
    kind: str | None = None
    if program in TRANSPARENT_WRAPPERS:
        inner, kind = _after_options(words[1:], TRANSPARENT_WRAPPERS[program], program), "transparent"
        if program == "env":
            inner = _env_inner(words[1:], result, depth)
        elif program == "timeout" and inner:
            inner = inner[1:]  # the duration
        elif program in ("chrt", "taskset") and inner:
            inner = inner[1:]  # the priority or CPU mask
    elif program in OPAQUE_WRAPPERS:
        inner, kind = _after_options(words[1:], OPAQUE_WRAPPERS[program], program), "opaque"
    elif program in SHELLS and "-c" in words[1:]:
        script = words[words.index("-c") + 1] if words.index("-c") + 1 < len(words) else None
        kind = "opaque"
        if script is None:
            result.commands.append(SimpleCommand(words, None))
            result.commands.append(SimpleCommand((None,), None))  # a script only known when it runs
            return
        result.commands.append(SimpleCommand(words, kind))
        _collect_script(script, result, depth + 1)
        return
    elif program == "eval":
        result.commands.append(SimpleCommand(words, "opaque"))
        if all(word is not None for word in words[1:]):
            _collect_script(" ".join(word for word in words[1:] if word is not None), result, depth + 1)
        else:
            result.commands.append(SimpleCommand((None,), None))
        return
    elif program == "find":
        result.commands.append(SimpleCommand(words, None))
        for run in _find_exec(words):
            _add(run, result, depth)
        return
    if kind is not None and inner:
        result.commands.append(SimpleCommand(words, kind))
        _add(inner, result, depth)
        return
    result.commands.append(SimpleCommand(words, None))


def _after_options(words: tuple[str | None, ...], valued: frozenset[str], program: str) -> tuple[str | None, ...]:
    index = 0
    while index < len(words):
        word = words[index]
        if word is None:
            return words[index:]  # an option or a program only known when the shell runs
        if word == "--":
            return words[index + 1:]
        if not word.startswith("-") or word == "-":
            return words[index:]
        index += 2 if word in valued else 1
    return ()


def _env_inner(words: tuple[str | None, ...], result: ParsedCommand, depth: int) -> tuple[str | None, ...]:
    index = 0
    while index < len(words):
        word = words[index]
        if word is None:
            return words[index:]
        if word in ("-S", "--split-string") and index + 1 < len(words):
            split = words[index + 1]
            return (None,) if split is None else tuple(split.split()) + words[index + 2:]
        if word == "--":
            index += 1
            continue
        if word.startswith("-"):
            index += 2 if word in TRANSPARENT_WRAPPERS["env"] else 1
            continue
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word):
            index += 1
            continue
        return words[index:]
    return ()


def _find_exec(words: tuple[str | None, ...]) -> list[tuple[str | None, ...]]:
    runs: list[tuple[str | None, ...]] = []
    index = 0
    while index < len(words):
        if words[index] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index + 1
            while end < len(words) and words[end] not in (";", "+"):
                end += 1
            runs.append(words[index + 1:end])
            index = end
        index += 1
    return runs


def _literal(node: Any) -> str | None:
    """The value of a word once the shell has removed quotes and backslashes; None when it holds an
    expansion (its value is only known when the shell runs)."""
    kind = node.type
    text = node.text.decode("utf-8", errors="surrogateescape")
    if kind in ("word", "number"):
        if "$" in text or "`" in text:
            return None
        return re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)
    if kind == "raw_string":
        return text[1:-1]
    if kind == "ansi_c_string":
        try:
            return codecs.decode(text[2:-1], "unicode_escape")
        except UnicodeDecodeError:
            return None
    if kind == "string":
        parts: list[str] = []
        for child in node.children:
            if child.type == '"':
                continue
            if child.type != "string_content":
                return None
            parts.append(re.sub(r'\\([$`"\\\n])', r"\1", child.text.decode("utf-8", errors="surrogateescape")))
        return "".join(parts)
    if kind == "concatenation":
        pieces = [_literal(child) for child in node.children]
        return None if any(piece is None for piece in pieces) else "".join(p for p in pieces if p is not None)
    return None

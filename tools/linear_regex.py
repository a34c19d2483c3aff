"""Regexes that run in linear time (RE2), for patterns a model writes and file names it globs.

Python's `re` backtracks: a pattern like `(a+)+$` on a long line, or a glob with many `*`s on a
long file name, can keep a tool busy for hours. RE2 (the engine behind ripgrep's default mode and
Go's regexp) guarantees time linear in the input, at the price of look-around and backreferences,
which it refuses at compile time instead of running slowly. For those (ripgrep runs them with
PCRE2), `compile_bounded` falls back to the `regex` package, whose matching takes a timeout.
"""

from __future__ import annotations

import time
from typing import Protocol

import re2
import regex


class LinearRegexError(ValueError):
    """The pattern is not valid RE2 syntax (look-around and backreferences are not supported)."""


class Pattern(Protocol):
    def search(self, text: str) -> object | None: ...

    def fullmatch(self, text: str) -> object | None: ...


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a bad pattern is reported to the model, not printed to stderr
    return options


def compile_linear(pattern: str, *, ignore_case: bool = False) -> Pattern:
    """Compile `pattern` with RE2; LinearRegexError (with RE2's reason) if it cannot be."""
    try:
        return re2.compile(f"(?i){pattern}" if ignore_case else pattern, _options())
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise LinearRegexError(reason) from exc


class RegexTimeoutError(TimeoutError):
    """A backtracking pattern ran past its time budget."""


class _Bounded:
    """A `regex` pattern whose searches, all together, stop at one deadline."""

    def __init__(self, compiled: "regex.Pattern[str]", budget_s: float) -> None:
        self._compiled = compiled
        self._deadline = time.monotonic() + budget_s
        self._budget_s = budget_s

    def search(self, text: str) -> object | None:
        left = self._deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return self._compiled.search(text, timeout=left)
        except TimeoutError as exc:
            raise RegexTimeoutError(f"the pattern took over {self._budget_s:g} s (catastrophic backtracking?)") from exc

    def fullmatch(self, text: str) -> object | None:
        return self._compiled.fullmatch(text, timeout=max(self._deadline - time.monotonic(), 0.001))


def compile_bounded(pattern: str, *, ignore_case: bool = False, budget_s: float = 10.0) -> Pattern:
    """RE2 when it accepts the pattern; otherwise (look-around, backreferences) a `regex` pattern
    whose searches together may take at most `budget_s` seconds (then RegexTimeoutError)."""
    try:
        return compile_linear(pattern, ignore_case=ignore_case)
    except LinearRegexError as linear_error:
        try:
            compiled = regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
        except regex.error as exc:
            raise LinearRegexError(str(exc)) from linear_error
        return _Bounded(compiled, budget_s)

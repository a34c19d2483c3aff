"""Secret shapes from detect-secrets (Yelp's scanner, a PyPI dependency), run in RE2.

detect-secrets keeps one plugin per provider (AWS, Azure storage, Artifactory, basic auth in URLs,
Cloudant, Discord, GitHub, GitLab, IBM, JWT, Mailchimp, npm, OpenAI, PyPI, SendGrid, Slack,
SoftLayer, Square, Stripe, Telegram, Twilio, private keys), each with a `denylist` of compiled
regexes. Those lists are read from the installed package, so a newer detect-secrets brings its new
shapes with no change here.

Stored text is hostile (a tool's output, a file the model read), so every pattern runs in RE2
(linear time) rather than Python's backtracking `re`: npm's `//.+/:_authToken=` alone is quadratic
on a long line of slashes there. Most of the package's patterns are RE2 already; the rest use two
guards RE2 lacks, rewritten here to consuming forms that find the same secrets:
`(?:(?<=\\W)|(?<=^))` before a pattern becomes `(?:^|\\W)`, and a one-character `(?!\\w)` or
`(?![a-f0-9])` becomes `(?:\\W|$)` or `(?:[^a-f0-9]|$)`; a repetition above RE2's limit of 1000 is
capped there. Guards at either end sit outside the group that holds the pattern, and a span found
is trimmed of delimiters (spaces, quotes, `=`, `:`), so what a guard consumes is never redacted.

Left out on purpose: the public-IP plugin (an address is not a secret, and sessions print many),
and the keyword and high-entropy plugins. Those judge whole lines of source with file-type rules
and filters made for reviewing a commit; on free text they take quoted commit ids, lockfile
hashes and test fixtures for secrets, and the ledger would lose the ordinary code it exists to
keep. hitrate's own rules (`store/redaction.py`) cover assignments to secret-looking names instead.
"""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
import re
from dataclasses import dataclass
from typing import Any

import re2

log = logging.getLogger(__name__)

# Plugins whose findings are not secrets to take out of free text (see the module's docstring).
_LEFT_OUT = frozenset({"IPPublicDetector", "KeywordDetector", "Base64HighEntropyString", "HexHighEntropyString"})

_LEAD_GUARD = r"(?:(?<=\W)|(?<=^))"
_TRAIL_GUARD = r"(?!\w)"
_RE2_MAX_REPEAT = 1000
# What a pattern may match around the secret (Artifactory's `(?:\s|=|:|"|^)`, the `@` after a URL's
# password, a closing quote): the delimiter stays in the text, only the secret goes.
_DELIMITERS = " \t\r\n=:\"'@"


class UnsupportedPattern(ValueError):
    """A detect-secrets pattern that RE2 cannot run even after the rewrites above."""


@dataclass(frozen=True)
class PackageRule:
    name: str
    """The plugin's secret type as a label: `AWS Access Key` -> `aws-access-key`."""
    regex: Any  # compiled RE2; group 1 is the package's whole pattern, its own groups follow
    groups: int
    """How many groups the package's pattern has: when it has any, they hold the secret."""

    def secret_span(self, found: Any) -> tuple[int, int]:
        """The secret's place in a match: from the package pattern's first non-empty group (the
        context before it, `aws_secret_access_key = "`, stays) to the end of its match, less
        delimiters at either end. Not the group alone: GitLab's `(glpat|gldt|...)-[...]{20,50}`
        groups only the prefix."""
        starts = [found.start(index) for index in range(2, self.groups + 2) if found.end(index) > found.start(index) >= 0]
        start, end = found.span(1)
        start = starts[0] if starts else start
        text = found.string
        while start < end and text[start] in _DELIMITERS:
            start += 1
        while end > start and text[end - 1] in _DELIMITERS:
            end -= 1
        return start, end


def label(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


# A negative lookahead of one character class, `(?!\\w)` or `(?![a-f0-9])`.
_NOT_FOLLOWED = re.compile(r"\(\?!(\\[wWdDsS]|\[(?:\\.|[^\]\\])+\])\)")


def _negated(char_class: str) -> str:
    if char_class.startswith("\\"):
        return char_class.swapcase()  # \w -> \W
    return "[" + char_class[2:] if char_class.startswith("[^") else "[^" + char_class[1:]


def to_re2(pattern: str, flags: int) -> str:
    """A detect-secrets pattern in RE2 syntax, its whole match in group 1; UnsupportedPattern when
    it needs more than the rewrites the module's docstring names."""
    if flags & re.VERBOSE and re.search(r"\s|#", pattern):
        raise UnsupportedPattern(f"verbose pattern: {pattern[:60]!r}")
    lead = pattern.startswith(_LEAD_GUARD)
    body = pattern[len(_LEAD_GUARD) :] if lead else pattern
    trail = body.endswith(_TRAIL_GUARD) and not body.endswith("\\" + _TRAIL_GUARD)
    body = body[: -len(_TRAIL_GUARD)] if trail else body
    body = _NOT_FOLLOWED.sub(lambda m: f"(?:{_negated(m[1])}|$)", body)
    body = re.sub(r"(?<!\\)\{(\d+),(\d+)\}", lambda m: f"{{{m[1]},{min(int(m[2]), _RE2_MAX_REPEAT)}}}", body)
    inline = "".join(flag for bit, flag in ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s")) if flags & bit)
    return (f"(?{inline})" if inline else "") + (r"(?:^|\W)" if lead else "") + f"({body})" + (r"(?:\W|$)" if trail else "")


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = 64 << 20
    return options


def _detectors() -> list[type]:
    """Every regex-based plugin class detect-secrets ships, in a stable order."""
    plugins = importlib.import_module("detect_secrets.plugins")
    base = importlib.import_module("detect_secrets.plugins.base").RegexBasedDetector
    found: dict[str, type] = {}
    for module_info in pkgutil.iter_modules(plugins.__path__):
        module = importlib.import_module(f"detect_secrets.plugins.{module_info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, base) and value is not base and value.__module__ == module.__name__:
                found[value.__name__] = value
    return [found[name] for name in sorted(found) if name not in _LEFT_OUT]


def compile_rules() -> tuple[tuple[PackageRule, ...], tuple[str, ...]]:
    """The package's patterns compiled in RE2, and a line for each one that could not be."""
    rules: list[PackageRule] = []
    skipped: list[str] = []
    for detector in _detectors():
        name = label(detector.secret_type)
        for compiled in detector.denylist:
            try:
                regex = re2.compile(to_re2(compiled.pattern, compiled.flags), _options())
            except (UnsupportedPattern, re2.error) as error:
                skipped.append(f"{detector.__name__}: {error}")
                continue
            rules.append(PackageRule(name, regex, compiled.groups))
    return tuple(rules), tuple(skipped)


@functools.cache
def package_rules() -> tuple[PackageRule, ...]:
    """detect-secrets' rules, compiled once on first use (a command that stores nothing never does)."""
    rules, skipped = compile_rules()
    for line in skipped:
        log.warning("detect-secrets pattern not used (RE2 cannot run it): %s", line)
    return rules

"""gitleaks' secret rules (`store/gitleaks.toml`, vendored; see `store/gitleaks-LICENSE.md`), read the
way gitleaks applies them.

Each rule has a regex (Go's RE2 syntax: it compiles unchanged in google-re2, linear time), keywords
(a text holding none is not scanned), an optional secret group, an optional Shannon-entropy floor,
and allowlists (regexes on the secret, the match or the line; stop words in the secret; path-only
conditions do not apply to text and are left out). The file-level allowlist (`$VAR`, `{{ x }}`,
`true`/`false`...) applies to every rule. Rules that only name file paths are skipped.

Why gitleaks and not detect-secrets: gitleaks' file is kept current (222 rules, Anthropic, OpenAI,
GitLab, Stripe, npm, PyPI, Hugging Face, SendGrid, Azure...), while detect-secrets' last release is
from 2024 and its ~25 plugins know none of the Anthropic, Google or current OpenAI key shapes; and
gitleaks' patterns are RE2, which stored text (hostile) needs, where detect-secrets uses Python's
backtracking `re`.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from typing import Any

import re2

RULES_FILE = "gitleaks.toml"


@dataclass(frozen=True)
class Allowlist:
    regexes: tuple[Any, ...]  # compiled
    target: str  # "secret", "match" or "line"
    stopwords: tuple[str, ...]
    require_all: bool  # condition AND: regexes and stop words must both hold

    def allows(self, secret: str, match: str, line: str) -> bool:
        subject = {"match": match, "line": line}.get(self.target, secret)
        regex_hit = any(regex.search(subject) for regex in self.regexes)
        lowered = secret.lower()
        stop_hit = any(word in lowered for word in self.stopwords)
        if self.require_all:
            checks = ([regex_hit] if self.regexes else []) + ([stop_hit] if self.stopwords else [])
            return bool(checks) and all(checks)
        return regex_hit or stop_hit


@dataclass(frozen=True)
class SecretRule:
    id: str
    regex: Any  # compiled RE2
    keywords: tuple[str, ...]
    secret_group: int
    entropy: float
    allowlists: tuple[Allowlist, ...]

    def secret_span(self, found: Any) -> tuple[int, int]:
        """Where the secret lies in a match: the rule's secret group, else its first non-empty
        group, else the whole match (gitleaks' order)."""
        groups = found.re.groups if hasattr(found, "re") else 0
        if groups >= 1:
            if self.secret_group > 0 and self.secret_group <= groups and found.start(self.secret_group) >= 0:
                return found.span(self.secret_group)
            for index in range(1, groups + 1):
                start, end = found.span(index)
                if start >= 0 and end > start:
                    return start, end
        return found.span()


def shannon_entropy(text: str) -> float:
    if not text:
        return 0.0
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = 64 << 20  # some rules (private keys over a long file) need more than RE2's 8 MiB
    return options


def _allowlist(table: dict[str, Any]) -> Allowlist | None:
    require_all = str(table.get("condition", "OR")).upper() == "AND"
    if require_all and (table.get("paths") or table.get("commits")):
        return None  # also needs a file path or commit, which stored text has not: never allows
    regexes = tuple(re2.compile(pattern, _options()) for pattern in table.get("regexes", ()))
    stopwords = tuple(str(word).lower() for word in table.get("stopwords", ()))
    if not regexes and not stopwords:
        return None
    return Allowlist(regexes, str(table.get("regexTarget", "secret")), stopwords, require_all)


def _load(data: dict[str, Any]) -> tuple[tuple[SecretRule, ...], tuple[Allowlist, ...]]:
    global_lists = [data.get("allowlist", {}), *data.get("allowlists", [])]
    shared = tuple(a for a in (_allowlist(t) for t in global_lists if t) if a is not None)
    rules: list[SecretRule] = []
    for table in data.get("rules", []):
        if "regex" not in table:
            continue  # a rule about file names only
        allowlists = tuple(a for a in (_allowlist(t) for t in table.get("allowlists", [])) if a is not None)
        rules.append(
            SecretRule(
                id=str(table["id"]),
                regex=re2.compile(table["regex"], _options()),
                keywords=tuple(str(k).lower() for k in table.get("keywords", ())),
                secret_group=int(table.get("secretGroup", 0)),
                entropy=float(table.get("entropy", 0.0)),
                allowlists=allowlists,
            )
        )
    return tuple(rules), shared


@functools.cache
def gitleaks_rules() -> tuple[tuple[SecretRule, ...], tuple[Allowlist, ...]]:
    """The vendored file's rules and its file-wide allowlists, compiled once on first use."""
    text = resources.files("hitrate.store").joinpath(RULES_FILE).read_text(encoding="utf-8")
    return _load(tomllib.loads(text))

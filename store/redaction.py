"""Secrets taken out of what the ledger stores: known key shapes, private keys, passwords.

A session's transcript reaches the ledger whole: a `cat .env`, a config file read, a command that
printed a token, a model that repeated one. The ledger keeps it for months, and copies of it travel
(`hitrate merge`, shared eval results), so each stored string is scanned for known secret shapes
and each one found is replaced by `[REDACTED:<rule>]`. What is sent to the model is never changed
(that would change the cached prefix); a session resumed from the ledger re-sends the redacted
text, so its prompt differs from there on and that part is written to the cache once more.

The shapes follow gitleaks' rules (https://github.com/gitleaks/gitleaks/blob/master/config/gitleaks.toml)
for Anthropic, OpenAI, GitHub, AWS, Slack and Google keys, PEM private keys and JWTs, plus
bearer tokens, passwords in URLs and `password=`-style assignments. detect-secrets' plugins were
the other candidate: they know none of the Anthropic, Google or current OpenAI key formats, flag
only a private key's first line, and scan line by line with Python's backtracking `re`; stored text
is hostile, so these patterns run in RE2 (linear time).

Opaque provider payloads (thinking signatures, encrypted reasoning, redacted thinking) are left
as they are: they are base64 that the provider checks byte for byte.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import Any, Callable

import re2

ENV_REDACT = "HITRATE_REDACT_SECRETS"
"""Set to 0 / false / no / off to store secrets verbatim (the default redacts)."""

# Keys whose string values are provider-opaque (checked byte for byte when re-sent).
_OPAQUE_KEYS = frozenset({"signature", "encrypted_content"})

# Names that say their value is a secret, for the assignment rules: `DB_PASSWORD`, `client_secret`,
# `GITHUB_TOKEN`. What follows the word must start with a separator, so `max_tokens=4096` and
# `prompt_tokens: 12` are counts, not secrets; `PWD` (the working folder) is not a password.
_SECRET_NAME = (
    r"[A-Za-z0-9_.-]{0,40}(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|auth[_-]?key|credentials?|dsn)(?:[_.-][A-Za-z0-9_.-]{0,40})?"
)


_NAME_WORDS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "api_key", "api-key", "access_key",
               "access-key", "private_key", "private-key", "auth_key", "auth-key", "credential", "dsn")  # fmt: skip


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: str
    keywords: tuple[str, ...]
    """Lower-case strings one of which every match contains: text with none of them is not scanned
    (gitleaks' keywords), which keeps a megabyte of ordinary output to a few milliseconds."""
    keep: int = 0
    """Groups before the secret that stay (a variable's name, `Bearer `); the secret is group keep+1
    and anything after it stays too."""


# Replacements never hold a quote or a backslash, and no pattern ends inside an escape, so a string
# that is itself JSON (a tool call's arguments, a provider block's raw text) stays valid JSON.
RULES: tuple[Rule, ...] = (
    Rule("private-key", r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[ A-Z0-9_-]{0,100}"
                        r"PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s:,-]|\\[nr])*)", ("private key",)),  # fmt: skip
    Rule("anthropic-api-key", r"\bsk-ant-[a-z]{2,8}[0-9]{2}-[A-Za-z0-9_-]{20,}", ("sk-ant-",)),
    Rule("openai-api-key", r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"
                           r"|\bsk-[A-Za-z0-9]{48}\b", ("sk-",)),  # fmt: skip
    Rule("github-token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b|\bgithub_pat_[A-Za-z0-9_]{22,}",
         ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    Rule("aws-access-key-id", r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b", ("a3t", "akia", "asia", "abia", "acca")),
    Rule("slack-token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}", ("xox",)),
    Rule("slack-webhook", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}", ("hooks.slack.com",)),
    Rule("google-api-key", r"\bAIza[A-Za-z0-9_-]{35}", ("aiza",)),
    Rule("google-oauth", r"\bGOCSPX-[A-Za-z0-9_-]{28}|\bya29\.[A-Za-z0-9_-]{20,}", ("gocspx-", "ya29.")),
    Rule("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", ("eyj",)),
    Rule("bearer-token", r"(?i)(\b(?:bearer|token)\s+)([A-Za-z0-9._~+/-]{16,}=*)", ("bearer", "token"), keep=1),
    Rule("url-password", r"(?i)(\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@\"'<>]{1,100}:)([^\s@/\"'<>]{1,200})(@)", ("://",), keep=1),
    # A quoted value assigned to a secret's name: `"password": "hunter2"`, `token = 'abc123'`, and
    # the same inside a JSON string (`\"password\": \"hunter2\"`, a config file a tool call writes).
    Rule("assigned-secret", rf"(?i)(\b{_SECRET_NAME}(?:\\?[\"'])?\s{{0,5}}(?::=|=>|=|:)\s{{0,5}}\\?[\"'])([^\"'\s\\]{{4,}})(\\?[\"'])",
         _NAME_WORDS, keep=1),  # fmt: skip
    # An unquoted one, as in .env files and shell: `DB_PASSWORD=hunter2`, `export API_KEY=abc`. A
    # value that reads as code (a call, an index, a `$VAR`) or a path is not a secret.
    Rule("assigned-secret", rf"(?im)(\b{_SECRET_NAME}\s{{0,5}}(?::=|=|:)\s{{0,5}})([^\s\"'\\,;()\[\]{{}}$<>%`&/~.][^\s\"'\\,;()\[\]{{}}$<>%`&]{{3,}})(\s|$|[,;&])",
         _NAME_WORDS, keep=1),  # fmt: skip
)


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = 64 << 20  # the private-key rule on a large file needs more than RE2's default 8 MiB
    return options




def redaction_enabled(env: dict[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get(ENV_REDACT, "")
    return value.strip().lower() not in ("0", "false", "no", "off")


def _replacer(rule: Rule) -> Callable[[Any], str]:
    def replace(found: Any) -> str:
        if rule.keep == 0:
            return f"[REDACTED:{rule.name}]"
        groups = found.groups()
        kept = "".join(g or "" for g in groups[: rule.keep])
        after = "".join(g or "" for g in groups[rule.keep + 1 :])
        return f"{kept}[REDACTED:{rule.name}]{after}"

    return replace


@functools.cache
def _replacers() -> tuple[tuple[tuple[str, ...], Any, Callable[[Any], str]], ...]:
    """The compiled rules, built on first use (a command that stores nothing never compiles them)."""
    return tuple((rule.keywords, re2.compile(rule.pattern, _options()), _replacer(rule)) for rule in RULES)


def redact_text(text: str) -> str:
    """`text` with every secret shape replaced; the same object when nothing matched."""
    out = text
    lowered = text.lower()
    for keywords, regex, replace in _replacers():
        if any(word in lowered for word in keywords):
            out = regex.sub(replace, out)
    return text if out == text else out


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [_walk(v) for v in value]
    if isinstance(value, dict):
        redacted_thinking = value.get("redacted") is True or value.get("type") == "redacted_thinking"
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _OPAQUE_KEYS or (redacted_thinking and key in ("thinking", "data")):
                out[key] = item
            elif key == "raw" and isinstance(item, str):
                out[key] = redact_json(item)  # a provider block's own JSON text, kept inside ours
            else:
                out[key] = _walk(item)
        return out
    return value


def redact_value(value: Any) -> Any:
    """A JSON-like value with secrets taken out of every string but the opaque ones."""
    return _walk(value)


def redact_json(text: str) -> str:
    """JSON text with secrets taken out of its strings; returned byte for byte when it holds none
    (text that is not JSON is redacted as text)."""
    try:
        value = json.loads(text)
    except ValueError:
        return redact_text(text)
    redacted = _walk(value)
    if redacted == value:
        return text
    return json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))

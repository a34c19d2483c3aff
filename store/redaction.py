"""Secrets taken out of what the ledger stores: known key shapes, private keys, passwords.

A session's transcript reaches the ledger whole: a `cat .env`, a config file read, a command that
printed a token, a model that repeated one. The ledger keeps it for months, and copies of it travel
(`hitrate merge`, shared eval results), so each stored string is scanned for known secret shapes
and each one found is replaced by `[REDACTED:<rule>]`. What is sent to the model is never changed
(that would change the cached prefix); a session resumed from the ledger re-sends the redacted
text, so its prompt differs from there on and that part is written to the cache once more.

The shapes come from detect-secrets (Yelp's scanner, a dependency; read by
`store/detect_secrets_rules.py`): its provider plugins' patterns (AWS, Azure storage, GitHub,
GitLab, Slack, Stripe, npm, PyPI, SendGrid, Twilio, Telegram, JWTs, private keys...), taken from the
installed package and run in RE2 (linear time: stored text is hostile). hitrate's own rules
(`RULES` below) add what detect-secrets leaves to its keyword and entropy plugins (which judge
source files, not free text) or does not know: Anthropic, Google, current OpenAI and Hugging Face
keys, provider keys by prefix where the package asks for an exact length, passwords in URLs and in
`curl -u`, `mysql -p`, `Authorization: Basic`, bearer tokens, `x-api-key:` headers, Azure's
`AccountKey=` and SAS `sig=`, docker's `auth` entries, `.netrc` and `.pgpass` lines, and
`password=`-style assignments.

Opaque provider payloads (thinking signatures, encrypted reasoning, redacted thinking) are left
as they are: they are base64 that the provider checks byte for byte.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import Any

import re2

from hitrate.store.detect_secrets_rules import package_rules

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
    """Lower-case strings one of which every match contains: text with none of them is not scanned,
    which keeps a megabyte of ordinary output to a few milliseconds."""
    keep: int = 0
    """Groups before the secret that stay (a variable's name, `Bearer `); the secret is group keep+1
    and anything after it stays too."""


# hitrate's own shapes, beside detect-secrets'. Replacements never hold a quote or a backslash, and spans
# are trimmed so they neither split an escape nor swallow a bare quote, so a string that is itself
# JSON (a tool call's arguments, a provider block's raw text) stays valid JSON.
RULES: tuple[Rule, ...] = (
    # Provider keys by prefix alone: where detect-secrets knows them at all it demands exact lengths
    # (to keep false alarms out of code scans); a ledger would rather lose a look-alike than keep a key.
    Rule("private-key", r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[ A-Z0-9_-]{0,100}"
                        r"PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s:,-]|\\[nr])*)", ("private key",)),  # fmt: skip
    Rule("anthropic-api-key", r"\bsk-ant-[a-z]{2,8}[0-9]{2}-[A-Za-z0-9_-]{20,}", ("sk-ant-",)),
    Rule("openai-api-key", r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"
                           r"|\bsk-[A-Za-z0-9]{48}\b", ("sk-",)),  # fmt: skip
    Rule("github-token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b|\bgithub_pat_[A-Za-z0-9_]{22,}",
         ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    Rule("stripe-access-key", r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{20,}", ("_live_", "_test_")),  # today's keys pass 24
    Rule("huggingface-token", r"\bhf_[A-Za-z0-9]{30,}", ("hf_",)),
    Rule("age-secret-key", r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}", ("age-secret-key-",)),
    Rule("cloudflare-origin-ca-key", r"\bv1\.0-[a-f0-9]{24}-[a-f0-9]{146}", ("v1.0-",)),
    # Tokens whose prefix alone says what they are, wherever they are printed (bare, not assigned).
    Rule("provider-token", r"\b(?:shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}|dop_v1_[a-f0-9]{64}|dp\.pt\.[A-Za-z0-9]{40,}"
                           r"|dapi[a-f0-9]{32}|lin_api_[A-Za-z0-9]{40}|NRAK-[A-Z0-9]{27}|glsa_[A-Za-z0-9]{32}_[a-f0-9]{8}"
                           r"|hvs\.[A-Za-z0-9_-]{24,}|HRKU-[A-Za-z0-9_-]{60}|pul-[a-f0-9]{40}|ATATT3[A-Za-z0-9_=-]{100,})",
         ("shp", "dop_v1_", "dp.pt.", "dapi", "lin_api_", "nrak-", "glsa_", "hvs.", "hrku-", "pul-", "atatt3")),  # fmt: skip
    Rule("slack-token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}", ("xox",)),
    Rule("google-api-key", r"\bAIza[A-Za-z0-9_-]{35}", ("aiza",)),
    Rule("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", ("eyj",)),
    Rule("bearer-token", r"(?i)(\b(?:bearer|token)\s+)([A-Za-z0-9._~+/-]{16,}=*)", ("bearer", "token"), keep=1),
    Rule("basic-auth", r"(?i)(\bauthorization\s*[:=]\s*\\?[\"']?\s*basic\s+)([A-Za-z0-9+/]{8,}={0,2})", ("basic",), keep=1),
    Rule("api-key-header", r"(?i)(\b(?:x-api-key|api-key|x-auth-token|x-access-token|private-token|x-goog-api-key)\s*:\s*)([^\s\"'\\,;]{8,})",
         ("api-key", "auth-token", "access-token", "private-token"), keep=1),  # fmt: skip
    Rule("url-password", r"(?i)(\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@\"'<>]{0,100}:)([^\s@/\"'<>]{1,200})(@)", ("://",), keep=1),
    Rule("curl-user", r"(\s(?:-u|--user|--proxy-user)\s*[\"']?[^\s:\"']{1,100}:)([^\s\"']{3,200})", ("-u", "--user"), keep=1),
    Rule("mysql-password", r"(\b(?:mysql|mysqldump|mariadb|mysqladmin)\b[^\n|;&]{0,200}?\s(?:-p|--password=))([^\s\"'-][^\s\"']{2,200})",
         ("mysql", "mariadb"), keep=1),  # fmt: skip
    Rule("azure-account-key", r"(?i)(\bAccountKey\s*=\s*)([A-Za-z0-9+/]{20,}={0,2})", ("accountkey",), keep=1),
    Rule("azure-sas-signature", r"([?&;]sig=)([A-Za-z0-9%+/]{20,}(?:%3D|=){0,2})", ("sig=",), keep=1),
    Rule("netrc-password", r"(?m)(\bmachine\s+\S+(?:\s+login\s+\S+)?\s+password\s+)(\S{3,})", ("machine",), keep=1),
    Rule("pgpass-password", r"(?m)(^[A-Za-z0-9.*_-]+:(?:\d{1,5}|\*):[^:\s]+:[^:\s]+:)([^\s]{3,})$", (":",), keep=1),
    Rule("docker-auth", r"(\\?\"auth\\?\"\s*:\s*\\?\")([A-Za-z0-9+/]{8,}={0,2})", ('auth',), keep=1),
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


@functools.cache
def _own_rules() -> tuple[tuple[Rule, Any], ...]:
    """hitrate's own rules compiled, on first use (a command that stores nothing never compiles them)."""
    return tuple((rule, re2.compile(rule.pattern, _options())) for rule in RULES)


Span = tuple[int, int, str]


def _package_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    for rule in package_rules():
        for found in rule.regex.finditer(text):
            start, end = rule.secret_span(found)
            if end > start:
                spans.append((start, end, rule.name))
    return spans


def _own_spans(text: str, lowered: str) -> list[Span]:
    spans: list[Span] = []
    for rule, regex in _own_rules():
        if not any(word in lowered for word in rule.keywords):
            continue
        for found in regex.finditer(text):
            start, end = found.span(rule.keep + 1) if rule.keep else found.span()
            if end > start:
                spans.append((start, end, rule.name))
    return spans


def _json_safe(text: str, start: int, end: int) -> tuple[int, int]:
    """The span shrunk so that removing it leaves escapes and quotes as they were: it does not start
    on an escaped character, end on a lone backslash, or hold a bare double quote."""
    backslashes = 0
    while start - backslashes - 1 >= 0 and text[start - backslashes - 1] == "\\":
        backslashes += 1
    if backslashes % 2:
        start += 1  # the first character is escaped by the backslash before the span
    quote = text.find('"', start, end)
    while quote >= 0:
        escaped = 0
        while quote - escaped - 1 >= start and text[quote - escaped - 1] == "\\":
            escaped += 1
        if escaped % 2 == 0:
            end = quote - escaped  # a bare quote closes a JSON string: keep it and what follows
            break
        quote = text.find('"', quote + 1, end)
    trailing = 0
    while end - trailing - 1 >= start and text[end - trailing - 1] == "\\":
        trailing += 1
    if trailing % 2:
        end -= 1
    return start, end


def redact_text(text: str) -> str:
    """`text` with every secret replaced by `[REDACTED:<rule>]`; the same object when nothing matched."""
    lowered = text.lower()
    # Where two rules find the same secret, detect-secrets' name is the one kept.
    found = [(*span, 0) for span in _package_spans(text)] + [(*span, 1) for span in _own_spans(text, lowered)]
    spans = [span[:3] for span in sorted(found, key=lambda s: (s[0], -s[1], s[3]))]
    if not spans:
        return text
    merged: list[list[Any]] = []
    for start, end, name in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)  # overlapping finds: one replacement, the first's name
            continue
        merged.append([start, end, name])
    out: list[str] = []
    position = 0
    for start, end, name in merged:
        start, end = _json_safe(text, max(start, position), end)
        if end - start < 3:
            continue  # nothing worth hiding is left once the span keeps the escapes intact
        out += [text[position:start], f"[REDACTED:{name}]"]
        position = end
    out.append(text[position:])
    result = "".join(out)
    return text if result == text else result


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

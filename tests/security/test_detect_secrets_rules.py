"""detect-secrets' provider patterns, read from the installed package and run in RE2: every one of
them compiles there, the rewrites of the guards RE2 lacks find the same secrets, and the plugins
left out (keyword, high entropy, public IP) would have taken ordinary text."""

from __future__ import annotations

import re

import pytest
import re2

from hitrate.store.detect_secrets_rules import PackageRule, UnsupportedPattern, compile_rules, label, package_rules, to_re2
from hitrate.store.redaction import redact_text

SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4a3b2"


def test_every_provider_pattern_the_package_ships_runs_in_re2() -> None:
    rules, skipped = compile_rules()
    assert skipped == ()
    names = {rule.name for rule in rules}
    for expected in ("aws-access-key", "github-token", "gitlab-token", "stripe-access-key", "slack-token", "npm-tokens",
                     "pypi-token", "sendgrid-api-key", "azure-storage-account-access-key", "private-key"):  # fmt: skip
        assert expected in names
    assert len(rules) >= 40
    assert all(isinstance(rule.regex, type(re2.compile("x"))) for rule in rules)


def test_left_out_plugins_are_not_used() -> None:
    names = {rule.name for rule in package_rules()}
    assert not names & {"public-ip-ipv4", "secret-keyword", "base64-high-entropy-string", "hex-high-entropy-string"}


@pytest.mark.parametrize("pattern,flags,text,secret", [
    # lookbehind guard before, one-class lookahead inside the secret's group (IBM's shape)
    (r'(?:(?<=\W)|(?<=^))(?:ibm|)(?:_|-|)(?:key)(?: *)(?:=|:)(?: *)(?:"|\'|)([a-f0-9]{8}(?![a-f0-9]))(?:"|\'|)', re.I,
     'IBM_KEY = "0123abcd"', "0123abcd"),
    # lookahead guard after, a group that holds only the prefix (GitLab's shape)
    (r"(glpat|gldt)-[A-Za-z0-9_\-]{20,50}(?!\w)", 0, "token glpat-abcdefghijklmnopqrstu!", "glpat-abcdefghijklmnopqrstu"),
    # delimiters matched around a group-less pattern stay in the text (Artifactory's shape)
    (r'(?:\s|=|:|"|^)AKC[a-zA-Z0-9]{10,}(?:\s|"|$)', 0, 'key="AKCabcdefghij12"', "AKCabcdefghij12"),
])  # fmt: skip
def test_rewritten_patterns_find_what_the_package_finds(pattern: str, flags: int, text: str, secret: str) -> None:
    assert re.search(pattern, text, flags)
    rule = PackageRule("x", re2.compile(to_re2(pattern, flags)), re.compile(pattern).groups)
    found = rule.regex.search(text)
    assert found is not None
    start, end = rule.secret_span(found)
    assert text[start:end] == secret


@pytest.mark.parametrize("text", ["glpat-abcdefghijklmnopqrst", "glpat-abcdefghijklmnopqrst.", "glpat-abcdefghijklmnopqrstU"])
def test_a_lookahead_guard_rewritten_accepts_and_refuses_as_the_original(text: str) -> None:
    pattern = r"glpat-[A-Za-z0-9_\-]{20}(?!\w)"
    assert bool(re2.compile(to_re2(pattern, 0)).search(text)) == bool(re.search(pattern, text))


def test_repetitions_past_re2s_limit_are_capped_and_verbose_patterns_with_spaces_refused() -> None:
    assert "{50,1000}" in to_re2(r"glagent-[A-Za-z0-9_\-]{50,1024}(?!\w)", 0)
    with pytest.raises(UnsupportedPattern):
        to_re2("(?<![\\w.]) ( \\d+ ) # a comment", re.VERBOSE)


def test_labels_are_the_plugins_secret_types() -> None:
    assert label("AWS Access Key") == "aws-access-key"
    assert label("Public IP (ipv4)") == "public-ip-ipv4"


def test_the_entropy_plugin_would_take_a_quoted_hash_that_redaction_keeps() -> None:
    # Why the high-entropy plugins are left out: a file's sha256 in a lockfile or a download check is
    # ordinary session text, and the plugin takes it for a secret.
    from detect_secrets.plugins.high_entropy_strings import HexHighEntropyString

    line = f'EXPECTED_SHA256 = "{SHA256}"'
    plugin = HexHighEntropyString()
    assert any(plugin.calculate_shannon_entropy(s) > plugin.entropy_limit for s in plugin.analyze_string(line))
    assert redact_text(line) == line


@pytest.mark.parametrize("line", [
    '"integrity": "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+5x7wAcxZG7ZL6MwsJyjmeyLMKUzKTOaDi0E9A=="',
    "revision = \"3f9a1c2b7e4d5a6f8b9c0d1e2f3a4b5c6d7e8f90\"",
    "def token_count(text: str) -> int:\n    return len(tokenizer.encode(text))",
    "The access key rotates every 90 days; ask the admin for a new one.",
    "url = f\"https://{host}:{port}/v1\"",
    "client = OpenAI(api_key=os.environ[\"OPENAI_API_KEY\"])",
])  # fmt: skip
def test_ordinary_code_and_prose_stay_intact(line: str) -> None:
    assert redact_text(line) == line


def test_a_stripe_key_longer_than_the_packages_24_characters_goes_whole() -> None:
    key = "sk_live_51H" + "a1B2c3D4e5F6g7H8i9J0" * 5
    assert key[-12:] not in redact_text(f"charged with {key} today")

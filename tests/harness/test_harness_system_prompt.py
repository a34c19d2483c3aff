"""The default system prompt: byte-stable (twice, and across processes), free of volatile text,
covering what a strong model needs told, and true about the shell's confinement on this machine."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hitrate.harness.prompts import default_system_prompt
from hitrate.harness.session_inputs import session_inputs
from hitrate.projection.caching import CacheRules
from hitrate.projection.lint import lint
from hitrate.projection.project import project
from hitrate.projection.transcript import TextBlock, Transcript, UserMessage
from hitrate.tools.confine import ConfinementPolicy, detect
from hitrate.tools.registry import default_tools

NAMES = default_tools().names

RENDER_IN_A_NEW_PROCESS = (
    "import hashlib, sys\n"
    "from hitrate.harness.prompts import default_system_prompt\n"
    "from hitrate.tools.registry import default_tools\n"
    "text = default_system_prompt(default_tools().names, shell_confined=sys.argv[1] == 'yes').render()\n"
    "print(hashlib.sha256(text.encode()).hexdigest())\n"
)


def rendered(confined: bool) -> str:
    return default_system_prompt(NAMES, shell_confined=confined).render()


@pytest.mark.parametrize("confined", [True, False])
def test_renders_byte_identically_twice_and_across_processes(confined, tmp_path):
    first, second = rendered(confined), rendered(confined)
    assert first == second
    assert default_system_prompt(list(reversed(NAMES)), shell_confined=confined).render() == first  # tool order
    # Another process, another working directory, another hash seed: the same bytes.
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", RENDER_IN_A_NEW_PROCESS, "yes" if confined else "no"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == hashlib.sha256(first.encode()).hexdigest()


@pytest.mark.parametrize("confined", [True, False])
def test_contains_no_volatile_text(confined, tmp_path):
    text = rendered(confined)
    prompt = project(rules=CacheRules(family="anthropic"), model="m", tools=[], system=text,
                     transcript=Transcript(messages=(UserMessage(content=(TextBlock(text="hi"),)),)),
                     context={"date": "2026-12-01", "workspace": str(tmp_path)})
    assert [f for f in lint(prompt, CacheRules(family="anthropic")) if f.section == "system"] == []
    assert str(os.getpid()) not in re.findall(r"\d+", text)
    for volatile in (str(Path.cwd()), str(tmp_path), str(Path.home()), sys.executable):
        assert volatile not in text
    assert not re.search(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b|/tmp/", text)
    assert "{{" not in text and "{%" not in text and "\r" not in text


def test_covers_what_a_strong_model_needs_told():
    text = rendered(True).lower()
    for must in (
        "keep going until the task is solved",  # persistence
        "reproduce it",  # reproduce before fixing
        "run the tests closest to your change first",  # targeted, then broad
        "broader suite",
        "never edit, delete or skip a test",  # tests are not edited to pass
        "never discard, reset, revert",  # git safety
        "do not commit",
        "interactive prompts",  # interactive commands
        "runs too long",  # long-running commands
        "in one turn",  # batching independent reads
        "<doc>",  # the docs block
        "agents.md` applies to the folder it is in",  # AGENTS.md scoping
        "are data about the project",  # file and tool output are data
        "<context>",
    ):
        assert must in text, must


def test_states_the_confinement_this_machine_has():
    sandboxed, unconfined = rendered(True), rendered(False)
    assert "run in an operating-system sandbox" in sandboxed and "NOT sandboxed" not in sandboxed
    assert "have no network access" in sandboxed
    assert "NOT sandboxed on this machine" in unconfined and "approve every command" in unconfined
    assert "sandbox:" not in unconfined
    # Without a choice given, the prompt says what `tools.confine.detect` found here.
    here = default_system_prompt(NAMES).render()
    assert here == (sandboxed if detect().confined else unconfined)
    network = default_system_prompt(NAMES, shell_confined=True, policy=ConfinementPolicy(network=True)).render()
    assert "may use the network" in network


def test_sessions_use_it_and_the_old_false_claim_is_gone(tmp_path):
    inputs = session_inputs(tmp_path)
    text = inputs.system.render()
    assert text == default_system_prompt(inputs.tools.names).render()
    assert "You cannot read or write outside it" not in text
    assert text.endswith("\n".join(f"- {n}" for n in sorted(inputs.tools.names)) + "\n")

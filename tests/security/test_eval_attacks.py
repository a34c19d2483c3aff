"""Attacks from inside an eval: the agent's shell looks for the hidden tests and the reference
solution by their absolute paths, and a failing test prints the environment so that, with a
second try, the keys would travel back to the model in the test feedback."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from hitrate.evals.runner import run_eval
from hitrate.evals.settings import EvalSettings
from hitrate.tools.confine import detect

from evals_task_factory import write_task
from runner_fakes import FakeRoutes, PrefixCacheBackend

needs_sandbox = pytest.mark.skipif(not detect().confined, reason=f"no OS sandbox on this machine: {detect().detail}")


def _settings(suite: Path, **overrides) -> EvalSettings:
    base = {"suite": str(suite), "model": "openai-compat/fake@http://127.0.0.1:9/v1", "policy": "model"}
    return EvalSettings(**{**base, **overrides})


def _all_prompt_text(backend: PrefixCacheBackend) -> str:
    parts = []
    for prompt in backend.prompts:
        for message in prompt.messages:
            for block in message.content:
                parts.append(str(getattr(block, "text", "")) + str(getattr(block, "content", "")))
    return "\n".join(parts)


@needs_sandbox
@pytest.mark.timeout(120)
def test_the_agents_shell_cannot_read_the_hidden_tests_or_solution(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    task_dir = write_task(suite, "fix-add", solution={"mathx.py": "REFERENCE_SOLUTION = 1\n"})
    other = write_task(suite, "other-task", solution={"mathx.py": "OTHER_SOLUTION = 1\n"})
    command = f"cat {task_dir}/tests/test_mathx.py {task_dir}/solution/mathx.py {other}/solution/mathx.py"
    backend = PrefixCacheBackend(
        replies=[{"tool_calls": [("shell", json.dumps({"command": command}))]}, {"text": "Done."}]
    )
    result = run_eval(_settings(suite), db_path=tmp_path / "e.db", routes=FakeRoutes(backend))
    seen = _all_prompt_text(backend)
    assert "REFERENCE_SOLUTION" not in seen and "OTHER_SOLUTION" not in seen and "def test_add" not in seen
    assert "No such file" in seen  # the command ran, and found nothing
    assert {r.outcome for r in result.results} == {"fail"}


@pytest.mark.timeout(120)
def test_keys_printed_by_a_failing_test_do_not_reach_the_second_try(tmp_path: Path, monkeypatch) -> None:
    secret = f"sk-ant-{uuid.uuid4().hex}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    suite = tmp_path / "suite"
    leaky = "import os\n\n\ndef test_add():\n    print(dict(os.environ))\n    assert False, dict(os.environ)\n"
    write_task(suite, "fix-add", tests={"test_mathx.py": leaky}, p2p=[])
    backend = PrefixCacheBackend(replies=[{"text": "Nothing to do."}, {"text": "Still nothing."}])
    run_eval(_settings(suite, tries=2), db_path=tmp_path / "k.db", routes=FakeRoutes(backend))
    seen = _all_prompt_text(backend)
    assert "hidden tests were run" in seen  # the feedback with the test output did go back
    assert secret not in seen

"""The credentials of the tools hitrate sits next to, and hitrate's own ledger and config wherever
they were moved, are out of the shell's sight.

The fake home lies under the real home, not under /tmp: the sandbox's private /tmp would hide a
folder there whatever the hidden list says, and the test could not fail.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from hitrate.tools import ToolContext
from hitrate.tools import confine
from hitrate.tools.confine import HIDDEN_HOME_PATHS, detect

pytestmark = [
    pytest.mark.skipif(not detect().confined, reason=f"no OS sandbox on this machine: {detect().detail}"),
    pytest.mark.timeout(90),
]

# The locations of the report (33 of 36 were readable), each with a file the shell must not read.
CREDENTIAL_FILES = (
    ".codex/auth.json",
    ".claude/.credentials.json",
    ".claude.json",
    ".config/openai/auth.json",
    ".config/anthropic/api_key",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".vault-token",
    ".boto",
    ".s3cfg",
    ".env",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".config/git/credentials",
    ".local/share/keyrings/login.keyring",
    ".password-store/github.gpg",
    ".config/containers/auth.json",
    ".gem/credentials",
    ".config/pip/pip.conf",
    ".terraform.d/credentials.tfrc.json",
    ".config/rclone/rclone.conf",
    ".config/gh/hosts.yml",
    ".docker/config.json",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".netrc",
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".kube/config",
    ".config/gcloud/credentials.db",
)


@pytest.fixture
def home() -> Path:
    folder = Path.home() / f".hitrate-fake-home-{uuid.uuid4().hex}"
    folder.mkdir()
    yield folder
    shutil.rmtree(folder)


def _run(registry, workspace: Path, home: Path, command: str) -> str:
    ctx = ToolContext(workspace=workspace, env={"PATH": os.environ["PATH"], "HOME": str(home)})
    return registry.execute("shell", {"command": command, "timeout_s": 20}, ctx).content


def test_every_listed_credential_location_is_hidden(registry, workspace: Path, home: Path) -> None:
    for index, rel in enumerate(CREDENTIAL_FILES):
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"SECRET-{index}-{uuid.uuid4().hex}\n")
    output = _run(registry, workspace, home, f"cd {home} && cat {' '.join(CREDENTIAL_FILES)} 2>/dev/null; echo done")
    assert "done" in output
    leaked = [rel for rel in CREDENTIAL_FILES if (home / rel).read_text().strip() in output]
    assert leaked == []


def test_the_list_names_each_location_of_the_report() -> None:
    # Each file is hidden by itself or by a folder above it in the list.
    for rel in CREDENTIAL_FILES:
        parts = Path(rel).parts
        assert any(str(Path(*parts[:n])) in HIDDEN_HOME_PATHS for n in range(1, len(parts) + 1)), rel


def test_a_ledger_and_config_moved_by_variable_are_hidden(registry, workspace: Path, home: Path, monkeypatch) -> None:
    ledger, config = home / "elsewhere" / "my-ledger.db", home / "conf" / "hitrate.toml"
    for path, text in ((ledger, "LEDGER-TRANSCRIPTS"), (ledger.with_name("my-ledger.db-wal"), "WAL-PAGES"), (config, "api_key = CONFIG-KEY")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setenv("HITRATE_DB", str(ledger))
    monkeypatch.setenv("HITRATE_CONFIG", str(config))
    output = _run(registry, workspace, home, f"cat {ledger} {ledger}-wal {config}; echo done")
    assert "done" in output
    for secret in ("LEDGER-TRANSCRIPTS", "WAL-PAGES", "CONFIG-KEY"):
        assert secret not in output


def test_a_ledger_chosen_with_db_is_hidden(registry, workspace: Path, home: Path, monkeypatch) -> None:
    ledger = home / "chosen.db"
    ledger.write_text("LEDGER-TRANSCRIPTS")
    monkeypatch.setattr(confine, "_hidden_this_process", set())
    confine.hide_from_commands(ledger)
    output = _run(registry, workspace, home, f"cat {ledger}; echo done")
    assert "done" in output and "LEDGER-TRANSCRIPTS" not in output

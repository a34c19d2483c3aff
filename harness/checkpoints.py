"""Checkpoints of the workspace around each agent turn, so `/undo` can put back the files a turn
changed (created, edited, deleted), by a tool or by a shell command.

The snapshots live in a git object store of hitrate's own, outside the workspace: every git
command runs with `GIT_DIR`, `GIT_INDEX_FILE` and `GIT_WORK_TREE` pointing at it, and with the
user's global and system git config switched off. The user's repository (if the workspace is one)
is never read or written: not its history, not its index, not its hooks. A workspace that is not
a repository works the same way. What the workspace's `.gitignore` files exclude is not
snapshotted (build output, virtual environments), so it is not restored either.

A turn is two snapshots (trees, no commits): before it and after it. Undo restores, for the paths
that differ between the two, the content they had before, and leaves every other path alone,
including changes the user made while or after the turn ran; a path the user changed again after
the turn is skipped and reported rather than overwritten.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import platformdirs
from pydantic import BaseModel, ConfigDict

from hitrate.tools.trusted_programs import inside, minimal_env, trusted_program


class CheckpointError(RuntimeError):
    """Checkpoints cannot be taken or restored; the message says why."""


class TurnCheckpoint(BaseModel):
    model_config = ConfigDict(frozen=True)

    before: str
    """Tree id of the workspace before the turn."""
    after: str
    """Tree id after it."""
    label: str = ""


class UndoResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    restored: list[str] = []
    """Paths put back to their content before the turn."""
    removed: list[str] = []
    """Paths the turn created, deleted again."""
    skipped: list[str] = []
    """Paths changed again after the turn: left as they are."""
    label: str = ""


def default_store() -> Path:
    return Path(platformdirs.user_data_dir("hitrate", appauthor=False)) / "checkpoints"


class Checkpoints:
    """The checkpoint store of one workspace."""

    def __init__(self, workspace: Path, store: Path | None = None) -> None:
        self.workspace = Path(workspace).resolve()
        key = hashlib.sha256(str(self.workspace).encode("utf-8")).hexdigest()[:16]
        self.git_dir = (store or default_store()) / key
        self.turns: list[TurnCheckpoint] = []
        # From a system folder, never PATH: the agent's shell can plant `.venv/bin/git` in the workspace.
        git = trusted_program("git")
        if git is None or inside(git, self.workspace):
            raise CheckpointError("checkpoints need the git program (none in a system folder); /undo is not available")
        self._git = git
        if not (self.git_dir / "HEAD").is_file():
            self.git_dir.mkdir(parents=True, exist_ok=True)
            self._run("init", "--quiet", "--bare", str(self.git_dir), work_tree=False)
            # No background gc: the trees of earlier turns must stay until this store is dropped.
            self._run("config", "gc.auto", "0")

    def _env(self, work_tree: bool) -> dict[str, str]:
        # No API keys and no PATH into the workspace for anything git starts.
        env = minimal_env(
            GIT_DIR=str(self.git_dir),
            GIT_INDEX_FILE=str(self.git_dir / "hitrate-index"),
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_CONFIG_NOSYSTEM="1",
            GIT_LITERAL_PATHSPECS="1",
            GIT_TERMINAL_PROMPT="0",
        )
        if work_tree:
            env["GIT_WORK_TREE"] = str(self.workspace)
        return env

    def _run(self, *args: str, work_tree: bool = True, stdin: bytes | None = None) -> bytes:
        try:
            done = subprocess.run(
                [self._git, *args], cwd=self.workspace, env=self._env(work_tree), input=stdin,
                capture_output=True, check=False,
            )
        except OSError as exc:
            raise CheckpointError(f"could not run git: {exc.strerror or exc}") from exc
        if done.returncode != 0:
            raise CheckpointError(f"git {args[0]} failed: {done.stderr.decode('utf-8', 'replace').strip()}")
        return done.stdout

    def snapshot(self) -> str:
        """The tree id of the workspace as it is now (its .gitignore honoured)."""
        self._run("add", "--all", ".")
        return self._run("write-tree").decode().strip()

    def begin(self) -> str:
        return self.snapshot()

    def end(self, before: str, label: str = "") -> TurnCheckpoint:
        turn = TurnCheckpoint(before=before, after=self.snapshot(), label=label)
        self.turns.append(turn)
        return turn

    def changed_paths(self, turn: TurnCheckpoint) -> list[tuple[str, str]]:
        """(status, path) for each path the turn changed: A created, M modified, D deleted, T type."""
        out = self._run("diff-tree", "-r", "-z", "--no-renames", "--name-status", turn.before, turn.after)
        fields = out.decode("utf-8", "surrogateescape").split("\0")
        return [(fields[i][0], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]

    def last_changing_turn(self) -> TurnCheckpoint | None:
        """The newest turn that changed a file (turns that changed nothing are dropped)."""
        while self.turns and self.turns[-1].before == self.turns[-1].after:
            self.turns.pop()
        return self.turns[-1] if self.turns else None

    def undo(self) -> UndoResult | None:
        """Put back the files the last turn that changed any changed; None when there is none."""
        turn = self.last_changing_turn()
        if turn is None:
            return None
        changes = self.changed_paths(turn)
        now = self.snapshot()
        since = {path for _, path in self._diff(turn.after, now)}
        restored: list[str] = []
        removed: list[str] = []
        skipped: list[str] = []
        to_checkout: list[str] = []
        for status, path in changes:
            if path in since:
                skipped.append(path)
            elif status == "A":
                target = self.workspace / path
                if target.is_file() or target.is_symlink():
                    target.unlink()
                self._prune_empty_parents(target.parent)
                removed.append(path)
            else:
                to_checkout.append(path)
        if to_checkout:
            # Writes the files (content and mode) from the tree before the turn; only the private
            # index is touched besides the files themselves.
            self._run("checkout", turn.before, "--", *to_checkout)
            restored.extend(to_checkout)
        self.turns.pop()
        self.snapshot()
        return UndoResult(restored=restored, removed=removed, skipped=skipped, label=turn.label)

    def _diff(self, a: str, b: str) -> list[tuple[str, str]]:
        return self.changed_paths(TurnCheckpoint(before=a, after=b))

    def _prune_empty_parents(self, folder: Path) -> None:
        while folder != self.workspace and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent

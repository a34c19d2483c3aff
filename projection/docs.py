"""Project docs found in a workspace (AGENTS.md, CLAUDE.md, a README excerpt), in a fixed order, capped.

The docs are read once per session by the caller and passed to the projector: re-reading them on
every request would turn an edit the agent makes to AGENTS.md into a full cache miss mid-task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from pydantic import BaseModel, ConfigDict

# Priority order. Instructions for agents first; the README only as an excerpt.
DEFAULT_DOC_NAMES: tuple[str, ...] = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
README_NAMES: tuple[str, ...] = ("README.md", "README.rst", "README.txt", "README")
_TRUNCATED = "\n[... truncated]"


class ProjectDoc(BaseModel):
    """One doc file's text as it will be shown to the model."""

    model_config = ConfigDict(frozen=True)

    path: str
    """Workspace-relative, '/'-separated."""
    text: str
    truncated: bool = False


def _find(workspace: Path, name: str) -> Path | None:
    """The file `name` under workspace, matching the file name case-insensitively (README.md vs Readme.md)."""
    parent = workspace.joinpath(*name.split("/")[:-1])
    if not parent.is_dir():
        return None
    wanted = name.split("/")[-1].lower()
    matches = sorted(p for p in parent.iterdir() if p.name.lower() == wanted and p.is_file())
    exact = [p for p in matches if p.name == name.split("/")[-1]]
    return (exact or matches or [None])[0]


def _cut(text: str, max_bytes: int) -> tuple[str, bool]:
    """At most max_bytes of UTF-8, cut at a line end when there is one, never inside a character."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    head = data[:max_bytes].decode("utf-8", errors="ignore")
    newline = head.rfind("\n")
    if newline > 0:
        head = head[:newline]
    return head + _TRUNCATED, True


def discover_docs(
    workspace: Path | str,
    *,
    names: Sequence[str] = DEFAULT_DOC_NAMES,
    readme_names: Sequence[str] = README_NAMES,
    max_doc_bytes: int = 16_000,
    readme_bytes: int = 4_000,
    max_total_bytes: int = 32_000,
) -> list[ProjectDoc]:
    """Read the workspace's agent docs plus the first README found (as an excerpt), in that order.

    Line endings are normalised to '\\n' so a checkout with CRLF produces the same bytes. Each doc is
    capped at max_doc_bytes (the README at readme_bytes) and all of them at max_total_bytes.
    """
    root = Path(workspace)
    if not root.is_dir():
        raise FileNotFoundError(f"workspace {root} is not a directory")
    found: list[tuple[Path, int]] = []
    for name in names:
        path = _find(root, name)
        if path is not None:
            found.append((path, max_doc_bytes))
    for name in readme_names:
        path = _find(root, name)
        if path is not None:
            found.append((path, readme_bytes))
            break
    docs: list[ProjectDoc] = []
    seen: set[Path] = set()
    budget = max_total_bytes
    for path, cap in found:
        resolved = path.resolve()
        if resolved in seen:  # CLAUDE.md is often a symlink to AGENTS.md
            continue
        seen.add(resolved)
        if budget <= 0:
            break
        raw = path.read_bytes().decode("utf-8", errors="replace").replace("\r\n", "\n")
        text, truncated = _cut(raw.strip("\n"), min(cap, budget))
        if not text.strip():
            continue
        budget -= len(text.encode("utf-8"))
        docs.append(ProjectDoc(path=path.relative_to(root).as_posix(), text=text, truncated=truncated))
    return docs


def render_docs(docs: Sequence[ProjectDoc]) -> str:
    """The docs section text: each doc wrapped in a tag naming its path."""
    parts = []
    for doc in docs:
        attrs = f' path="{doc.path}"' + (' truncated="true"' if doc.truncated else "")
        parts.append(f"<doc{attrs}>\n{doc.text}\n</doc>")
    return "\n\n".join(parts)

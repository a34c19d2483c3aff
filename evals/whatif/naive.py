"""The same requests as a common harness would assemble them: volatile head, no cache marks.

Naive assembly puts the dynamic context (date, cwd, git status, budgets) into the system prompt
and places no cache marks. Its requests carry the same content, but the system section changes
whenever the context does, and with it the chained hash of every section after it. The tool
definitions come first and stay as they were (only their order is unstable across tool-set
changes, which the recording already shows as a change of the tools section).

Two ways the head can vary:
- "context": whenever the recorded request carried a new dynamic-context block (a `tail`
  section), i.e. whenever the context changed: what a harness that renders the current context
  into its system prompt does;
- "request": on every request, as with a timestamp in the system prompt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Literal

from hitrate.evals.whatif.types import SimRequest, in_order

Volatility = Literal["context", "request"]


def _chain(parent: str, *parts: str) -> str:
    h = hashlib.sha256(parent.encode("ascii"))
    for part in parts:
        h.update(part.encode("utf-8"))
    return h.hexdigest()


def naive_requests(requests: Sequence[SimRequest], volatility: Volatility = "context") -> list[SimRequest]:
    """The requests re-keyed as naive assembly would send them (same tokens, no marks)."""
    context: dict[str | None, str] = {}
    out: list[SimRequest] = []
    for request in in_order(requests):
        if volatility == "request":
            volatile = f"{request.id}@{request.started_at.isoformat()}"
        else:
            state = context.get(request.session_id, "")
            for section in request.sections:
                if section.kind == "tail":
                    state = _chain(state or "0" * 64, section.hash)
            context[request.session_id] = state
            volatile = state
        sections = []
        parent = None
        for section in request.sections:
            if section.kind == "tools":
                new_hash = section.hash
            elif parent is None:
                new_hash = _chain("0" * 64, section.hash, volatile)
            else:
                new_hash = _chain(parent, section.hash, volatile if section.kind == "system" else "")
            parent = new_hash
            sections.append(section.model_copy(update={"hash": new_hash, "marks": ()}))
        out.append(request.model_copy(update={"sections": tuple(sections)}))
    return out

"""`hitrate whatif SESSION --policies`: a recorded session replayed under each context policy
(`evals.whatif.policies`), as a table.

The session's messages come from the ledger, as they were first added (before any compaction or
clearing rewrote them); its head (tools, system prompt, project docs) from its workspace as it is
now, since the ledger keeps only the hashes of what was sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hitrate.evals.whatif.policies import PolicyResult, SessionScript, compare_policies, script_from_transcript_entries
from hitrate.harness.session_inputs import session_inputs
from hitrate.harness.transcript_log import KIND_ASSISTANT, KIND_USER, _MESSAGE
from hitrate.store.ledger import Ledger
from hitrate.store.prices import PriceTable

if TYPE_CHECKING:
    from rich.table import Table


def recorded_script(ledger: Ledger, session_id: str) -> SessionScript:
    """The script of a recorded session (ValueError when it has none to replay)."""
    try:
        record = ledger.get_session(session_id)
    except KeyError:
        raise ValueError(f"no session {session_id!r} in {ledger.path} (`hitrate ledger` lists sessions)") from None
    entries = [e for e in ledger.messages(record.id) if e.kind in (KIND_USER, KIND_ASSISTANT)]
    if not entries:
        raise ValueError(f"session {record.id} stored no messages to replay")
    workspace = Path(record.workspace) if record.workspace else None
    if workspace is None or not workspace.is_dir():
        raise ValueError(f"session {record.id}'s workspace {record.workspace} is gone: its tools, system prompt and docs are unknown")
    inputs = session_inputs(workspace)
    messages = [_MESSAGE.validate_json(e.body) for e in entries]
    return script_from_transcript_entries(messages, tools=inputs.tool_specs, system=inputs.system, docs=inputs.docs)


def session_policies(
    ledger: Ledger, session_id: str, targets: list[str], *, window: int | None, threshold: float, table: PriceTable
) -> tuple[int, list[PolicyResult]]:
    """(the window used, every policy on every target) for a recorded session."""
    script = recorded_script(ledger, session_id)
    if window is None:
        known = [m.max_input_tokens for t in targets if (m := table.find(t.partition("/")[2])) and m.max_input_tokens]
        if not known:
            raise ValueError("no context window known for these targets: give --context-window")
        window = min(known)
    return window, compare_policies(script, targets, window=window, threshold=threshold, table=table)


def policy_table(results: list[PolicyResult], window: int) -> "Table":
    from rich import box
    from rich.table import Table

    out = Table(title=f"what-if per context policy ({window:,}-token window)", title_justify="left",
                box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for header, justify in (("policy", "left"), ("target", "left"), ("done", "left"), ("cost", "right"),
                            ("Σ-hit", "right"), ("peak", "right"), ("summ. read", "right")):
        out.add_column(header, justify=justify)  # type: ignore[arg-type]
    for r in results:
        share = "-" if r.summary_read_share is None else f"{r.summary_read_share:.0%}"
        out.add_row(r.policy, r.target, "yes" if r.completed else "NO", f"${r.cost_usd:.4f}", f"{r.hit_ratio:.1%}",
                    f"{r.peak_prompt_tokens:,}", share)
    return out

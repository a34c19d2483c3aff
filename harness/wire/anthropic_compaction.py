"""Anthropic server-side compaction (`compact-2026-01-12` beta) on the Messages wire.

What the API does (anthropic SDK 2.15 `types/beta/beta_compact_20260112_edit_param.py`,
`beta_compaction_block.py`, `beta_compaction_content_block_delta.py`, `beta_iterations_usage.py`;
seen 2026-12-01):

- the request carries `context_management: {"edits": [{"type": "compact_20260112", "trigger":
  {"type": "input_tokens", "value": N}, ...}]}` and the beta header; once the input passes the
  trigger (150,000 tokens by default), the server summarizes the older context first;
- the reply then starts with a `compaction` content block (`content`: the summary, or null when
  the summary failed; `encrypted_content` and `signature`, opaque, to be sent back verbatim),
  streamed as a `content_block_start` and `compaction_delta` events; with
  `pause_after_compaction` the reply stops there with `stop_reason: "compaction"` (not used here:
  the turn goes on in the same call, so the agent loop needs no new stop word);
- later requests send the block back in its assistant turn; the server drops everything before it;
- the compaction's own tokens are in `usage.iterations` (type "compaction"), not in the top-level
  counts: the store adds them into the call's buckets (`store.normalize_anthropic`).

Here a compaction block becomes a `TextBlock` holding the summary as text (what another provider
is sent, should the session switch models) and the block's own JSON as its native form (what
Anthropic is sent back, byte for byte).
"""

from __future__ import annotations

import json
from typing import Any

from hitrate.projection.transcript import NativeBlock, TextBlock

API = "anthropic"
COMPACT_BETA = "compact-2026-01-12"
COMPACT_EDIT = "compact_20260112"
CONTEXT_EDITING_BETA = "context-management-2025-06-27"
CLEAR_TOOL_USES_EDIT = "clear_tool_uses_20250919"
COMPACTION_BLOCK = "compaction"


def clear_tool_uses_edit(trigger_tokens: int, clear_at_least: int, keep: int = 3) -> dict[str, Any]:
    """Context editing (`clear_tool_uses_20250919`, SDK `BetaClearToolUses20250919EditParam`):
    past `trigger_tokens` of input the server replaces old tool results with a placeholder,
    keeping the last `keep` tool uses, and only when at least `clear_at_least` tokens go, so
    that it clears in batches: each clearing changes the prompt after the first cleared result,
    and that suffix is written to the cache again (the same trade as `projection.clearing`)."""
    return {
        "type": CLEAR_TOOL_USES_EDIT,
        "trigger": {"type": "input_tokens", "value": int(trigger_tokens)},
        "keep": {"type": "tool_uses", "value": int(keep)},
        "clear_at_least": {"type": "input_tokens", "value": int(clear_at_least)},
    }


def betas_for(context_management: dict[str, Any]) -> list[str]:
    """The beta flags the request's edits need."""
    kinds = {e.get("type") for e in context_management.get("edits", [])}
    betas = [COMPACT_BETA] if COMPACT_EDIT in kinds else []
    if kinds - {COMPACT_EDIT}:
        betas.append(CONTEXT_EDITING_BETA)
    return betas


def context_management(
    trigger_tokens: int | None, *, instructions: str | None = None, clear_tool_uses: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The request's `context_management` for server-side compaction past `trigger_tokens` of
    input (None: the server's default), after the `clear_tool_uses` edit when one is given."""
    edit: dict[str, Any] = {"type": COMPACT_EDIT}
    if trigger_tokens is not None:
        edit["trigger"] = {"type": "input_tokens", "value": int(trigger_tokens)}
    if instructions:
        edit["instructions"] = instructions
    edit["pause_after_compaction"] = False
    return {"edits": ([clear_tool_uses] if clear_tool_uses else []) + [edit]}


def compaction_block(entry: dict[str, Any]) -> TextBlock:
    """A streamed `compaction` block (its start fields, then the `compaction_delta`s gathered in
    `entry["_compaction"]`, signature deltas in `entry["_signature"]`) as a transcript block."""
    content = entry.get("content")
    encrypted = entry.get("encrypted_content")
    parts: list[str] = [content] if isinstance(content, str) else []
    for delta in entry.get("_compaction", []):
        if isinstance(delta.get("content"), str):
            parts.append(delta["content"])
        if delta.get("encrypted_content") is not None:
            encrypted = delta["encrypted_content"]
    summary = "".join(parts) if parts else None
    signature = "".join(entry.get("_signature", [])) or entry.get("signature")
    block: dict[str, Any] = {"type": COMPACTION_BLOCK, "content": summary}
    if encrypted is not None:
        block["encrypted_content"] = encrypted
    if signature:
        block["signature"] = signature
    if entry.get("tool_changes") is not None:
        block["tool_changes"] = entry["tool_changes"]
    raw = json.dumps(block, ensure_ascii=False, separators=(",", ":"))
    return TextBlock(text=summary or "", native=NativeBlock(api=API, raw=raw))

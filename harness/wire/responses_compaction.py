"""OpenAI Responses server-side compaction on the Responses wire.

What the API does (openai SDK 3.57 `types/responses/response_create_params.py` `ContextManagement`,
`response_compaction_item.py`, `response_compaction_compacting_event.py`; seen 2026-12-01):

- the request carries `context_management: [{"type": "compaction", "compact_threshold": N}]`; once
  the context passes N tokens, the server compacts it while answering (a
  `response.compaction.compacting` event is streamed, with no summary content);
- the output then holds a `compaction` item, `{"type": "compaction", "encrypted_content": ...}`,
  opaque: the next requests send it back in the input in place of what it summarizes, and the
  items before it can be left out.

Requests here are stateless (`store=false`), so the item travels whole and without its id, like
every other item on this wire. As a transcript block it is a `TextBlock` with no text (there is
no readable summary to give another provider) and the item as its native form.
"""

from __future__ import annotations

import json
from typing import Any

from hitrate.projection.transcript import NativeBlock, TextBlock

API = "openai_responses"
COMPACTION_ITEM = "compaction"


def context_management(threshold_tokens: int | None) -> list[dict[str, Any]]:
    """The request's `context_management` for compaction past `threshold_tokens` (None: the
    server's default)."""
    entry: dict[str, Any] = {"type": COMPACTION_ITEM}
    if threshold_tokens is not None:
        entry["compact_threshold"] = int(threshold_tokens)
    return [entry]


def compaction_item_block(item: dict[str, Any]) -> TextBlock:
    """An output `compaction` item as a transcript block (its id dropped: nothing is stored)."""
    kept = {"type": COMPACTION_ITEM, "encrypted_content": item.get("encrypted_content")}
    return TextBlock(text="", native=NativeBlock(api=API, raw=json.dumps(kept, ensure_ascii=False, separators=(",", ":"))))

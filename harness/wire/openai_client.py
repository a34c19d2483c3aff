"""What the two OpenAI wires (Chat Completions and Responses) share as backends: one SDK client,
the render report of the last request, and the calls open now, which `abort` stops."""

from __future__ import annotations

import openai

from hitrate.harness.models import Quirks
from hitrate.harness.wire.effort import Effort
from hitrate.harness.wire.types import InFlight, RenderReport
from hitrate.store.prices import PriceTable


class OpenAIClientBackend:
    """One model behind an OpenAI-SDK endpoint; a wire's backend adds `call`."""

    label_format: str = "{model}"
    """The backend's label when the route gives none (`model`, `base_url` filled in)."""

    def __init__(
        self, *, model: str, api_key: str, base_url: str, quirks: Quirks, label: str | None = None,
        timeout_s: float = 600.0, prices: PriceTable | None = None,
    ) -> None:
        self.model = model
        self.effort: Effort | None = None
        """The reasoning effort every request asks for (None: the model's default)."""
        self.prices = prices or PriceTable.default()
        """Where usage reading learns whether the model bills cache writes (the session's price source)."""
        self.quirks = quirks
        self.base_url = base_url
        self.label = label or self.label_format.format(model=model, base_url=base_url)
        # Retries are ours (hitrate.harness.retry): the SDK's would hide attempts from the ledger.
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s)
        self.last_report: RenderReport | None = None
        self._inflight = InFlight()

    def close(self) -> None:
        self._client.close()

    def abort(self) -> None:
        """Stop the calls open now (another thread's user pressed cancel)."""
        self._inflight.abort()

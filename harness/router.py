"""From a model spec to a ready backend: the adapter for its wire API, its key, its caching rules.

    route = Router().resolve("anthropic/claude-sonnet-5")
    route.backend.call(prompt, max_tokens=...)

Caching rules come from the wire protocol and the model's entry in the price table (minimum
cacheable length, implicit prefix vs explicit breakpoints), never from a substring of the model
name. Errors say what to set: an unknown provider, a missing key, a server that does not answer.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlparse

from hitrate.harness.local_backend import LocalEngineServer
from hitrate.harness.models import ModelSpec, ModelSpecError, parse_model_spec
from hitrate.harness.wire.anthropic import AnthropicBackend
from hitrate.harness.wire.openai_chat import OpenAIChatBackend
from hitrate.harness.wire.openai_responses import OpenAIResponsesBackend
from hitrate.harness.wire.types import Backend
from hitrate.projection.caching import CacheRules, family_of_mechanism
from hitrate.store.prices import PriceTable


class RouteError(ModelSpecError):
    """A backend that cannot be used as configured; the message says what to change."""


@dataclass
class Route:
    """A resolved backend with everything a session needs to talk to it and account for it."""

    spec: ModelSpec
    backend: Backend
    rules: CacheRules
    """Rules the projection plans cache marks with."""
    explain_rules: CacheRules
    """Rules misses are explained with (differs from `rules` only for the local engine)."""
    local: LocalEngineServer | None = None
    _closed: bool = field(default=False, repr=False)

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def model(self) -> str:
        return self.spec.model

    @property
    def backend_name(self) -> str:
        """What the ledger's `backend` column says."""
        return self.spec.provider

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.backend.close()
        if self.local is not None:
            self.local.stop()


def rules_for(spec: ModelSpec, table: PriceTable | None = None) -> tuple[CacheRules, CacheRules]:
    """(planning rules, explanation rules) for a spec."""
    table = table or PriceTable.default()
    entry = table.find(spec.model)
    minimum = entry.min_cacheable_tokens if entry is not None and entry.min_cacheable_tokens else 0
    if spec.wire == "local_engine":
        # The engine's radix cache matches any prefix (explained as "local"), but marks are still
        # planned Anthropic-style and sent as cache_control: the engine pins those prefixes.
        return CacheRules(family="anthropic", min_cacheable_tokens=0), CacheRules(family="local")
    if spec.wire == "anthropic_messages":
        # A model missing from the table (or an Anthropic-compatible gateway) gets marks at any length:
        # a mark below the real minimum costs nothing, it just does not cache.
        rules = CacheRules(family="anthropic", min_cacheable_tokens=minimum)
        return rules, rules
    dialect = spec.quirks.usage_dialect
    if dialect == "openai":
        # GPT-5.6+ has exact-match breakpoints; older models (and unknown ones) the automatic prefix cache.
        family = family_of_mechanism(entry.cache_mechanism) if entry is not None else None
        if family == "openai_breakpoints":
            rules = CacheRules(family="openai_breakpoints", min_cacheable_tokens=minimum)
        else:
            extended = entry is not None and entry.cache_retention == "24h"
            rules = CacheRules(family="openai_implicit", min_cacheable_tokens=minimum or 1024, extended_retention=extended)
        return rules, rules
    if dialect == "deepseek":
        rules = CacheRules(family="deepseek", min_cacheable_tokens=minimum)
        return rules, rules
    if dialect == "gemini_openai":
        rules = CacheRules(family="gemini", min_cacheable_tokens=minimum)
        return rules, rules
    # Self-hosted servers' prefix caches: the layout alone decides.
    rules = CacheRules(family="openai_compat", min_cacheable_tokens=minimum)
    return rules, rules


def check_reachable(base_url: str, *, timeout_s: float = 3.0) -> None:
    """Raise RouteError unless a TCP connection to the URL's host and port opens."""
    parsed = urlparse(base_url)
    host = parsed.hostname
    if not host:
        raise RouteError(f"{base_url!r} has no host")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RouteError(
            f"cannot reach {base_url} ({reason}). For a self-hosted server, check that it is running "
            "and the URL is right; for a cloud API, check the network connection."
        ) from exc


LocalFactory = Callable[[str], LocalEngineServer]


class Router:
    """Resolves specs with keys and base URLs from `env` (default: the process environment)."""

    def __init__(
        self,
        env: dict[str, str] | None = None,
        *,
        preflight: bool = True,
        timeout_s: float = 600.0,
        local_factory: LocalFactory = LocalEngineServer,
        price_table: PriceTable | None = None,
    ) -> None:
        self.env = dict(os.environ) if env is None else dict(env)
        self.preflight = preflight
        self.timeout_s = timeout_s
        self.local_factory = local_factory
        self.price_table = price_table or PriceTable.default()

    def parse(self, spec: str | ModelSpec) -> ModelSpec:
        return spec if isinstance(spec, ModelSpec) else parse_model_spec(spec, self.env)

    def resolve(self, spec: str | ModelSpec) -> Route:
        parsed = self.parse(spec)
        rules, explain = rules_for(parsed, self.price_table)
        if parsed.wire == "local_engine":
            server = self.local_factory(parsed.model)
            url = server.start()
            backend: Backend = AnthropicBackend(
                model=parsed.model, api_key="local", base_url=url, label=parsed.label, timeout_s=self.timeout_s,
                effort_dialect="none",  # the bundled engine's models do not reason on request
            )
            return Route(spec=parsed, backend=backend, rules=rules, explain_rules=explain, local=server)
        key = parsed.api_key(self.env)
        assert parsed.base_url is not None
        if self.preflight:
            check_reachable(parsed.base_url)
        if parsed.wire == "anthropic_messages":
            backend = AnthropicBackend(
                model=parsed.model, api_key=key or "", base_url=parsed.base_url, label=parsed.label, timeout_s=self.timeout_s
            )
        elif parsed.wire == "openai_responses":
            backend = OpenAIResponsesBackend(
                model=parsed.model,
                api_key=key or "",
                base_url=parsed.base_url,
                quirks=parsed.quirks,
                label=parsed.label,
                timeout_s=self.timeout_s,
                prices=self.price_table,
            )
        else:
            # Self-hosted servers usually accept any key; OPENAI_COMPAT_API_KEY is used when one is needed.
            key = key or self.env.get("OPENAI_COMPAT_API_KEY") or "unused"
            backend = OpenAIChatBackend(
                model=parsed.model,
                api_key=key,
                base_url=parsed.base_url,
                quirks=parsed.quirks,
                label=parsed.label,
                timeout_s=self.timeout_s,
                prices=self.price_table,
            )
        return Route(spec=parsed, backend=backend, rules=rules, explain_rules=explain)

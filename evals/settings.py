"""What an eval run is configured with (stored in the run's ledger row, so `--resume` needs nothing
else), and where its backends come from."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from hitrate.harness.local_backend import LocalEngineServer
from hitrate.harness.models import parse_model_spec
from hitrate.harness.router import Route, Router

Layout = Literal["cache-aware", "naive"]
CacheMode = Literal["cold", "warm"]
PolicyName = Literal["model", "replay"]

REPLAY_MAX_OUTPUT_TOKENS = 16
"""Replayed turns ignore what the model answers, so its replies are kept short."""


class EvalSettings(BaseModel):
    """The configuration of one eval run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    suite: str
    """The suite folder (absolute path), or a published benchmark as `kind:/absolute/path`."""
    repos: str | None = None
    """swebench suites: the folder of local clones or mirrors (None: `repos/` beside the JSONL)."""
    model: str
    """The model spec, e.g. anthropic/claude-sonnet-5 or local/<path>."""
    layout: Layout = "cache-aware"
    """cache-aware: the projection; naive: volatile system prompt, unsorted tools, no marks."""
    cache_mode: CacheMode = "cold"
    """cold: a per-run nonce starts every prompt; warm: no nonce (or `nonce`), reusing earlier caches."""
    tries: int = Field(default=1, ge=1, le=2)
    """2: after failing tests, the agent gets their output once and tries again (Aider style)."""
    policy: PolicyName = "model"
    """model: the model decides; replay: a recorded or reference tool-call sequence decides."""
    replay_from: str | None = None
    """With policy replay: the run whose recorded turns to replay; None for the suite's reference
    sequences."""
    task_ids: list[str] | None = None
    """Only these tasks of the suite (None: all)."""
    shard: str | None = None
    """`i/n`: only this shard of the (selected) tasks."""
    nonce: str | None = None
    """The prompt nonce: set for cold runs (from the run id), or for a warm run that reuses an
    earlier cold run's."""
    max_output_tokens: int | None = Field(default=None, ge=1)
    """max_tokens of each call (default: 16 when replaying, else the model's own default budget,
    which leaves room for thinking on models that think by default)."""
    label: str | None = None
    max_steps: int | None = Field(default=None, ge=1)
    """Most model calls per task (and try), over each task's own `max_steps` (None: the task's)."""
    max_wall_s: float | None = Field(default=None, gt=0)
    """Wall-time limit per task in seconds, over each task's own `max_wall_s` (None: the task's)."""
    tool_protocol: Literal["native", "text"] | None = None
    """native function calling, or the text protocol (one shell block per reply); None: the
    model's `tool_protocol` in the config file, else native."""

    @property
    def output_tokens(self) -> int | None:
        """The budget each call asks for; None lets the session pick the model's default."""
        if self.max_output_tokens is not None:
            return self.max_output_tokens
        return REPLAY_MAX_OUTPUT_TOKENS if self.policy == "replay" else None


class RouteSource(Protocol):
    """Hands each task a fresh route (its own client) to the run's backend."""

    def open(self) -> Route: ...

    def close(self) -> None: ...


class _SharedServer:
    """A started engine server lent to many routes: a route's close() must not stop it."""

    def __init__(self, server: LocalEngineServer) -> None:
        self.server = server

    def start(self) -> str:
        return self.server.start()

    def stop(self) -> None:
        """The run stops the server once, at its end."""

    def metrics(self) -> dict[str, float]:
        return self.server.metrics()


class RouterRoutes:
    """Routes from the harness router. A `local/...` model is loaded once and its engine server is
    shared by every task (parallel workers send their requests to the one server)."""

    def __init__(
        self,
        spec: str,
        *,
        env: dict[str, str] | None = None,
        local_factory: Callable[[str], LocalEngineServer] = LocalEngineServer,
        server: LocalEngineServer | None = None,
    ) -> None:
        self.spec = spec
        self._env = env
        self._local_factory = local_factory
        self._server = server
        self._owns_server = server is None
        self._lock = threading.Lock()
        self._router: Router | None = None

    def _get_router(self) -> Router:
        with self._lock:
            if self._router is not None:
                return self._router
            parsed = parse_model_spec(self.spec, self._env)
            if parsed.wire == "local_engine":
                if self._server is None:
                    self._server = self._local_factory(parsed.model)
                self._server.start()
                shared = _SharedServer(self._server)
                self._router = Router(self._env, preflight=False, local_factory=lambda _ref: shared)  # type: ignore[arg-type,return-value]
            else:
                self._router = Router(self._env)
            return self._router

    def open(self) -> Route:
        return self._get_router().resolve(self.spec)

    @property
    def server(self) -> LocalEngineServer | None:
        return self._server

    def close(self) -> None:
        if self._server is not None and self._owns_server:
            self._server.stop()

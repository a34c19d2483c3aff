"""HTTP server: OpenAI- and Anthropic-compatible endpoints over one `Engine`.

Routes: `POST /v1/chat/completions`, `POST /v1/responses` and `POST /v1/completions` (OpenAI), `POST /v1/messages` and
`POST /v1/messages/count_tokens` (Anthropic), `POST /tokenize` and `POST /detokenize` (vLLM's
shapes), `GET /v1/models`, `GET /health`, `GET /metrics`.

Cache salt (tenant isolation of the prefix cache): the `X-Cache-Salt` header, else the body field
`cache_salt` (vLLM's name for it), else none. The OpenAI `user` / `safety_identifier` and Anthropic
`metadata.user_id` fields are deliberately *not* used: they identify end users for abuse
monitoring, and both providers share cache entries across the users of one organisation, so
salting on them would silently cut hit rates for the common "one system prompt, many users" case.

Hostile input: bodies are bounded and checked (`wire.body`), a prompt that cannot fit the window is
refused before it is tokenized, and a non-streamed request whose client disconnects has its
generation stopped (`_unless_disconnected`).

Engine calls never run on the event loop: encoding and non-streamed generation go to worker
threads, streams run in a thread of their own (`ThreadedStream`). The engine batches them.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections import Counter
from dataclasses import replace
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from hitrate.engine.wire import anthropic as wire_anthropic
from hitrate.engine.wire import body as wire_body
from hitrate.engine.wire import completions as wire_completions
from hitrate.engine.wire import openai as wire_openai
from hitrate.engine.wire import responses as wire_responses
from hitrate.engine.api import ContextLengthError, Engine, EngineError, GenerationResult, PrefillStarted
from hitrate.engine import serving
from hitrate.engine.serving import Cancelled, ChatService, PreparedCall, Reply, ThreadedStream

log = logging.getLogger(__name__)

SALT_HEADER = "x-cache-salt"


class ServerStats:
    """Counters the server adds to the engine's own metrics."""

    def __init__(self) -> None:
        self.started = time.time()
        self.requests: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.completion_tokens = 0

    def record(self, reply: Reply) -> None:
        self.record_result(reply.result)

    def record_result(self, result: GenerationResult) -> None:
        self.prompt_tokens += result.prompt_tokens
        self.cached_tokens += result.cached_tokens
        self.completion_tokens += result.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "uptime_s": round(time.time() - self.started, 3),
            "requests": dict(self.requests),
            "errors": dict(self.errors),
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_tokens,
            "completion_tokens": self.completion_tokens,
            # Σ cached / Σ prompt over served requests, never a mean of per-request ratios.
            "prompt_hit_rate": self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0,
        }


def _is_anthropic(path: str) -> bool:
    return path.startswith("/v1/messages")


def _error(path: str, status: int, message: str, *, kind: str = "invalid_request_error",
           param: str | None = None, code: str | None = None) -> JSONResponse:
    if _is_anthropic(path):
        return JSONResponse(wire_anthropic.error_body(message, type_=kind), status_code=status)
    return JSONResponse(wire_openai.error_body(message, type_=kind, param=param, code=code), status_code=status)


def _engine_error(path: str, exc: EngineError) -> JSONResponse:
    if isinstance(exc, wire_body.BodyTooLargeError):
        # Anthropic documents 413 `request_too_large`; OpenAI's shape carries it as the code.
        kind = "request_too_large" if _is_anthropic(path) else "invalid_request_error"
        return _error(path, 413, str(exc), kind=kind, code="request_too_large")
    if isinstance(exc, ContextLengthError):
        return _error(path, 400, str(exc), code="context_length_exceeded")
    return _error(path, 400, str(exc), param=getattr(exc, "param", None))


def create_app(
    engine: Engine,
    *,
    service: ChatService | None = None,
    served_model_names: Sequence[str] | None = None,
    default_max_tokens: int = 4096,
    max_body_bytes: int = wire_body.DEFAULT_MAX_BODY_BYTES,
    tool_grammar: bool = False,
) -> FastAPI:
    """The FastAPI app serving `engine`. `served_model_names`: the names clients may ask for
    (default: the engine's `model_name`); any other model name gets a 404. `max_body_bytes`: larger
    request bodies get a 413 before they are read. `tool_grammar`: hold tool_choice "auto" replies
    to prose or well-formed calls (`ChatService`)."""
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
    service = service or ChatService(engine, default_max_tokens=default_max_tokens, tool_grammar=tool_grammar)
    names = list(dict.fromkeys([*(served_model_names or []), engine.model_name]))
    stats = ServerStats()
    app = FastAPI(title="hitrate engine", docs_url=None, redoc_url=None)
    app.state.service = service
    app.state.stats = stats

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return _error(request.url.path, exc.status_code, str(exc.detail), kind=kind)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        stats.errors["internal"] += 1
        return _error(request.url.path, 500, f"internal error: {type(exc).__name__}: {exc}",
                      kind="api_error" if _is_anthropic(request.url.path) else "server_error")

    async def read_json(request: Request) -> Any:
        raw = await wire_body.read_body(request, max_body_bytes)
        return wire_body.parse_json(raw)

    def check_model(model: str) -> None:
        if model not in names:
            raise _UnknownModel(f"model {model!r} is not served here; available: {', '.join(names)}")

    async def handle(request: Request, api: str, run: Callable[[Any], Any]) -> Response:
        stats.requests[api] += 1
        path = request.url.path
        try:
            return await run(await read_json(request))
        except _ClientGone:
            stats.errors["client_disconnected"] += 1
            # Nobody reads this; nginx's 499 says "client closed request" in the logs.
            return Response(status_code=499)
        except _UnknownModel as exc:
            stats.errors[api] += 1
            return _error(path, 404, str(exc), kind="not_found_error", code="model_not_found")
        except EngineError as exc:
            stats.errors[api] += 1
            return _engine_error(path, exc)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": engine.model_name}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        created = int(stats.started)
        created_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stats.started))
        # One list readable by both SDKs: OpenAI reads object/owned_by, Anthropic type/display_name.
        # `max_model_len` is vLLM's (and SGLang's) name for the window, prompt + output, so clients
        # that read a served window from vLLM read this engine's too.
        data = [
            {"id": n, "object": "model", "type": "model", "created": created, "created_at": created_at,
             "owned_by": "hitrate", "display_name": n, "max_context": engine.max_context,
             "max_model_len": engine.max_context}
            for n in names
        ]
        return {"object": "list", "data": data, "has_more": False, "first_id": names[0], "last_id": names[-1]}

    @app.get("/metrics")
    async def metrics(format: str = "json") -> Response:
        engine_metrics = await _to_thread(engine.metrics)
        payload = {"model": engine.model_name, "engine": engine_metrics, "server": stats.as_dict()}
        if format == "prometheus":
            return PlainTextResponse(_prometheus(payload))
        if format != "json":
            return JSONResponse(
                wire_openai.error_body(f"unknown metrics format {format!r}; use json or prometheus", param="format"),
                status_code=400,
            )
        return JSONResponse(payload)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        async def run(payload: Any) -> Response:
            body, chat_request = wire_openai.parse_request(payload, salt_header=request.headers.get(SALT_HEADER))
            check_model(body.model)
            prepared = await service.prepare_async(chat_request)
            ids = wire_openai.CompletionIds(body.model)
            if body.stream:
                include_usage = bool(body.stream_options and body.stream_options.include_usage)
                return await _stream_response(
                    service, prepared,
                    lambda items, _started: wire_openai.stream_events(
                        ids, items, include_usage, on_reply=stats.record, on_error=_count_error(stats, "openai")),
                )
            reply = await _unless_disconnected(request, lambda cancel: service.complete_async(prepared, cancel))
            stats.record(reply)
            return JSONResponse(wire_openai.completion(ids, reply))

        return await handle(request, "openai", run)

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        async def run(payload: Any) -> Response:
            body, chat_request = wire_anthropic.parse_request(payload, salt_header=request.headers.get(SALT_HEADER))
            check_model(body.model)
            prepared = await service.prepare_async(chat_request)
            message_id = wire_anthropic.new_message_id()
            if body.stream:
                return _with_notices(chat_request.notices, await _stream_response(
                    service, prepared,
                    lambda items, started: wire_anthropic.stream_events(
                        prepared, message_id, body.model, items, started,
                        on_reply=stats.record, on_error=_count_error(stats, "anthropic")),
                ))
            if body.max_tokens == 0:
                reply = await _to_thread(_prewarm, service, prepared)
            else:
                reply = await _unless_disconnected(request, lambda cancel: service.complete_async(prepared, cancel))
            stats.record(reply)
            return _with_notices(chat_request.notices, JSONResponse(
                wire_anthropic.message(message_id, body.model, prepared, reply, prewarm=body.max_tokens == 0)))

        return await handle(request, "anthropic", run)

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        async def run(payload: Any) -> Response:
            body, chat_request = wire_responses.parse_request(payload, salt_header=request.headers.get(SALT_HEADER))
            check_model(body.model)
            prepared = await service.prepare_async(chat_request)
            ids = wire_responses.ResponseIds(body.model)
            if body.stream:
                return await _stream_response(
                    service, prepared,
                    lambda items, _started: wire_responses.stream_events(
                        ids, body, items, on_reply=stats.record, on_error=_count_error(stats, "responses")),
                )
            reply = await _unless_disconnected(request, lambda cancel: service.complete_async(prepared, cancel))
            stats.record(reply)
            return JSONResponse(wire_responses.response(ids, body, reply))

        return await handle(request, "responses", run)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        async def run(payload: Any) -> Response:
            body, generation = wire_completions.parse_completion(
                payload, service.chat, engine.max_context, salt_header=request.headers.get(SALT_HEADER),
                defaults=service.sampling_defaults)
            check_model(body.model)
            ids = wire_completions.CompletionIds(body.model)
            if not body.stream:
                result = await _unless_disconnected(
                    request, lambda cancel: _to_thread(serving.generate, engine, generation, cancel))
                stats.record_result(result)
                return JSONResponse(wire_completions.completion(ids, result))
            stream = ThreadedStream(lambda: engine.stream(generation))
            stream.start()
            iterator = stream.__aiter__()
            await iterator.__anext__()  # PrefillStarted, or the engine's refusal as a plain 4xx
            include_usage = bool(body.stream_options and body.stream_options.include_usage)

            async def events() -> AsyncIterator[str]:
                try:
                    async for event in wire_completions.stream_events(ids, iterator, include_usage,
                                                                      stats.record_result):
                        yield event
                finally:
                    stream.cancel()

            return StreamingResponse(events(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

        return await handle(request, "completions", run)

    @app.post("/tokenize")
    async def tokenize(request: Request) -> Response:
        async def run(payload: Any) -> Response:
            model, body = await _to_thread(wire_completions.tokenize, payload, engine.tokenizer, service.chat,
                                           engine.max_context)
            if model is not None:
                check_model(model)
            return JSONResponse(body)

        return await handle(request, "tokenize", run)

    @app.post("/detokenize")
    async def detokenize(request: Request) -> Response:
        async def run(payload: Any) -> Response:
            model, body = wire_completions.detokenize(payload, engine.tokenizer, len(engine.tokenizer))
            if model is not None:
                check_model(model)
            return JSONResponse(body)

        return await handle(request, "detokenize", run)

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        async def run(payload: Any) -> Response:
            chat_request = wire_anthropic.count_tokens_request(payload)
            service.chat.ensure_can_fit(chat_request.messages, chat_request.tools, engine.max_context)
            ids = await _to_thread(service.chat.encode, chat_request.messages, chat_request.tools)
            return JSONResponse({"input_tokens": len(ids)})

        return await handle(request, "anthropic_count_tokens", run)

    return app


class _UnknownModel(Exception):
    pass


class _ClientGone(Exception):
    """The client disconnected before its reply was ready; its generation was stopped."""


T = TypeVar("T")


async def _unless_disconnected(request: Request, work: Callable[[threading.Event], Awaitable[T]]) -> T:
    """`work(cancel)` while the client stays connected. A client that goes away first (closed its
    socket, timed out) gets its generation stopped at once: `cancel` is set, the engine drops the
    sequence within one token and frees its batch row for the requests still waiting, and
    `_ClientGone` is raised. A stream needs none of this: its writes fail when the client is gone."""
    cancel = threading.Event()
    job = asyncio.ensure_future(work(cancel))
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({job, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the server is shutting down: do not leave the generation running
        cancel.set()
        raise
    finally:
        watcher.cancel()
    if job.done():
        return job.result()
    cancel.set()
    try:
        await job
    except Cancelled:
        pass
    log.info("client disconnected from %s; its generation was stopped", request.url.path)
    raise _ClientGone


async def _disconnected(request: Request) -> None:
    """Returns once the server sees the client's connection close. The body has been read, so the
    next ASGI message is `http.disconnect`."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


NOTICE_HEADER = "hitrate-notice"


def _with_notices(notices: Sequence[str], response: Response) -> Response:
    """Parameters accepted but not honoured (e.g. `thinking` for a model that cannot think), said in
    a response header: neither wire format has a field for warnings."""
    if notices:
        response.headers[NOTICE_HEADER] = "; ".join(notices)
    return response


def _count_error(stats: ServerStats, api: str) -> Callable[[], None]:
    def count() -> None:
        stats.errors[api] += 1

    return count


async def _to_thread(fn, *args):
    return await asyncio.to_thread(fn, *args)


def _prewarm(service: ChatService, prepared: PreparedCall) -> Reply:
    """Anthropic `max_tokens: 0`: prefill (writing the cache) and return no content.

    The engine always samples at least one token, so one is generated and discarded; usage
    reports 0 output tokens because nothing is returned.
    """
    params = replace(prepared.generation.params, max_tokens=1, stop=())
    result = service.engine.generate(replace(prepared.generation, params=params))
    empty = GenerationResult(token_ids=[], text="", finish_reason="length", prompt_tokens=result.prompt_tokens,
                             cached_tokens=result.cached_tokens, completion_tokens=0, ttft_s=result.ttft_s,
                             total_s=result.total_s)
    return Reply(content="", tool_calls=[], finish="length", stop_sequence=None, result=empty, invalid_tool_calls=[])


async def _stream_response(service: ChatService, prepared: PreparedCall,
                           events: Callable[[AsyncIterator, PrefillStarted | None], AsyncIterator[str]]) -> Response:
    """Starts the engine stream and waits for its first item, so that a request the engine refuses
    (e.g. too long) still gets a plain 4xx JSON error instead of a broken event stream.

    That first item is the engine's `PrefillStarted`: the prompt's exact cached / computed split,
    matched under the engine lock for this very request (so concurrent requests cannot blur it),
    and `events` gets it for formats that report usage up front (Anthropic `message_start`). An
    engine that does not announce it gets `None` there, and the split arrives with the `Reply`.
    """
    stream = service.stream_async(prepared)
    stream.start()
    iterator = stream.__aiter__()
    try:
        first = await iterator.__anext__()
    except StopAsyncIteration:
        raise EngineError("the engine produced nothing for this request") from None
    started: PrefillStarted | None = None
    if isinstance(first, PrefillStarted):
        started = first
    elif isinstance(first, Reply):
        started = PrefillStarted(prompt_tokens=first.prompt_tokens, cached_tokens=first.cached_tokens)

    async def items() -> AsyncIterator:
        if not isinstance(first, PrefillStarted):
            yield first
        async for item in iterator:
            yield item

    async def body() -> AsyncIterator[str]:
        try:
            async for event in events(items(), started):
                yield event
        finally:
            stream.cancel()  # the client went away or the stream ended: let the engine stop

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _prometheus(payload: dict[str, Any]) -> str:
    lines = []
    for section in ("engine", "server"):
        for key, value in payload[section].items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            lines.append(f"hitrate_{section}_{key} {value}")
    return "\n".join(lines) + "\n"


def serve(
    engine: Engine,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    served_model_names: Sequence[str] | None = None,
    default_max_tokens: int = 4096,
    max_body_bytes: int = wire_body.DEFAULT_MAX_BODY_BYTES,
    log_level: str = "info",
    sock: socket.socket | None = None,
) -> None:
    """Run the server in the foreground until interrupted. `sock`: an already bound listening
    socket to serve on (so a caller can claim the port before the slow model load)."""
    import uvicorn

    from hitrate.engine.connection_limits import guarded_protocol

    app = create_app(engine, served_model_names=served_model_names, default_max_tokens=default_max_tokens,
                     max_body_bytes=max_body_bytes)
    # Silent, trickling and idle connections are closed, and open ones capped (connection_limits).
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, http=guarded_protocol(), timeout_keep_alive=5)
    server = uvicorn.Server(config)
    server.run(sockets=[sock] if sock is not None else None)

"""Format-independent chat serving: a wire-neutral request -> prompt ids -> engine -> parsed reply.

Both HTTP front ends (OpenAI and Anthropic wire formats) and in-process callers go through
`ChatService`: it encodes the conversation with `ChatFormat` (so each turn extends the previous
one's tokens), turns every cache-control mark into an eviction pin with the mark's own TTL, calls
the engine, parses tool calls out of the generated text and remembers the reply's exact token ids
for the next turn.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, AsyncIterator, Iterator, Literal, Sequence

from pydantic import Field, ValidationError

from hitrate.engine.api import (
    ContextLengthError,
    Engine,
    EngineError,
    GenerationRequest,
    GenerationResult,
    PrefillStarted,
    SamplingParams,
)
from hitrate.engine import constraints, sampling_defaults
from hitrate.engine.chat import ChatFormat, ChatMessage
from hitrate.engine.toolcalls import ParsedReply, ToolCall, ToolCallStreamSplitter, parse_tool_calls


class RequestError(EngineError):
    """A request the wire layer rejects (HTTP 400), with the offending parameter when known."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


# A sampling seed as the wire formats accept it. torch's generators take 64-bit seeds and fail on
# anything larger ("Overflow when unpacking long long"); vLLM bounds `seed` to int64 the same way.
Seed = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]

# Stop strings as the wire formats accept them. Each one is searched for after every generated
# token, inside the decode step that all running requests share: 60 000 of 40 characters slowed
# every request in the batch to 230 ms a token (40x). OpenAI documents at most 4 for chat.
MAX_STOP_SEQUENCES = 32
MAX_STOP_CHARS = 1000
StopText = Annotated[str, Field(max_length=MAX_STOP_CHARS)]
StopList = Annotated[list[StopText], Field(max_length=MAX_STOP_SEQUENCES)]

# top_k and min_p as vLLM accepts them (OpenAI's wires have neither: clients send them as extra body
# fields). A top_k of -1 or 0 means no top-k cut.
TopK = Annotated[int, Field(ge=-1)]
MinP = Annotated[float, Field(ge=0.0, le=1.0)]


def top_k_value(top_k: int | None) -> int | None:
    return None if top_k is None else max(top_k, 0)


def validation_message(exc: ValidationError) -> str:
    """A pydantic error as one readable line: `messages.0.role: Input should be ...; ...`."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"]) or "body"
        parts.append(f"{loc}: {err['msg']}")
    more = len(exc.errors()) - 5
    return "invalid request: " + "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


@dataclass
class MarkedPrefix:
    """A cache-control mark: the conversation cut just after the marked block, and its TTL."""

    messages: list[ChatMessage]
    tools: list[dict[str, Any]]
    ttl_s: float


@dataclass(frozen=True)
class ForcedToolCall:
    """The reply must be one tool call (OpenAI tool_choice "required" / named, Anthropic any / tool)."""

    name: str | None = None  # None: any of the offered tools


@dataclass
class ChatRequest:
    """One chat call in wire-neutral form. `tools` use the OpenAI function schema (HF templates' input)."""

    messages: list[ChatMessage]
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int | None = None  # None: the server default, capped by the room left in the context
    # Sampling; None: the model's default (`ChatService.sampling_defaults`).
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    salt: str = ""
    parse_tool_calls: bool = True  # False for tool_choice "none": call markup stays plain text
    template_kwargs: dict[str, Any] | None = None
    marks: list[MarkedPrefix] = field(default_factory=list)
    pin_whole_prompt_ttl_s: float | None = None  # Anthropic's top-level (automatic) cache_control
    call_id_prefix: str = "call_"  # ids for parsed tool calls: OpenAI "call_...", Anthropic "toolu_..."
    grammar: str | None = None  # llguidance grammar the reply must follow (`hitrate.engine.constraints`)
    forced_tool: ForcedToolCall | None = None
    notices: tuple[str, ...] = ()  # request parameters accepted but not honoured, said back to the client

    @property
    def tool_names(self) -> list[str]:
        return [t.get("function", {}).get("name", "") for t in self.tools]

    @property
    def is_prefill(self) -> bool:
        return bool(self.messages) and self.messages[-1].role == "assistant"


@dataclass
class PreparedCall:
    request: ChatRequest
    generation: GenerationRequest

    @property
    def prompt_tokens(self) -> int:
        return len(self.generation.prompt_ids)

    @property
    def pin_ttl_by_tokens(self) -> dict[int, float]:
        """Every mark: prefix length -> TTL in seconds (what the engine pins)."""
        return dict(self.generation.pins)


@dataclass
class Reply:
    """The finished assistant turn, ready to be written in either wire format."""

    content: str
    tool_calls: list[ToolCall]
    finish: Literal["stop", "length", "tool_calls"]
    stop_sequence: str | None
    result: GenerationResult
    invalid_tool_calls: list[str]

    @property
    def prompt_tokens(self) -> int:
        return self.result.prompt_tokens

    @property
    def cached_tokens(self) -> int:
        return self.result.cached_tokens


class Cancelled(Exception):
    """The caller gave up on a generation (its client disconnected) and the engine let it go."""


def generate(engine: Engine, generation: GenerationRequest, cancel: threading.Event | None = None) -> GenerationResult:
    """`engine.generate`, except that setting `cancel` stops the sequence within one token and
    frees its place in the batch (what was computed stays cached); then `Cancelled` is raised."""
    if cancel is None:
        return engine.generate(generation)
    stream = engine.stream(generation)
    try:
        for item in stream:
            if isinstance(item, GenerationResult):
                return item
            if cancel.is_set():
                raise Cancelled("the request was cancelled")
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # closing the engine's generator cancels its sequence
    raise EngineError("the engine stream ended without a result")


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class ChatService:
    """Chat on top of an `Engine`. Thread-safe; the engine batches concurrent generations."""

    def __init__(self, engine: Engine, chat: ChatFormat | None = None, *, default_max_tokens: int = 4096,
                 cap_max_tokens: bool = False, sampling: sampling_defaults.SamplingDefaults | None = None,
                 tool_grammar: bool = False) -> None:
        """`cap_max_tokens`: a requested max_tokens larger than the room left in the context window
        is lowered to that room instead of refused. For a client that cannot count the prompt's
        tokens itself (it only sets a ceiling on the reply), as the harness's local backend.
        `sampling`: what a request that names no temperature / top_p / top_k / min_p gets
        (default: the model's generation config, `sampling_defaults.for_engine`).
        `tool_grammar`: under tool_choice "auto", hold replies to prose or well-formed calls
        (`constraints.auto_tool_grammar`)."""
        self.engine = engine
        self.chat = chat or ChatFormat(engine.tokenizer)
        self.default_max_tokens = default_max_tokens
        self.cap_max_tokens = cap_max_tokens
        self.sampling_defaults = sampling or sampling_defaults.for_engine(engine)
        self.tool_grammar = tool_grammar

    # ----------------------------------------------------------------- request -> prompt

    def prepare(self, request: ChatRequest) -> PreparedCall:
        """Encode the prompt, size max_tokens, compute the pins. Raises EngineError on bad input."""
        self.chat.ensure_can_fit(request.messages, request.tools, self.engine.max_context)
        ids = self.chat.encode(request.messages, request.tools, salt=request.salt,
                               template_kwargs=request.template_kwargs)
        room = self.engine.max_context - len(ids)
        if room <= 0:
            raise ContextLengthError(
                f"prompt is too long: {len(ids)} tokens, but the model's context window is "
                f"{self.engine.max_context} tokens (no room left to generate)"
            )
        if request.max_tokens is None:
            max_tokens = min(self.default_max_tokens, room)
        elif request.max_tokens > room and self.cap_max_tokens:
            max_tokens = room
        elif request.max_tokens > room:
            raise ContextLengthError(
                f"prompt ({len(ids)} tokens) plus max_tokens ({request.max_tokens}) exceeds the model's "
                f"context window of {self.engine.max_context} tokens; lower max_tokens to at most {room} "
                "or shorten the conversation"
            )
        else:
            max_tokens = request.max_tokens
        pins = self._pins(request, ids)
        grammar = request.grammar
        if request.forced_tool is not None:
            try:
                grammar = constraints.tool_call_grammar(request.tools, request.forced_tool.name, self.engine.tokenizer)
            except (EngineError, ValueError) as exc:
                raise RequestError(f"tool_choice: {exc}", param="tool_choice") from exc
        elif grammar is None and self.tool_grammar and request.tools and request.parse_tool_calls:
            grammar, notice = self._auto_tool_grammar(request.tools)
            if notice:
                request = replace(request, notices=request.notices + (notice,))
        defaults = self.sampling_defaults
        params = SamplingParams(
            max_tokens=max_tokens,
            temperature=defaults.temperature if request.temperature is None else request.temperature,
            top_p=defaults.top_p if request.top_p is None else request.top_p,
            top_k=defaults.top_k if request.top_k is None else request.top_k,
            min_p=defaults.min_p if request.min_p is None else request.min_p,
            stop=tuple(dict.fromkeys(request.stop + self.chat.stop_strings)),
            seed=request.seed,
        )
        generation = GenerationRequest(prompt_ids=ids, params=params, salt=request.salt,
                                       pins=tuple(sorted(pins.items())), grammar=grammar)
        return PreparedCall(request=request, generation=generation)

    def _auto_tool_grammar(self, tools: list[dict[str, Any]]) -> tuple[str | None, str | None]:
        """The grammar for calls under tool_choice "auto", or (None, why) when a tool's schema
        uses something llguidance cannot enforce: the request then runs unconstrained."""
        try:
            grammar = constraints.auto_tool_grammar(tools, self.engine.tokenizer)
            error = constraints.grammar_error(grammar)
        except (EngineError, ValueError) as exc:
            error = str(exc)
        if error:
            return None, "tool grammar off for this request: " + error.splitlines()[0]
        return grammar, None

    def _pins(self, request: ChatRequest, ids: list[int]) -> dict[int, float]:
        """Prefix length (tokens) covered by each cache-control mark -> its TTL in seconds.

        A mark's prefix is measured as the tokens the full prompt shares with the conversation cut
        just after the marked block, so it is exact whatever the template does around the cut.
        """
        pins: dict[int, float] = {}
        if request.pin_whole_prompt_ttl_s:
            pins[len(ids)] = request.pin_whole_prompt_ttl_s
        for mark in request.marks:
            if not mark.messages:
                continue
            try:
                cut = self.chat.encode(mark.messages, mark.tools, salt=request.salt,
                                       template_kwargs=request.template_kwargs, add_generation_prompt=False)
            except EngineError:
                continue  # a template that cannot render the cut alone: the mark pins nothing
            n = common_prefix_length(ids, cut)
            if n:
                pins[n] = max(pins.get(n, 0.0), mark.ttl_s)
        return pins

    # ----------------------------------------------------------------- generation

    def run(self, request: ChatRequest) -> Reply:
        """Prepare and complete in one blocking call (in-process use)."""
        return self.complete(self.prepare(request))

    def complete(self, prepared: PreparedCall, cancel: threading.Event | None = None) -> Reply:
        """Generate the whole reply (blocking). Setting `cancel` stops it early (`Cancelled`)."""
        result = generate(self.engine, prepared.generation, cancel)
        parsed = self._parse(prepared, result.text)
        return self._finish(prepared, result, parsed.content, parsed)

    def stream(self, prepared: PreparedCall) -> Iterator[PrefillStarted | str | Reply]:
        """Generate with streaming (blocking iterator): the engine's `PrefillStarted` (the prompt's
        cached / computed split, before any compute), one text delta per generated token, then the
        `Reply`. A delta is empty while text is held back because a tool call may be starting (the
        call arrives parsed in the Reply), or while a multi-byte character is incomplete.

        Close the iterator if you stop early: that stops the engine and frees it for the next request.
        """
        request = prepared.request
        parse = bool(request.tools) and request.parse_tool_calls
        splitter = ToolCallStreamSplitter(request.tool_names)
        sent: list[str] = []
        result: GenerationResult | None = None
        engine_stream = self.engine.stream(prepared.generation)
        try:
            for item in engine_stream:
                if isinstance(item, GenerationResult):
                    result = item
                    continue
                if isinstance(item, PrefillStarted):
                    yield item
                    continue
                text = splitter.feed(item.text) if parse else item.text
                sent.append(text)
                yield text
        finally:
            close = getattr(engine_stream, "close", None)
            if close is not None:
                close()
        if result is None:
            raise EngineError("the engine stream ended without a result")
        tail = splitter.finish() if parse else ParsedReply(content="")
        if tail.content:
            sent.append(tail.content)
            yield tail.content
        yield self._finish(prepared, result, "".join(sent), tail)

    def _parse(self, prepared: PreparedCall, text: str) -> ParsedReply:
        request = prepared.request
        if request.tools and request.parse_tool_calls:
            return parse_tool_calls(text, request.tool_names)
        return ParsedReply(content=text)  # as generated, exactly what a stream would have sent

    def _finish(self, prepared: PreparedCall, result: GenerationResult, content: str, parsed: ParsedReply) -> Reply:
        calls = [replace(c, id=c.id or new_call_id(prepared.request.call_id_prefix)) for c in parsed.tool_calls]
        if not prepared.request.is_prefill:
            # Remember the exact ids, keyed by what the client will echo back, so the next turn's
            # prompt contains this reply token for token (and hits the cache through it).
            self.chat.remember_reply(salt=prepared.request.salt, content=content, tool_calls=calls,
                                     token_ids=result.token_ids)
        finish: Literal["stop", "length", "tool_calls"] = result.finish_reason
        if calls and finish == "stop":
            finish = "tool_calls"
        return Reply(content=content, tool_calls=calls, finish=finish,
                     stop_sequence=self._matched_stop(prepared, result), result=result,
                     invalid_tool_calls=list(parsed.invalid))

    def _matched_stop(self, prepared: PreparedCall, result: GenerationResult) -> str | None:
        """Which stop string ended generation, if one did (the engine cuts it from `text`)."""
        stops = prepared.generation.params.stop
        if result.finish_reason != "stop" or not stops:
            return None
        full = self.engine.tokenizer.decode(result.token_ids, skip_special_tokens=True)
        rest = full[len(result.text):] if full.startswith(result.text) else full
        for stop in stops:
            if rest.startswith(stop):
                return None if stop in self.chat.stop_strings else stop
        return None

    # ----------------------------------------------------------------- async helpers

    async def prepare_async(self, request: ChatRequest) -> PreparedCall:
        return await asyncio.to_thread(self.prepare, request)

    async def complete_async(self, prepared: PreparedCall, cancel: threading.Event | None = None) -> Reply:
        return await asyncio.to_thread(self.complete, prepared, cancel)

    def stream_async(self, prepared: PreparedCall) -> "ThreadedStream":
        """`stream` run in a worker thread; iterate it with `async for` (call `start()` first to
        begin generating before iterating)."""
        return ThreadedStream(lambda: self.stream(prepared))


_DONE = object()


class ThreadedStream:
    """Runs a blocking generator in a worker thread and hands its items to the event loop.

    The event loop never blocks on the engine. If the consumer stops early (client disconnect),
    `cancel` tells the worker to close the generator after its next item, so the engine stops
    and releases whatever it holds.
    """

    def __init__(self, factory) -> None:
        self._factory = factory
        self._queue: asyncio.Queue = asyncio.Queue()
        self._cancelled = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(self._queue.put_nowait, item)
            except RuntimeError:  # the event loop is gone (server shutting down): stop producing
                self._cancelled.set()

        def work() -> None:
            generator = None
            try:
                generator = self._factory()
                for item in generator:
                    put(item)
                    if self._cancelled.is_set():
                        break
            except BaseException as exc:  # delivered to the consumer, which maps it to an error
                put(exc)
            finally:
                if generator is not None and hasattr(generator, "close"):
                    generator.close()
                put(_DONE)

        self._thread = threading.Thread(target=work, name="engine-stream", daemon=True)
        self._thread.start()

    async def __aiter__(self) -> AsyncIterator[Any]:
        if self._thread is None:
            self.start()
        while True:
            item = await self._queue.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def cancel(self) -> None:
        self._cancelled.set()


def new_call_id(prefix: str = "call_") -> str:
    return prefix + uuid.uuid4().hex[:24]

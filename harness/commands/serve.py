"""`hitrate serve MODEL`: the bundled engine behind OpenAI- and Anthropic-compatible HTTP endpoints."""

from __future__ import annotations

import socket
from typing import Optional

import typer

from hitrate.harness.cli import add_command, require_extra


DTYPE_HELP = (
    "Weights and K/V cache: float32 (the default on CPU; exact), bfloat16 (the default on GPUs; on a CPU with "
    "AMX or AVX-512-BF16 about 1.4-1.6x float32's decode speed; logits move from float32's by 1.5-3% of "
    "their range, and the top token differs at 3-7% of positions), float16 (GPUs; slow on most CPUs). "
    "A .gguf file: gguf (the default on CPU) keeps its quantized matrices as shipped, multiplied in their "
    "blocks (float32 activations and K/V); float32 or bfloat16 dequantizes them on load. "
    "`hitrate engine verify --dtype` prints the difference on a model."
)


THREADS_HELP = (
    "CPU threads for the engine's work (default: the CPUs other processes leave free, looked at again for "
    "each burst of requests; one core kept busy by another process takes it out)."
)
NO_TUNE_HELP = (
    "Skip timing decode-step weight layouts at load: every batch size runs on the default layout. A timed "
    "choice is cached, so only a first start pays for it."
)
COPY_BUDGET_HELP = (
    "MiB of weight copies in other layouts that decode steps may run on (the engine's default: 2048); the "
    "load keeps the fastest per batch size. 0: steps run on the weights as stored."
)


def engine_options(threads: Optional[int], no_tune: bool, copy_budget: Optional[int]) -> dict:
    """from_pretrained's arguments for --threads, --no-tune and --copy-budget (MiB)."""
    options: dict = {"threads": threads, "tune": not no_tune}
    if copy_budget is not None:
        options["batch_pack_bytes"] = copy_budget * 2**20
    return options


def register(app: typer.Typer) -> None:
    add_command(app, "serve", serve_command)
    engine_app = typer.Typer(help="The bundled local engine.", no_args_is_help=True)
    add_command(engine_app, "verify", verify_command)
    app.add_typer(engine_app, name="engine")


def verify_command(
    model: str = typer.Argument(..., help="A local model folder, a .gguf file, or a Hugging Face hub id."),
    prompt: Optional[str] = typer.Option(None, help="Text to verify on (default: a built-in agent prompt)."),
    device: Optional[str] = typer.Option(None, help="cuda, cpu, mps (default: best available)."),
    dtype: Optional[str] = typer.Option(None, help=DTYPE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    local_files_only: bool = typer.Option(False, help="Never contact the hub; load from the local cache only."),
    threads: Optional[int] = typer.Option(None, min=1, help=THREADS_HELP),
    no_tune: bool = typer.Option(False, "--no-tune", help=NO_TUNE_HELP),
    copy_budget: Optional[int] = typer.Option(None, min=0, help=COPY_BUDGET_HELP),
    pool_tokens: int = typer.Option(1 << 14, min=1, help="Prefix-cache capacity in tokens."),
    max_batch: int = typer.Option(8, min=1, help="Requests decoded together; the decode steps are tuned up to it."),
) -> None:
    """Measure the prefix cache on MODEL: for a prompt and a variant edited in the middle, the
    cached-vs-recompute logit difference, K/V groups, the QK products the cache saved, and K/V bytes
    per token (accounted vs theoretical); with a --dtype other than float32, also the logit
    difference from float32 on the prompt (for a .gguf kept quantized as shipped, against its
    weights dequantized to float32)."""
    require_extra("local", "hitrate engine verify")
    import json
    import sys

    import torch

    from hitrate.engine.api import EngineError
    from hitrate.engine.gguf_load.model import quantized
    from hitrate.engine.load_progress import LoadProgress
    from hitrate.engine.runner import TransformersEngine
    from hitrate.engine.verify import DEFAULT_PROMPT, verify

    try:
        engine = TransformersEngine.from_pretrained(model, device=device, dtype=dtype, pool_tokens=pool_tokens,
                                                    max_batch=max_batch, local_files_only=local_files_only,
                                                    progress=LoadProgress(sys.stderr),
                                                    **engine_options(threads, no_tune, copy_budget))
        reference = None
        if engine.layout.shape.dtype != torch.float32 or quantized(engine.model):  # against float32 weights
            # Only its plain forward is used: no packed copies, fast step or batch rows to prepare.
            reference = TransformersEngine.from_pretrained(model, device=device, dtype="float32", pool_tokens=1 << 10,
                                                           local_files_only=local_files_only, max_batch=1,
                                                           pack_min_bytes=None, fast_decode=False)
        report = verify(engine, prompt or DEFAULT_PROMPT, reference=reference)
    except (EngineError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(report.as_dict(), indent=2) if as_json else "\n".join(report.lines()))


def serve_command(
    model: str = typer.Argument(..., help="A local model folder, a .gguf file, or a Hugging Face hub id."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port to listen on."),
    pool_tokens: Optional[int] = typer.Option(
        None, help="Prefix-cache capacity in tokens (default: 40% of free GPU memory, or 1 GiB on CPU)."
    ),
    page_size: int = typer.Option(1, help="Tokens per KV page; 1 caches at token granularity."),
    host_tier_tokens: int = typer.Option(0, help="Host-memory tier for evicted pages, in tokens (0: off)."),
    max_batch: int = typer.Option(8, min=1, help="Requests decoded together (continuous batching); more wait."),
    device: Optional[str] = typer.Option(None, help="cuda, cuda:1, cpu, mps (default: best available)."),
    dtype: Optional[str] = typer.Option(None, help=DTYPE_HELP),
    served_model_name: list[str] = typer.Option(
        [], "--served-model-name", help="Name clients use for the model (repeatable)."
    ),
    default_max_tokens: int = typer.Option(4096, help="max_tokens for OpenAI requests that set none."),
    max_body_mb: float = typer.Option(4.0, min=0.001, help="Largest request body accepted, in MiB (larger: 413)."),
    local_files_only: bool = typer.Option(False, help="Never contact the hub; load from the local cache only."),
    trust_remote_code: bool = typer.Option(False, help="Allow model code shipped with the checkpoint."),
    log_level: str = typer.Option("info", help="uvicorn log level."),
    threads: Optional[int] = typer.Option(None, min=1, help=THREADS_HELP),
    no_tune: bool = typer.Option(False, "--no-tune", help=NO_TUNE_HELP),
    copy_budget: Optional[int] = typer.Option(None, min=0, help=COPY_BUDGET_HELP),
    tool_grammar: str = typer.Option(
        "auto", help="auto: hold tool_choice \"auto\" replies to prose or calls whose arguments fit their tool's "
        "schema (llguidance; Qwen2.5-Coder-0.5B: 65% valid calls on agent prompts against 10% without); "
        "off: unconstrained."),
) -> None:
    """Serve MODEL with an exact prefix cache and continuous batching: /v1/chat/completions,
    /v1/responses, /v1/completions, /v1/messages, /tokenize, /detokenize, /metrics."""
    require_extra("local", "hitrate serve")
    import sys

    from hitrate.engine.api import EngineError
    from hitrate.engine.load_progress import LoadProgress
    from hitrate.engine.runner import TransformersEngine
    from hitrate.engine.server import create_app
    from hitrate.engine.server_loading import LoadingServer

    if page_size < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--page-size")
    if tool_grammar not in ("auto", "off"):
        raise typer.BadParameter("must be auto or off", param_hint="--tool-grammar")
    # Claim the port before loading the model: a port in use fails in a second, not after a load
    # of minutes. It answers from then on: /health says 503 "loading" until the model is ready.
    listener = bind_listener(host, port)
    progress = LoadProgress(sys.stderr)

    def load() -> TransformersEngine:
        return TransformersEngine.from_pretrained(
            model,
            device=device,
            dtype=dtype,
            pool_tokens=pool_tokens,
            page_size=page_size,
            host_tier_tokens=host_tier_tokens,
            max_batch=max_batch,
            model_name=served_model_name[0] if served_model_name else None,
            local_files_only=local_files_only,
            trust_remote_code=trust_remote_code,
            verbose=log_level in ("debug", "trace"),
            progress=progress,
            **engine_options(threads, no_tune, copy_budget),
        )

    def app(engine: TransformersEngine):
        return create_app(engine, served_model_names=served_model_name or None, default_max_tokens=default_max_tokens,
                          max_body_bytes=int(max_body_mb * 1024 * 1024), tool_grammar=tool_grammar == "auto")

    def ready(engine: TransformersEngine) -> None:
        names = ", ".join(dict.fromkeys([*served_model_name, engine.model_name]))
        typer.echo(
            f"serving {names} on http://{host}:{port}  (OpenAI: /v1/chat/completions /v1/responses /v1/completions, "
            f"Anthropic: /v1/messages, "
            f"metrics: /metrics; context {engine.max_context} tokens, "
            f"cache {engine.metrics()['pool_tokens_total']:.0f} tokens)"
        )

    typer.echo(f"loading {model}; http://{host}:{port}/health answers 503 until it is ready", err=True)
    try:
        LoadingServer(load, app, sock=listener, progress=progress, on_ready=ready, log_level=log_level).run()
    except EngineError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    finally:
        listener.close()


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port; exits with a usage error when it cannot be had."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        typer.echo(f"error: cannot listen on {host}:{port}: {exc.strerror}", err=True)
        raise typer.Exit(2) from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    # As uvicorn does: a restarted server may reuse a port whose old connections linger.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        typer.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from exc
    sock.set_inheritable(True)
    return sock

"""Tool-call validity of a real model under tool_choice "auto", with and without the tool grammar.

The agent prompts of `capture_tool_replies` (the harness's system prompt and tools, tasks of the
basic suite, a few later turns) go through the bundled engine's `ChatService` twice with the
same seeds: once unconstrained, once with `constraints.auto_tool_grammar`. A reply counts as a
valid call when `parse_tool_calls` finds at least one call to a declared tool and every call's
arguments validate against that tool's JSON schema.

    python benchmarks/toolcall_validity.py --model /work/models/qwen2.5-coder-0.5b-instruct.gguf --seeds 1 2

Sampling: the model's defaults (`sampling_defaults.for_engine`) unless --temperature is given.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from capture_tool_replies import scenarios  # noqa: E402


def classify(text: str, tools: list[dict[str, Any]]) -> str:
    """valid | invalid-args | undeclared-or-unparsed | prose."""
    import jsonschema

    from hitrate.engine.toolcalls import parse_tool_calls

    names = [t["function"]["name"] for t in tools]
    parsed = parse_tool_calls(text, names)
    if parsed.tool_calls:
        schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
        for call in parsed.tool_calls:
            try:
                jsonschema.validate(call.arguments, schemas[call.name])
            except jsonschema.ValidationError:
                return "invalid-args"
        return "valid"
    stripped = text.strip()
    if parsed.invalid or '"name"' in stripped and ("{" in stripped[:200]):
        return "undeclared-or-unparsed"
    return "prose"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--out", type=Path, default=None, help="write every reply here (JSON)")
    args = parser.parse_args()

    from hitrate.engine.chat import ChatMessage
    from hitrate.engine.runner import TransformersEngine
    from hitrate.engine.serving import ChatRequest, ChatService
    from hitrate.engine.toolcalls import ToolCall

    started = time.monotonic()
    engine = TransformersEngine.from_pretrained(args.model, pool_tokens=1 << 15)
    print(f"loaded in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    services = {"off": ChatService(engine), "grammar": ChatService(engine, tool_grammar=True)}
    print(f"sampling defaults: {services['off'].sampling_defaults}", file=sys.stderr, flush=True)
    rows = []
    for scenario in scenarios():
        messages = []
        for m in scenario["messages"]:
            calls = tuple(ToolCall(c["function"]["name"], c["function"]["arguments"], c["id"])
                          for c in m.get("tool_calls") or [])
            messages.append(ChatMessage(role=m["role"], content=m.get("content") or "", tool_calls=calls,
                                        tool_call_id=m.get("tool_call_id")))
        for seed in args.seeds:
            for condition, service in services.items():
                t0 = time.monotonic()
                reply = service.run(ChatRequest(messages=messages, tools=scenario["tool_specs"], seed=seed,
                                                max_tokens=args.max_tokens, temperature=args.temperature))
                text = reply.result.text
                kind = classify(text, scenario["tool_specs"])
                rows.append({"scenario": scenario["label"], "seed": seed, "condition": condition, "kind": kind,
                             "text": text, "seconds": round(time.monotonic() - t0, 1)})
                print(f"{scenario['label']:30} seed {seed} {condition:8} {kind:24} {time.monotonic() - t0:5.1f}s "
                      f"{text[:80]!r}", file=sys.stderr, flush=True)
                if args.out:
                    args.out.write_text(json.dumps(rows, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print()
    for condition in services:
        mine = [r for r in rows if r["condition"] == condition]
        counts = {k: sum(r["kind"] == k for r in mine) for k in ("valid", "invalid-args", "undeclared-or-unparsed", "prose")}
        print(f"{condition:8} valid calls {counts['valid']}/{len(mine)} ({counts['valid'] / len(mine):.0%})  " +
              "  ".join(f"{k} {v}" for k, v in counts.items() if k != "valid"))


if __name__ == "__main__":
    main()

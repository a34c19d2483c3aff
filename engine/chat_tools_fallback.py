"""Tools for a chat template that cannot show them: Hermes markup in ordinary turns.

Many templates (Gemma 3's, for one) ignore the `tools` variable, so a request's tools would
silently vanish from the prompt. For those, the tools are described in the system turn in the
Hermes format (the one `toolcalls` parses out of the reply), earlier calls are written into the
assistant turns as `<tool_call>` blocks and tool results become user turns of
`<tool_response>` blocks, so the conversation uses only roles every template accepts.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

_INSTRUCTIONS = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}}\n</tool_call>"
)
PROBE_NAME = "hitrate_probe_tool_7c1e"


def probe_tools() -> list[dict[str, Any]]:
    """A tool whose name shows up in the rendered prompt if and only if the template prints tools."""
    return [{"type": "function", "function": {"name": PROBE_NAME, "parameters": {"type": "object"}}}]


def _call_text(call: dict[str, Any]) -> str:
    fn = call.get("function", call)
    arguments = fn.get("arguments", {})
    if isinstance(arguments, str):
        arguments = json.loads(arguments) if arguments.strip() else {}
    return "<tool_call>\n" + json.dumps({"name": fn.get("name"), "arguments": arguments}, ensure_ascii=False) + \
        "\n</tool_call>"


def hermes_in_plain_turns(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` (template dicts) rewritten so that a template without tool support shows the
    tools, the calls and their results."""
    block = _INSTRUCTIONS.format(tools="".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools))
    out: list[dict[str, Any]] = []
    rest = list(messages)
    if rest and rest[0]["role"] == "system":
        out.append({"role": "system", "content": (rest[0].get("content") or "") + "\n\n" + block})
        rest = rest[1:]
    else:
        out.append({"role": "system", "content": block})
    for m in rest:
        if m["role"] == "assistant" and m.get("tool_calls"):
            parts = ([m["content"]] if m.get("content") else []) + [_call_text(c) for c in m["tool_calls"]]
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif m["role"] == "tool":
            response = "<tool_response>\n" + (m.get("content") or "") + "\n</tool_response>"
            if out and out[-1].get("_tool_results"):
                out[-1]["content"] += "\n" + response
            else:
                out.append({"role": "user", "content": response, "_tool_results": True})
        else:
            out.append({k: v for k, v in m.items() if k in ("role", "content")})
    for m in out:
        m.pop("_tool_results", None)
    return out

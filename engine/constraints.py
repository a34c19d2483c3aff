"""Constrained decoding through llguidance: grammars for structured output and forced tool calls,
and the per-request matcher that masks the logits before each token is sampled.

Grammars are llguidance grammar strings (`llguidance.grammar_from`), built here from:
- a JSON schema (`response_format: json_schema`), or any JSON object (`json_object`);
- the offered tools (`tool_choice: required` / a named function; Anthropic `any` / `tool`): one
  call in the Hermes markup the tool-call parser reads,
  `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, whose JSON is held to the
  tool's parameter schema.

- the offered tools under `tool_choice: auto` (`auto_tool_grammar`, a server option): prose, or
  calls whose arguments fit their tool's schema.

When the grammar is complete only end-of-sequence stays allowed, so generation ends there.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from hitrate.engine.api import EngineError


def _llguidance():
    try:
        import llguidance
        import llguidance.hf
        import llguidance.torch
    except ImportError as exc:  # the `local` extra installs it
        raise EngineError("structured output and forced tool calls need the llguidance package "
                          "(pip install 'hitrate[local]')") from exc
    return llguidance


def json_schema_grammar(schema: dict[str, Any]) -> str:
    """JSON that validates against `schema`, written compactly: with llguidance's default flexible
    whitespace a small model can fill its whole budget with blanks between two keys."""
    if not isinstance(schema, dict):
        raise EngineError("a JSON schema must be a JSON object")
    schema = {**schema, "x-guidance": {"whitespace_flexible": False, **schema.get("x-guidance", {})}}
    return _llguidance().grammar_from("json_schema", json.dumps(schema))


def json_object_grammar() -> str:
    return json_schema_grammar({"type": "object"})


def _call_schema(tools: list[dict[str, Any]], name: str | None = None) -> dict[str, Any]:
    """`{"name": ..., "arguments": ...}` of one call to one of `tools` (OpenAI function schema), or
    to `name`, with the arguments held to the tool's parameter schema."""
    functions = [t.get("function", {}) for t in tools]
    if name is not None:
        functions = [f for f in functions if f.get("name") == name]
        if not functions:
            raise EngineError(f"tool_choice names {name!r}, which is not among the tools offered")
    if not functions:
        raise EngineError("a forced tool call needs at least one tool")
    options = [
        {"type": "object",
         "properties": {"name": {"const": f["name"]}, "arguments": f.get("parameters") or {"type": "object"}},
         "required": ["name", "arguments"], "additionalProperties": False}
        for f in functions
    ]
    schema = options[0] if len(options) == 1 else {"anyOf": options}
    schema["x-guidance"] = {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "}
    return schema


def tool_call_grammar(tools: list[dict[str, Any]], name: str | None = None, tokenizer=None) -> str:
    """Exactly one Hermes tool call to one of `tools` (OpenAI function schema), or to `name`.
    `tokenizer`: where `<tool_call>` / `</tool_call>` are single added tokens (Qwen2.5, Hermes
    models), the grammar names those tokens, since llguidance matches added tokens only by id."""
    schema = _call_schema(tools, name)
    opening, closing = _markup("<tool_call>", tokenizer), _markup("</tool_call>", tokenizer)
    lark = f'start: {opening} "\\n" call "\\n" {closing}\ncall: %json {json.dumps(schema)}\n'
    return _llguidance().grammar_from("lark", lark)


# Code-block languages a reply may open with under `auto_tool_grammar` (any fence later in a reply
# is free): a fence with no language or `json` at the start is where a call goes.
_PROSE_FENCES = ("python", "py", "bash", "sh", "shell", "console", "diff", "text", "txt", "toml", "yaml", "ini")


# Largest integer a call's argument may take under `auto_tool_grammar`, where the schema sets no
# maximum: without one a small model can write digits until its token budget runs out (Qwen2.5-
# Coder-0.5B did, in 1 of 20 replies: a `start_line` of 10^170).
INTEGER_CEILING = 10**15


def _bounded_integers(schema: Any) -> Any:
    """`schema` with every integer that has no maximum (or minimum) bounded by +-INTEGER_CEILING."""
    if isinstance(schema, list):
        return [_bounded_integers(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _bounded_integers(v) if k not in ("const", "enum", "default", "examples") else v
           for k, v in schema.items()}
    if out.get("type") == "integer" or (isinstance(out.get("type"), list) and "integer" in out["type"]):
        out.setdefault("maximum", INTEGER_CEILING)
        out.setdefault("minimum", -INTEGER_CEILING)
    return out


def auto_tool_grammar(tools: list[dict[str, Any]], tokenizer=None) -> str:
    """`tool_choice: auto` held to well-formed calls: the reply is either prose, or one or more
    calls to `tools`, each `{"name": ..., "arguments": ...}` with arguments valid against the
    tool's parameter schema, in the chat template's `<tool_call>` markup or in a ```` ```json ````
    fence (what small models write when they mean a call; `toolcalls` parses both). One line of
    prose may come before the calls.

    What a reply may not do: begin its first or second line with `{` or a fence other than a
    code block in a listed language (`_PROSE_FENCES`), unless that is a call. That is the shape
    of every malformed call small models write (the task's own function for a name, arguments
    that do not fit); JSON and fences further into prose are free."""
    schema = _bounded_integers(_call_schema(tools))
    opening, closing = _markup("<tool_call>", tokenizer), _markup("</tool_call>", tokenizer)
    fences = " | ".join(json.dumps("```" + language) for language in _PROSE_FENCES)
    lark = f"""start: calls | LINE NL calls | prose
calls: call (SEP call)* SEP?
call: {opening} "\\n" json "\\n" {closing} | "```json\\n" json "\\n```"
json: %json {json.dumps(schema)}
prose: LINE (NL (LINE2 | fence))? | fence
fence: ({fences}) REST
LINE: /[^`{{\\s][^\\n]*/
NL: /\\n+/
LINE2: /[^`{{\\n](.|\\n)*/
SEP: /\\s+/
REST: /(.|\\n)*/
"""
    return _llguidance().grammar_from("lark", lark)


def grammar_error(grammar: str) -> str | None:
    """Why llguidance cannot compile `grammar` (a JSON schema feature it lacks, say), or None."""
    return _llguidance().LLMatcher.validate_grammar(grammar) or None


def _markup(text: str, tokenizer) -> str:
    """A lark item for `text`: its token id when the tokenizer has it as one added token."""
    added = getattr(tokenizer, "get_added_vocab", lambda: {})() if tokenizer is not None else {}
    if text in added:
        return f"<[{added[text]}]>"
    return json.dumps(text)


class TokenizerIndex:
    """The llguidance view of one tokenizer, built once per engine on first use (it walks the whole
    vocabulary)."""

    def __init__(self, tokenizer, vocab_size: int) -> None:
        self._tokenizer = tokenizer
        self._vocab_size = vocab_size
        self._index = None

    def get(self):
        if self._index is None:
            self._index = _llguidance().hf.from_tokenizer(self._tokenizer, n_vocab=self._vocab_size)
        return self._index


class Constraint:
    """One request's grammar state: `apply` masks a `[vocab]` logits row, `consume` advances."""

    def __init__(self, index: TokenizerIndex, grammar: str) -> None:
        llg = _llguidance()
        self._torch = llg.torch
        tokenizer = index.get()
        self._matcher = llg.LLMatcher(tokenizer, grammar)
        if self._matcher.is_error():
            raise EngineError(f"invalid grammar: {self._matcher.get_error()}")
        self._mask = self._torch.allocate_token_bitmask(1, tokenizer.vocab_size)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """A masked copy of `logits` (`[vocab]`): disallowed tokens at -inf."""
        self._torch.fill_next_token_bitmask(self._matcher, self._mask, 0)
        masked = logits.float().clone()[None]
        self._torch.apply_token_bitmask_inplace(masked, self._mask.to(masked.device))
        return masked[0]

    def consume(self, token: int) -> None:
        if not self._matcher.is_stopped() and not self._matcher.consume_token(token):
            raise EngineError(f"token {token} violates the grammar: {self._matcher.get_error()}")

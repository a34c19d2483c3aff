"""The terminal printer: colour only on a terminal without NO_COLOR, failed tool calls' text shown,
and the stop detail in the summary."""

from __future__ import annotations

import io

from hitrate.harness.events import Finished, ToolCallFinished
from hitrate.harness.printer import TerminalPrinter
from hitrate.store.cost import UsageTotals


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _finished(status: str, detail: str) -> Finished:
    summary = {"session_id": "s1", "model": "anthropic/claude-sonnet-5", "status": status, "steps": 2, "calls": 2,
               "failed_calls": 0, "totals": UsageTotals(calls=2).model_dump(), "misses": [], "epochs": []}
    return Finished(session_id="s1", status=status, detail=detail, summary=summary)


def test_colour_on_a_terminal_and_never_with_no_color_or_a_pipe(monkeypatch):
    event = ToolCallFinished(session_id="s1", step=1, call_id="c", name="shell", is_error=False, content="ok")
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = _Tty()
    TerminalPrinter(tty)(event)
    assert "\x1b[" in tty.getvalue()
    pipe = io.StringIO()
    TerminalPrinter(pipe)(event)
    assert "\x1b[" not in pipe.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = _Tty()
    TerminalPrinter(plain)(event)
    assert plain.getvalue() == "  ✓ ok\n"


def test_a_failed_tool_call_shows_the_error_text():
    out = io.StringIO()
    error = "Traceback (most recent call last):\n  File \"calc.py\", line 3\nNameError: name 'x' is not defined"
    TerminalPrinter(out)(ToolCallFinished(session_id="s1", step=1, call_id="c", name="shell", is_error=True, content=error))
    text = out.getvalue()
    assert "✗ Traceback" in text and "NameError: name 'x' is not defined" in text and "(+2 lines)" not in text


def test_the_summary_says_why_the_agent_stopped():
    out = io.StringIO()
    TerminalPrinter(out)(_finished("max_steps", "reached the limit of 2 model calls"))
    lines = out.getvalue().splitlines()
    assert "max_steps after 2 step(s)" in lines[1] and lines[2] == "stopped: reached the limit of 2 model calls"
    done = io.StringIO()
    TerminalPrinter(done)(_finished("end_turn", "the model ended its turn"))
    assert "stopped:" not in done.getvalue()

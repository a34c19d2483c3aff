"""The short turns the harness adds when a model is stuck in a way words can fix.

- A **repair turn** answers a reply that carries no call but looks like one (`call_shapes`): it names
  the tools and says how to call them, once, before the run takes the reply as the final answer.
- A **nudge** follows the same failing call repeated (same tool, same arguments, same error,
  `REPEAT_NUDGE_AFTER` times in a row): it says so and asks for something different.

Both are appended after the model's reply (a user turn, or text after the tool results in the same
user turn), so the cached prefix is untouched, and both are announced (`events.HarnessTurn`) and
counted in the run's result.
"""

from __future__ import annotations

from typing import Sequence

from hitrate.harness.call_shapes import CallShape

REPEAT_NUDGE_AFTER = 2
"""Identical failures in a row (same tool, arguments and error) after which the model is nudged."""


def repair_text(shape: CallShape, tool_names: Sequence[str]) -> str:
    """The repair turn for a reply with `shape` in it and no call (native function calling)."""
    tools = ", ".join(sorted(tool_names))
    if shape.kind == "unknown_function":
        fix = (f"`{shape.name}` is not a tool, so it cannot be called. To run code, call the `shell` tool "
               "(for example with `python -c ...` or the project's tests)." if "shell" in tool_names else
               f"`{shape.name}` is not a tool, so it cannot be called.")
    else:
        fix = "Writing a call as text does not run it: use the tool-calling interface instead."
    return (f"Your last reply contains {shape.describe()}, so nothing ran. {fix} Your tools are: {tools}. "
            "Call one now, or, if the task is done, reply with a short summary and no call.")


def nudge_text(name: str, times: int) -> str:
    """The nudge after the same failing call `times` times in a row."""
    return (f"The same `{name}` call has now failed the same way {times} times in a row. Repeating it will not "
            "help: read the error, look at the code again, and try something different.")


def call_failed(is_error: bool, metadata: dict) -> bool:
    """Whether a tool's outcome is a failure worth counting: an error result, or a command that
    exited non-zero (the shell reports that as output, not as an error)."""
    return is_error or metadata.get("exit_code") not in (None, 0)


class RepeatedFailures:
    """Watches tool results for the same failing call in a row; says when to nudge."""

    def __init__(self, after: int = REPEAT_NUDGE_AFTER) -> None:
        if after < 1:
            raise ValueError("a nudge needs at least one failure to follow")
        self.after = after
        self._last: tuple[str, str, str] | None = None
        self._count = 0

    def observe(self, name: str, arguments: str, content: str, failed: bool) -> str | None:
        """Record one call's result; the nudge text when it makes `after` identical failures in a
        row (and again at each further multiple of `after`), else None."""
        if not failed:
            self._last, self._count = None, 0
            return None
        key = (name, arguments, content)
        if key == self._last:
            self._count += 1
        else:
            self._last, self._count = key, 1
        if self._count % self.after:
            return None
        return nudge_text(name, self._count)

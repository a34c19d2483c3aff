"""Tool-call sequences for the replay policy: the suite's reference sequence, or a recorded run's.

With `--policy replay` no model decides: every request still goes through the real projection,
adapter and backend (so the cache behaviour is measured on realistic agent traffic), but the
assistant turns come from a script (`harness.policy.ReplayPolicy`).

- The **reference sequence** of a task is derived from its files: list the workspace, read the
  files the solution touches, write each solution file, check that the workspace compiles (the
  hidden tests are not in the workspace, by design), finish. Replayed, it must pass: an
  end-to-end check of the runner and the grading. A Harbor task's reference runs its
  `solution/solve.sh` through the shell tool, in the task's container.
- A **recorded sequence** is what an earlier run's agent did: the runner stores each try's
  assistant turns (text and tool calls with their exact argument text) in the task's ledger
  detail, and `recorded_sequences` reads them back.
"""

from __future__ import annotations

from hitrate.evals.task import Task
from hitrate.evals.task_graders import HarborGrader
from hitrate.harness.agent import is_closing_note
from hitrate.harness.policy import RecordedToolCall, RecordedTurn
from hitrate.projection.transcript import AssistantMessage, Message, TextBlock
from hitrate.store.ledger import Ledger

CHECK_COMMAND = "python3 -m compileall -q ."
FINISHED_OUTCOMES = frozenset({"pass", "fail", "agent_error", "timeout"})


class ReplayError(ValueError):
    """No sequence to replay for a task (unknown run, task not recorded, ...)."""


def _solution_files(task: Task) -> list[str]:
    files = [
        p.relative_to(task.solution_dir).as_posix()
        for p in task.solution_dir.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]
    return sorted(files)


def _oracle_turns(task: Task, grader: HarborGrader) -> list[RecordedTurn]:
    """A Harbor task's reference: its solve.sh, run through the shell tool in the task's container
    (what Harbor's oracle agent runs, but as an agent step, so the run measures real traffic)."""
    script = task.solution_dir / "solve.sh"
    if not script.is_file():
        raise ReplayError(f"task {task.id} has no solution/solve.sh to replay")
    command = script.read_text(encoding="utf-8")
    timeout = int(min(grader.agent_timeout_s, 1800))
    return [
        RecordedTurn(text="I'll look at the working directory first.", tool_calls=[RecordedToolCall(name="list_dir", arguments={"path": "."})]),
        RecordedTurn(text="Running the solution.", tool_calls=[RecordedToolCall(name="shell", arguments={"command": command, "timeout_s": timeout})]),
        RecordedTurn(text="Done: the task is solved."),
    ]


def reference_turns(task: Task) -> list[RecordedTurn]:
    """The reference tool-call sequence of `task` (see the module docstring)."""
    if isinstance(task.spec.grader, HarborGrader):
        return _oracle_turns(task, task.spec.grader)
    files = _solution_files(task)
    if not files:
        raise ReplayError(f"task {task.id} has no solution files to derive a reference sequence from")
    existing = [f for f in files if (task.workspace_dir / f).is_file()]
    turns = [RecordedTurn(text="I'll look at the project first.", tool_calls=[RecordedToolCall(name="list_dir", arguments={"path": "."})])]
    if existing:
        turns.append(
            RecordedTurn(
                text="Reading the files involved.",
                tool_calls=[RecordedToolCall(name="read_file", arguments={"path": f}) for f in existing],
            )
        )
    for rel in files:
        content = (task.solution_dir / rel).read_text(encoding="utf-8")
        verb = "Updating" if rel in existing else "Creating"
        turns.append(
            RecordedTurn(text=f"{verb} {rel}.", tool_calls=[RecordedToolCall(name="write_file", arguments={"path": rel, "content": content})])
        )
    turns.append(
        RecordedTurn(text="Checking that everything compiles.", tool_calls=[RecordedToolCall(name="shell", arguments={"command": CHECK_COMMAND})])
    )
    turns.append(RecordedTurn(text="Done: the change is in place."))
    return turns


def turns_from_messages(messages: tuple[Message, ...] | list[Message]) -> list[RecordedTurn]:
    """The assistant turns of a stretch of transcript, as a replayable script (tool-call argument
    text kept exactly as the model produced it). Turns the harness wrote to close a turn the model
    never answered (after a limit or a cancel) are not the model's and are left out."""
    turns = []
    for message in messages:
        if not isinstance(message, AssistantMessage) or is_closing_note(message):
            continue
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        calls = [RecordedToolCall(name=c.name, arguments=c.arguments) for c in message.tool_calls]
        turns.append(RecordedTurn(text=text, tool_calls=calls))
    return turns


def recorded_sequences(ledger: Ledger, run_id: str) -> dict[str, list[list[RecordedTurn]]]:
    """Per suite task of `run_id`, the recorded turns of each try (the finished row of each task)."""
    try:
        ledger.get_run(run_id)
    except KeyError as exc:
        raise ReplayError(f"no run {run_id!r} in {ledger.path} to replay") from exc
    out: dict[str, list[list[RecordedTurn]]] = {}
    for row in ledger.tasks(run_id=run_id):
        if row.outcome not in FINISHED_OUTCOMES:
            continue
        tries = row.detail.get("tries") or []
        sequences = [[RecordedTurn.model_validate(t) for t in entry.get("turns") or []] for entry in tries]
        if sequences and sequences[0]:
            out[row.name] = sequences
    return out

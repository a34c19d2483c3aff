"""One task of an eval run: a fresh workspace copy, the agent under the task's limits, the hidden
tests, an outcome.

    pass         every fail-to-pass and pass-to-pass test passes
    fail         the agent finished, the tests ran, some failed
    agent_error  the agent stopped on a step or cost limit, or its backend refused the request
    timeout      the agent ran past its wall-time limit, or the tests did
    infra_error  the harness or the test run broke (backend unreachable, grading could not run):
                 not the agent's fault, kept out of the pass rate, retried on resume

With two tries, a failing first try gives the agent the (cleaned) test output once, in the same
session, and the tests run again (Aider's benchmark does the same). Both tries are recorded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from hitrate.evals.grading import GradeResult, grade
from hitrate.evals.harbor_env import HarborEnvironment
from hitrate.evals.naive import NAIVE_TOOL_ORDER, registration_order, use_naive_layout
from hitrate.evals.nonce import with_run_nonce
from hitrate.evals.requirements import container_cli
from hitrate.evals.replay import reference_turns, turns_from_messages
from hitrate.evals.settings import EvalSettings, RouteSource
from hitrate.evals.task import Task, TaskLimits
from hitrate.evals.task_graders import HarborGrader
from hitrate.harness.agent import Agent, AgentLimits, AgentResult
from hitrate.harness.call_timeouts import configured_timeouts
from hitrate.harness.defaults import config_path
from hitrate.harness.events import CallRecorded
from hitrate.harness.policy import ModelPolicy, Policy, RecordedTurn, ReplayPolicy
from hitrate.harness.session import Session, SessionConfig, session_inputs
from hitrate.harness.wire.types import RETRYABLE_KINDS
from hitrate.projection.tools_spec import sort_tools
from hitrate.projection.transcript import AssistantMessage
from hitrate.store.ledger import Ledger
from hitrate.tools import ConfinementPolicy

FEEDBACK_CHARS = 4000
_COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
# Call errors that are the backend's or the network's fault, not the agent's.
_INFRA_CALL_KINDS = frozenset(RETRYABLE_KINDS) | {"auth"}

FEEDBACK = (
    "The hidden tests were run on your work and some failed. The tests are correct: change the code "
    "so that they pass. Their output:\n\n```\n{output}\n```"
)


# Said ahead of a containerised task's instruction: the paths it names are the container's.
CONTAINER_NOTE = (
    "This task is set in a container. The shell runs inside it, in {workdir}; the workspace the file "
    "tools edit is that same folder (give paths relative to it, or absolute under {workdir}).\n\n"
)


class TaskResult(BaseModel):
    """How one task of a run ended (what the progress bar and the CLI summary show)."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The suite's task id."""
    ledger_task_id: str
    outcome: str
    pass_try: int | None = None
    tries: int = 0
    calls: int = 0
    cost_usd: float | None = None
    """None when no call had a price."""
    unpriced_calls: int = 0
    wall_s: float = 0.0
    detail: str = ""


def result_text(outcome: str, detail: dict[str, Any]) -> str:
    """One line on how a task ended: the error, or for a graded task its test counts and why the
    agent stopped (a "fail" whose only explanation is "the model ended its turn" says nothing)."""
    if detail.get("error"):
        return str(detail["error"])
    agent = str(detail.get("agent_detail") or "")
    if detail.get("f2p_total") is None:
        return agent
    tests = f"fail-to-pass {detail.get('f2p_passed')}/{detail['f2p_total']}"
    if detail.get("p2p_total"):
        tests += f", pass-to-pass {detail.get('p2p_passed')}/{detail['p2p_total']}"
    return f"{tests} tests pass" + (f"; agent: {agent}" if agent else "")


@dataclass
class TaskJob:
    """A task to run, with the ledger row to reuse when it is a retry of an unfinished attempt."""

    task: Task
    ledger_task_id: str | None = None
    previous_attempts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RunContext:
    """What every task of a run shares."""

    settings: EvalSettings
    run_id: str
    db_path: Path
    routes: RouteSource
    sequences: dict[str, list[list[RecordedTurn]]] | None = None
    """Recorded turns per task and try, when replaying a recorded run."""
    on_call: Callable[[str, CallRecorded], None] = lambda name, event: None
    keep_workspaces: bool = False
    naive_clock: Callable[[], Any] | None = None


class _WallClock:
    """Sets a task's cancel event when its wall-time limit passes, so a long model call or tool run
    is stopped too (the agent itself only checks the limit between steps)."""

    def __init__(self, limit_s: float, cancel: threading.Event) -> None:
        self.fired = False
        self._cancel = cancel
        self._timer = threading.Timer(limit_s, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        self._cancel.set()

    def __enter__(self) -> "_WallClock":
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def classify(agent: AgentResult | None, graded: GradeResult | None, *, wall_fired: bool) -> str:
    """The task outcome from how the agent stopped and what the tests said."""
    if graded is None or graded.infra_error:
        return "infra_error"
    if graded.resolved:
        return "pass"
    status = agent.status if agent is not None else "error"
    if status == "error":
        kind = (agent.detail if agent is not None else "").split(" ", 1)[0].rstrip(":")
        return "infra_error" if kind in _INFRA_CALL_KINDS else "agent_error"
    if status == "max_wall" or wall_fired or graded.timed_out:
        return "timeout"
    if status in ("max_steps", "max_cost"):
        return "agent_error"
    return "fail"


def effective_limits(limits: TaskLimits, settings: EvalSettings) -> TaskLimits:
    """The task's limits with the run's `--max-steps` / `--max-wall` overrides applied."""
    changes = {"max_steps": settings.max_steps, "max_wall_s": settings.max_wall_s}
    return limits.model_copy(update={k: v for k, v in changes.items() if v is not None})


def _first_tool(settings: EvalSettings, specs: list) -> str | None:
    if not specs:
        return None
    ordered = registration_order(specs, NAIVE_TOOL_ORDER) if settings.layout == "naive" else sort_tools(specs)
    return ordered[0].name


def _policy(ctx: RunContext, task: Task, try_number: int) -> Policy | None:
    """The policy for one try; None when a replayed run has no turns recorded for that try."""
    if ctx.settings.policy == "model":
        return ModelPolicy()
    if ctx.sequences is None:
        return ReplayPolicy(reference_turns(task)) if try_number == 1 else None
    recorded = ctx.sequences.get(task.id) or []
    if len(recorded) < try_number or not recorded[try_number - 1]:
        return None
    return ReplayPolicy(recorded[try_number - 1])


def _grade_entry(graded: GradeResult) -> dict[str, Any]:
    return {
        "resolved": graded.resolved,
        "f2p_passed": graded.f2p_passed,
        "f2p_total": graded.f2p_total,
        "p2p_passed": graded.p2p_passed,
        "p2p_total": graded.p2p_total,
        "exit_code": graded.exit_code,
        "tests_timed_out": graded.timed_out,
        "grading_error": graded.infra_error,
        "grade_s": graded.duration_s,
        "test_output": graded.output[-FEEDBACK_CHARS:],
    }


@contextlib.contextmanager
def task_environment(task: Task, workspace: Path) -> Iterator[HarborEnvironment | None]:
    """The container a task is set in (a Harbor task's), removed when the attempt ends; None for
    tasks that run in the host sandbox. Its build and verifier logs go next to the workspace."""
    if not isinstance(task.spec.grader, HarborGrader):
        yield None
        return
    with HarborEnvironment(task, container_cli(), workspace.with_name(workspace.name + "-logs")) as environment:
        yield environment


class TaskAttempt:
    """Runs one TaskJob to an outcome and records it (see the module docstring)."""

    def __init__(self, job: TaskJob, ctx: RunContext, cancel: threading.Event, user_cancel: threading.Event) -> None:
        self.job = job
        self.ctx = ctx
        self.cancel = cancel
        self.user_cancel = user_cancel

    def run(self) -> TaskResult | None:
        """The result, or None when the user interrupted the task (it stays unfinished)."""
        task, ctx = self.job.task, self.ctx
        settings = ctx.settings
        with Ledger(ctx.db_path) as ledger:
            base_detail = {
                "suite_task": task.id,
                "model": settings.model,
                "layout": settings.layout,
                "cache_mode": settings.cache_mode,
                "policy": settings.policy,
                "difficulty": str(task.spec.difficulty),
                "tags": list(task.spec.tags),
                "attempt": len(self.job.previous_attempts) + 1,
                "previous_attempts": self.job.previous_attempts,
            }
            if self.job.ledger_task_id is None:
                row_id = ledger.start_task(task.id, ctx.run_id, detail=base_detail).id
            else:
                row_id = self.job.ledger_task_id
            started = time.monotonic()
            workspace = Path(tempfile.mkdtemp(prefix=f"hitrate-eval-{task.id}-"))
            records: list[Any] = []
            try:
                detail, outcome, pass_try = self._run_in(ledger, row_id, workspace, records)
            except Exception as exc:  # anything the harness did not foresee: the run goes on
                detail = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]}
                outcome, pass_try = "infra_error", None
            finally:
                if not ctx.keep_workspaces:
                    shutil.rmtree(workspace, ignore_errors=True)
                    shutil.rmtree(workspace.with_name(workspace.name + "-logs"), ignore_errors=True)
            if outcome is None:
                return None
            wall = time.monotonic() - started
            detail = {**base_detail, **detail, "wall_s": round(wall, 3), "pass_try": pass_try}
            if ctx.keep_workspaces:
                detail["workspace"] = str(workspace)
            ledger.finish_task(row_id, outcome, detail)
        priced = [r.cost_usd for r in records if r.cost_usd is not None]
        return TaskResult(
            name=task.id,
            ledger_task_id=row_id,
            outcome=outcome,
            pass_try=pass_try,
            tries=len(detail.get("tries") or []),
            calls=len(records),
            cost_usd=sum(priced) if priced else None,
            unpriced_calls=len(records) - len(priced),
            wall_s=round(wall, 3),
            detail=result_text(outcome, detail),
        )

    def _session(self, ledger: Ledger, row_id: str, workspace: Path) -> Session:
        ctx, settings, task = self.ctx, self.ctx.settings, self.job.task
        route = ctx.routes.open()
        protocol = settings.tool_protocol or route.spec.quirks.tool_protocol
        inputs = session_inputs(workspace, protocol=protocol)
        if settings.nonce:
            inputs = with_run_nonce(inputs, settings.nonce, _first_tool(settings, inputs.tool_specs))

        def sink(event: Any) -> None:
            if isinstance(event, CallRecorded):
                ctx.on_call(task.id, event)

        config = SessionConfig(
            max_output_tokens=settings.output_tokens,
            run_id=ctx.run_id,
            task_id=row_id,
            label=f"eval {task.id}",
            layout=settings.layout,
            cache_mode=settings.cache_mode,
            tool_protocol=protocol,
            # The config file's [timeouts], as `hitrate run` reads them: a slow local server needs longer.
            timeouts=configured_timeouts(config_path()),
        )
        try:
            session = Session(route, workspace, ledger=ledger, inputs=inputs, config=config, sink=sink)
        except BaseException:
            route.close()
            raise
        # The agent's shell must not find the answers: the suite folder (every task's hidden tests
        # and reference solution) and the benchmark original it was converted from are empty
        # folders inside its sandbox.
        hidden = ConfinementPolicy(hidden_paths=(str(task.root.parent), *task.hidden_paths))
        session.tool_context = dataclasses.replace(session.tool_context, confinement=hidden)
        if settings.layout == "naive":
            if ctx.naive_clock is not None:
                use_naive_layout(session, clock=ctx.naive_clock)
            else:
                use_naive_layout(session)
        return session

    def _run_in(
        self, ledger: Ledger, row_id: str, workspace: Path, records: list[Any]
    ) -> tuple[dict[str, Any], str | None, int | None]:
        task, settings = self.job.task, self.ctx.settings
        shutil.copytree(task.workspace_dir, workspace, dirs_exist_ok=True, ignore=_COPY_IGNORE)
        policy = _policy(self.ctx, task, 1)
        if policy is None:
            return {"error": f"run {settings.replay_from} has no recorded turns for task {task.id}"}, "infra_error", None
        with task_environment(task, workspace) as environment:
            return self._run_with(ledger, row_id, workspace, records, policy, environment)

    def _run_with(
        self,
        ledger: Ledger,
        row_id: str,
        workspace: Path,
        records: list[Any],
        policy: Policy,
        environment: HarborEnvironment | None,
    ) -> tuple[dict[str, Any], str | None, int | None]:
        task, settings = self.job.task, self.ctx.settings
        limits = effective_limits(task.spec.limits, settings)
        shell = environment.start(workspace) if environment is not None else None
        session = self._session(ledger, row_id, workspace)
        if shell is not None:
            session.tool_context = dataclasses.replace(session.tool_context, container=shell)
        tries: list[dict[str, Any]] = []
        outcome, pass_try = "infra_error", None
        agent_result: AgentResult | None = None
        try:
            agent = Agent(
                session,
                policy=policy,
                limits=AgentLimits(max_steps=limits.max_steps, max_cost_usd=limits.max_cost_usd, max_wall_s=limits.max_wall_s),
                cancel=self.cancel,
            )
            with _WallClock(limits.max_wall_s, self.cancel) as clock:
                message = task.instruction if shell is None else CONTAINER_NOTE.format(workdir=shell.workdir) + task.instruction
                for try_number in range(1, settings.tries + 1):
                    before = len(session.transcript.messages)
                    agent_result = agent.run(message)
                    if agent_result.status == "cancelled" and self.user_cancel.is_set():
                        return {}, None, None
                    turns = turns_from_messages(session.transcript.messages[before:])
                    graded = environment.verify() if environment is not None else grade(task, workspace)
                    outcome = classify(agent_result, graded, wall_fired=clock.fired)
                    tries.append({
                        "try": try_number,
                        "session_id": session.id,
                        "agent_status": agent_result.status,
                        "agent_detail": agent_result.detail,
                        "steps": agent_result.steps,
                        "harness_turns": agent_result.harness_turns,
                        **_grade_entry(graded),
                        "turns": [t.model_dump(mode="json") for t in turns],
                    })  # fmt: skip
                    if outcome == "pass":
                        pass_try = try_number
                        break
                    # A second try only follows a first one the agent finished (its last turn is the
                    # model's, so the feedback can follow as a user turn) and the tests failed.
                    messages = session.transcript.messages
                    finished = agent_result.status == "end_turn" and bool(messages) and isinstance(messages[-1], AssistantMessage)
                    if outcome != "fail" or not finished or try_number == settings.tries:
                        break
                    next_policy = _policy(self.ctx, task, try_number + 1)
                    if next_policy is None:
                        break
                    agent.policy = next_policy
                    message = FEEDBACK.format(output=graded.output[-FEEDBACK_CHARS:].strip())
        finally:
            records.extend(r for _, r in session.records)
            session.close()
        last = tries[-1] if tries else {}
        detail = {
            "session_id": session.id,
            "tool_protocol": session.tool_protocol,
            "agent_status": last.get("agent_status"),
            "agent_detail": last.get("agent_detail"),
            "f2p_passed": last.get("f2p_passed"),
            "f2p_total": last.get("f2p_total"),
            "p2p_passed": last.get("p2p_passed"),
            "p2p_total": last.get("p2p_total"),
            "tries": tries,
        }
        if outcome == "infra_error" and last.get("grading_error"):
            detail["error"] = last["grading_error"]
        elif outcome == "infra_error":
            detail["error"] = last.get("agent_detail")
        return detail, outcome, pass_try

"""An eval report from the ledger: pass rate, cost per passed task and the cache behaviour behind it.

Tasks are grouped into blocks by configuration: model, prompt layout (cache-aware / naive) and
cache mode (cold / warm). Blocks are never merged: a cold and a warm run, or the two layouts,
each get their own figures, so one never hides behind the other's average.

Per block:
- tasks, outcome counts, pass rate over the scored tasks (infra errors and unfinished tasks are
  left out of the denominator, which the report states) with a 95% Wilson interval;
- total cost, cost per scored task, and cost per *passed* task (None when nothing passed);
- tokens per bucket, the hit ratio Σread / Σ(read + writes + fresh) and, separately, the share of
  calls with any hit;
- a miss-reason histogram (calls, tokens and dollars each reason cost);
- task wall time and time to first token at p50 / p90;
- with more than one try per task (`hitrate eval --tries 2`), pass@1 and pass@2 apart.

`price_as` re-prices every call's recorded token buckets at one model's rates (see
`hitrate.evals.price_as`): for runs the price table cannot price, such as the bundled local
engine. The report then says so wherever it shows a cost; the ledger is never changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from hitrate.evals.pass_at import PassAtK, pass_at_k, pass_try, positive_int
from hitrate.evals.price_as import PriceAsError, PricedAs, Repricer
from hitrate.evals.stats import percentile, wilson_interval
from hitrate.store.cost import UsageTotals, aggregate
from hitrate.store.ledger import Ledger
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord, RunRecord, TaskRecord, utc_now

OUTCOMES = ("pass", "fail", "agent_error", "timeout", "infra_error", "unfinished")
_OUTCOME_ALIASES = {"passed": "pass", "failed": "fail", "error": "agent_error", "timed_out": "timeout"}
NOT_SCORED = ("infra_error", "unfinished")
"""Outcomes left out of the pass rate: the harness failed, not the agent, or the task is still running."""
_LAYOUT_ORDER = {"cache-aware": 0, "naive": 1}
HIT = "hit"
"""What `miss_reason_of` says of a call that read from cache and has no miss label."""
_CACHE_ORDER = {"cold": 0, "warm": 1}


class ReportError(ValueError):
    """The report cannot be built as asked (unknown run, unknown task for the picture, ...)."""


def normalize_outcome(outcome: str | None) -> str:
    """pass / fail / agent_error / timeout / infra_error, "unfinished" while running; other
    spellings the ledger may hold ("passed", "failed", "error") mapped onto these."""
    if outcome is None:
        return "unfinished"
    key = outcome.strip().lower().replace("-", "_")
    return _OUTCOME_ALIASES.get(key, key)


def normalize_tag(tag: object) -> str | None:
    """Layout / cache-mode tags compared without caring for "_" vs "-" or case."""
    if tag is None or tag == "":
        return None
    return str(tag).strip().lower().replace("_", "-")


def _short_model(model: str | None) -> str | None:
    """`local/<absolute path>` labels run as wide as the path; the folder name identifies the model.
    `openai-compat/<model>@<base url>` keeps the model and the server's host:port."""
    if model and model.startswith("local/") and "/" in model[len("local/"):].strip("/"):
        return "local/" + model.rstrip("/").rsplit("/", 1)[-1]
    if model and model.startswith("openai-compat/") and "@" in model:
        name, _, url = model[len("openai-compat/"):].partition("@")
        host = urlsplit(url).netloc
        return f"openai-compat/{name}@{host}" if host else model
    return model


class ConfigKey(BaseModel):
    """What a block's tasks have in common."""

    model_config = ConfigDict(frozen=True)

    model: str | None = None
    layout: str | None = None
    cache_mode: str | None = None
    policy: str | None = None
    """"replay" for runs whose tool calls were replayed: their pass rate measures the replayed
    sequence, not the model, so they never share a block with runs where the model decided."""
    protocol: str | None = None
    """"text" for runs under the text tool protocol (one shell block per reply); None: native calls."""

    @property
    def label(self) -> str:
        parts = [part or "?" for part in (_short_model(self.model), self.layout, self.cache_mode)]
        if self.protocol == "text":
            parts.append("text protocol")
        if self.policy == "replay":
            parts.append("replay")
        return " · ".join(parts)

    def sort_key(self) -> tuple:
        return (
            self.model or "",
            _LAYOUT_ORDER.get(self.layout or "", 9),
            self.layout or "",
            _CACHE_ORDER.get(self.cache_mode or "", 9),
            self.cache_mode or "",
            self.policy == "replay",
        )


class Quantiles(BaseModel):
    n: int
    p50: float | None = None
    p90: float | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> "Quantiles":
        return cls(n=len(values), p50=percentile(values, 50), p90=percentile(values, 90))


class MissReasonRow(BaseModel):
    reason: str
    """The label's reason ("ttl_expired", "prefix_changed", ...); "not recorded" for calls without
    a label and without a read. Calls that hit are not misses: `Block.hit_calls` counts them."""
    calls: int
    tokens: int
    """Tokens the misses made the calls pay for as writes or fresh input (where recorded)."""
    cost_usd: float | None
    """What the misses cost compared with hits (where recorded)."""
    examples: list[str] = []
    """Up to three distinct full labels, e.g. "prefix_changed(system, line 3)"."""


class TaskRow(BaseModel):
    task_id: str
    name: str
    run_id: str | None
    outcome: str
    calls: int
    cost_usd: float | None
    wall_s: float | None
    hit_ratio: float | None


class Block(BaseModel):
    """One configuration's figures."""

    key: ConfigKey
    run_ids: list[str]
    n_tasks: int
    outcomes: dict[str, int]
    n_scored: int
    """Tasks in the pass-rate denominator (all but infra errors and unfinished ones)."""
    n_passed: int
    pass_rate: float | None
    pass_rate_ci95: tuple[float, float] | None
    max_tries: int = 1
    """The most tries the block's runs gave a task (`hitrate eval --tries`); the pass rate counts
    a task passed on any of them."""
    pass_at: list[PassAtK] = []
    """pass@1 .. pass@max_tries when the runs gave more than one try; empty otherwise."""
    pass_try_unknown: int = 0
    """Passed tasks whose passing try is not recorded: counted in pass@max_tries only."""
    total_cost_usd: float | None
    """All calls of the block, infra-error tasks included (that money was spent)."""
    unpriced_calls: int
    cost_per_task_usd: float | None
    """total / scored tasks."""
    cost_per_passed_task_usd: float | None
    """total / passed tasks; None when no task passed."""
    tokens: UsageTotals
    miss_reasons: list[MissReasonRow]
    hit_calls: int = 0
    """Calls that read from cache with no miss label: everything they could read, they read."""
    task_wall_s: Quantiles
    ttft_s: Quantiles
    tasks: list[TaskRow]
    end_reasons: dict[str, int] = {}
    """How the agent's last try of each task ended (`end_reason`), by count."""
    harness_turns: dict[str, int] = {}
    """Turns the harness added across the block's tries (repair, nudge, format_error), by kind."""


def end_reason(detail: dict) -> str | None:
    """How a task's last try ended, as one label: a limit's status (max_steps, max_wall, ...), else
    the agent's own words without their particulars ("the model ended its turn", "the repair turn
    did not produce a call", "the model submitted its work")."""
    status, said = detail.get("agent_status"), detail.get("agent_detail")
    if not isinstance(status, str):
        return None
    if status != "end_turn" or not isinstance(said, str) or not said:
        return status
    return said.split(" (", 1)[0]


def _harness_turns(tasks: Sequence[TaskRecord]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for task in tasks:
        for attempt in task.detail.get("tries") or []:
            turns = attempt.get("harness_turns") if isinstance(attempt, dict) else None
            if isinstance(turns, dict):
                counts.update({k: v for k, v in turns.items() if isinstance(v, int)})
    return dict(sorted(counts.items()))


class CallBar(BaseModel):
    """One call of a trajectory, for the stacked bar picture."""

    number: int
    """1 for the task's first call, as the TUI numbers calls."""
    read: int | None
    write: int | None
    fresh: int | None
    output: int | None
    cost_usd: float | None
    miss_reason: str | None


class Trajectory(BaseModel):
    task_id: str
    task_name: str
    block: str
    calls: list[CallBar]


class RunInfo(BaseModel):
    id: str
    label: str | None
    status: str
    started_at: datetime
    finished_at: datetime | None
    config: dict


class Report(BaseModel):
    generated_at: datetime
    ledger: str
    runs: list[RunInfo]
    blocks: list[Block]
    trajectory: Trajectory | None = None
    """The calls of one task, for the per-call picture."""
    compared: list[Trajectory] = []
    """The same task in each other block (the naive layout beside the cache-aware one), drawn on
    the same token scale below it."""
    priced_as: PricedAs | None = None
    """Set when every cost in the report was re-priced at one model's rates (`--price-as`)
    instead of the ledger's recorded costs."""

    @property
    def price_label(self) -> str | None:
        """"priced as <model>" when the costs are re-priced, for every title that shows one."""
        return self.priced_as.label if self.priced_as is not None else None


def build_report(
    ledger: Ledger,
    run_ids: Sequence[str],
    *,
    trajectory_task: str | None = None,
    price_as: str | None = None,
    price_table: PriceTable | None = None,
) -> Report:
    """The report over one or more runs of `ledger`. `trajectory_task` names the task (by name or
    id) whose calls the per-call picture shows; by default the task with the most calls in the
    first block. `price_as` names a model of `price_table` (default: the shipped one) whose
    rates re-price every call, in the report only."""
    if not run_ids:
        raise ReportError("name at least one run")
    repricer = None
    if price_as is not None:
        try:
            repricer = Repricer(price_as, price_table)
        except PriceAsError as exc:
            raise ReportError(str(exc)) from exc
    runs: list[RunRecord] = []
    for run_id in dict.fromkeys(run_ids):
        try:
            runs.append(ledger.get_run(run_id))
        except KeyError as exc:
            known = ", ".join(r.id for r in ledger.runs()[-5:]) or "none"
            raise ReportError(f"no run {run_id!r} in {ledger.path} (latest runs: {known})") from exc

    groups: dict[ConfigKey, _Group] = {}
    for run in runs:
        calls = ledger.calls(run_id=run.id)
        if repricer is not None:
            calls = repricer.reprice(calls)
        tries = positive_int(run.config.get("tries")) or 1
        by_task: dict[str | None, list[CallRecord]] = {}
        for call in calls:
            by_task.setdefault(call.task_id, []).append(call)
        for task in ledger.tasks(run_id=run.id):
            task_calls = by_task.pop(task.id, [])
            key = _task_key(run, task, task_calls)
            groups.setdefault(key, _Group()).add_task(run.id, task, task_calls, tries)
        # Calls outside any task (e.g. an interactive sitting) count towards tokens and cost only.
        for loose in by_task.values():
            for call in loose:
                key = ConfigKey(
                    model=call.model,
                    layout=normalize_tag(call.layout) or normalize_tag(run.config.get("layout")),
                    cache_mode=normalize_tag(call.cache_mode) or normalize_tag(run.config.get("cache_mode")),
                    policy=_replay_tag(run.config.get("policy")),
                )
                groups.setdefault(key, _Group()).add_loose_call(run.id, call)

    blocks = [groups[k].block(k) for k in sorted(groups, key=ConfigKey.sort_key)]
    return Report(
        generated_at=utc_now(),
        ledger=str(ledger.path),
        runs=[
            RunInfo(id=r.id, label=r.label, status=r.status, started_at=r.started_at, finished_at=r.finished_at, config=r.config)
            for r in runs
        ],
        blocks=blocks,
        trajectory=(trajectory := _trajectory(groups, blocks, trajectory_task)),
        compared=_same_task_elsewhere(groups, blocks, trajectory),
        priced_as=repricer.summary() if repricer is not None else None,
    )


def _most_common(values: Iterable[object]) -> object | None:
    counts = Counter(v for v in values if v not in (None, ""))
    return counts.most_common(1)[0][0] if counts else None


def _task_key(run: RunRecord, task: TaskRecord, calls: Sequence[CallRecord]) -> ConfigKey:
    """A task's configuration: its own detail first, then the run's config, then its calls' tags."""

    def pick(*names: str, from_calls: str) -> object | None:
        for source in (task.detail, run.config):
            for name in names:
                if source.get(name) not in (None, ""):
                    return source[name]
        return _most_common(getattr(c, from_calls) for c in calls)

    return ConfigKey(
        model=_str(pick("model", from_calls="model")),
        layout=normalize_tag(pick("layout", from_calls="layout")),
        cache_mode=normalize_tag(pick("cache_mode", "cache", from_calls="cache_mode")),
        policy=_replay_tag(task.detail.get("policy") or run.config.get("policy")),
        protocol="text" if task.detail.get("tool_protocol") == "text" else None,
    )


def _replay_tag(policy: object | None) -> str | None:
    """"replay" or None: the model deciding is the default, however (or whether) a run recorded it."""
    return "replay" if policy == "replay" else None


def _str(value: object | None) -> str | None:
    return None if value is None else str(value)


class _Group:
    def __init__(self) -> None:
        self.run_ids: list[str] = []
        self.tasks: list[tuple[TaskRecord, list[CallRecord]]] = []
        self.loose: list[CallRecord] = []
        self.max_tries = 1

    def _seen(self, run_id: str) -> None:
        if run_id not in self.run_ids:
            self.run_ids.append(run_id)

    def add_task(self, run_id: str, task: TaskRecord, calls: list[CallRecord], tries: int = 1) -> None:
        self._seen(run_id)
        self.tasks.append((task, calls))
        recorded = task.detail.get("tries")
        self.max_tries = max(self.max_tries, tries, len(recorded) if isinstance(recorded, list) else 1)

    def add_loose_call(self, run_id: str, call: CallRecord) -> None:
        self._seen(run_id)
        self.loose.append(call)

    @property
    def calls(self) -> list[CallRecord]:
        return [c for _, calls in self.tasks for c in calls] + self.loose

    def block(self, key: ConfigKey) -> Block:
        outcomes = Counter(normalize_outcome(t.outcome) for t, _ in self.tasks)
        n_scored = sum(n for outcome, n in outcomes.items() if outcome not in NOT_SCORED)
        n_passed = outcomes.get("pass", 0)
        calls = self.calls
        tokens = aggregate((c.usage, c.cost_usd) for c in calls)
        total = tokens.cost_usd
        walls = [w for t, _ in self.tasks if (w := _wall_s(t)) is not None]
        rows = [_task_row(t, cs) for t, cs in self.tasks]
        pass_at: list[PassAtK] = []
        unknown_tries = 0
        if self.max_tries > 1:
            passed_tries = [pass_try(t) for t, _ in self.tasks if normalize_outcome(t.outcome) == "pass"]
            pass_at, unknown_tries = pass_at_k(passed_tries, n_scored, self.max_tries)
        return Block(
            key=key,
            run_ids=self.run_ids,
            n_tasks=len(self.tasks),
            outcomes={o: outcomes[o] for o in (*OUTCOMES, *sorted(set(outcomes) - set(OUTCOMES))) if outcomes.get(o)},
            n_scored=n_scored,
            n_passed=n_passed,
            pass_rate=n_passed / n_scored if n_scored else None,
            pass_rate_ci95=wilson_interval(n_passed, n_scored),
            max_tries=self.max_tries,
            pass_at=pass_at,
            pass_try_unknown=unknown_tries,
            total_cost_usd=total,
            unpriced_calls=tokens.unpriced_calls,
            cost_per_task_usd=total / n_scored if total is not None and n_scored else None,
            cost_per_passed_task_usd=total / n_passed if total is not None and n_passed else None,
            tokens=tokens,
            miss_reasons=miss_histogram(calls),
            hit_calls=sum(1 for c in calls if miss_reason_of(c) == HIT),
            task_wall_s=Quantiles.of(walls),
            ttft_s=Quantiles.of([c.ttft_s for c in calls if c.ttft_s is not None]),
            tasks=rows,
            end_reasons=dict(Counter(r for t, _ in self.tasks if (r := end_reason(t.detail)) is not None).most_common()),
            harness_turns=_harness_turns([t for t, _ in self.tasks]),
        )


def _wall_s(task: TaskRecord) -> float | None:
    recorded = task.detail.get("wall_s")
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        return float(recorded)
    if task.finished_at is None:
        return None
    return (task.finished_at - task.started_at).total_seconds()


def _task_row(task: TaskRecord, calls: Sequence[CallRecord]) -> TaskRow:
    totals = aggregate((c.usage, c.cost_usd) for c in calls)
    return TaskRow(
        task_id=task.id,
        name=task.name,
        run_id=task.run_id,
        outcome=normalize_outcome(task.outcome),
        calls=len(calls),
        cost_usd=totals.cost_usd,
        wall_s=_wall_s(task),
        hit_ratio=totals.hit_ratio,
    )


def miss_reason_of(call: CallRecord) -> str:
    """The reason part of a call's miss label ("prefix_changed(system, line 3)" -> "prefix_changed")."""
    if call.miss_reason:
        return call.miss_reason.split("(", 1)[0].strip() or call.miss_reason
    if call.usage.cache_read:
        return HIT
    return "not recorded"


def miss_histogram(calls: Iterable[CallRecord]) -> list[MissReasonRow]:
    """Calls, tokens and dollars per miss reason, most calls first; calls that hit are left out."""
    rows: dict[str, dict] = {}
    for call in calls:
        reason = miss_reason_of(call)
        if reason == HIT:
            continue
        row = rows.setdefault(reason, {"calls": 0, "tokens": 0, "cost": None, "examples": []})
        row["calls"] += 1
        row["tokens"] += call.miss_tokens or 0
        if call.miss_cost_usd is not None:
            row["cost"] = (row["cost"] or 0.0) + call.miss_cost_usd
        if call.miss_reason and call.miss_reason != reason and call.miss_reason not in row["examples"] and len(row["examples"]) < 3:
            row["examples"].append(call.miss_reason)
    ordered = sorted(rows.items(), key=lambda kv: (-kv[1]["calls"], kv[0]))
    return [
        MissReasonRow(reason=r, calls=v["calls"], tokens=v["tokens"], cost_usd=v["cost"], examples=v["examples"])
        for r, v in ordered
    ]


def _trajectory(groups: dict[ConfigKey, _Group], blocks: list[Block], wanted: str | None) -> Trajectory | None:
    candidates = [(b.key, task, calls) for b in blocks for task, calls in groups[b.key].tasks]
    if wanted is not None:
        chosen = next((c for c in candidates if wanted in (c[1].id, c[1].name)), None)
        if chosen is None:
            names = ", ".join(sorted({c[1].name for c in candidates})[:10]) or "none"
            raise ReportError(f"no task {wanted!r} in these runs (tasks: {names})")
    else:
        first_block = [c for c in candidates if blocks and c[0] == blocks[0].key]
        chosen = max(first_block, key=lambda c: len(c[2]), default=None)
        if chosen is None or not chosen[2]:
            return None
    key, task, calls = chosen
    return _bars(key, task, calls)


def _same_task_elsewhere(groups: dict[ConfigKey, _Group], blocks: list[Block], shown: Trajectory | None) -> list[Trajectory]:
    """The task of `shown`, by name, in every other block that ran it."""
    if shown is None:
        return []
    found = []
    for block in blocks:
        if block.key.label == shown.block:
            continue
        match = next(((task, calls) for task, calls in groups[block.key].tasks if task.name == shown.task_name and calls), None)
        if match is not None:
            found.append(_bars(block.key, *match))
    return found


def _bars(key: ConfigKey, task, calls) -> Trajectory:
    bars = [
        CallBar(
            number=i,
            read=c.usage.cache_read,
            write=c.usage.cache_write_total,
            fresh=c.usage.fresh_input,
            output=c.usage.output,
            cost_usd=c.cost_usd,
            miss_reason=c.miss_reason,
        )
        for i, c in enumerate(calls, start=1)
    ]
    return Trajectory(task_id=task.id, task_name=task.name, block=key.label, calls=bars)


def load_report(
    db: str | Path | None, run_ids: Sequence[str], *, trajectory_task: str | None = None, price_as: str | None = None,
    price_table: PriceTable | None = None,
) -> Report:
    with Ledger(db, read_only=True) as ledger:
        return build_report(ledger, run_ids, trajectory_task=trajectory_task, price_as=price_as, price_table=price_table)


def headline(blocks: Sequence[Block]) -> str | None:
    """One sentence a reader takes away: how much cheaper per passed task the cache-aware layout
    was than the naive one, for the first model and cache mode that has both, e.g.
    "cache-aware: 73% cheaper per passed task than naive". None without such a pair."""
    by_key = {(b.key.model, b.key.cache_mode, b.key.policy, b.key.layout): b for b in blocks}
    for b in blocks:
        if b.key.layout != "cache-aware" or b.cost_per_passed_task_usd is None:
            continue
        naive = by_key.get((b.key.model, b.key.cache_mode, b.key.policy, "naive"))
        if naive is None or not naive.cost_per_passed_task_usd:
            continue
        saving = 1 - b.cost_per_passed_task_usd / naive.cost_per_passed_task_usd
        if saving >= 0:
            return f"cache-aware: {saving:.0%} cheaper per passed task than naive"
        return f"cache-aware: {-saving:.0%} dearer per passed task than naive"
    return None

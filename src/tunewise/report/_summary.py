"""What a run did, computed from the store alone (no TVM): per-task tables and curves."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tunewise.forecast import Forecast
from tunewise.goals import Goal
from tunewise.stores import FROM_BASE, Artifact, Checkpoint, ModelLatency, Run, Store
from tunewise.tuning.estimate import calibrated_latency, model_latency, task_latency


@dataclass(frozen=True)
class TaskSummary:
    """One task of a run. Latencies and times in seconds; shares are fractions of the run's total."""

    index: int
    name: str
    weight: int
    trials: int
    failures: int
    best: float  # best measured latency (inf when none)
    default_latency: float
    latency_share: float  # of the model-latency estimate
    seconds: float  # tuning time spent in the task's slots
    time_share: float  # of the run's tuning time
    curve: tuple[tuple[int, float], ...]  # (trials of the task, best latency so far) after each trial

    @property
    def current_latency(self) -> float:
        return task_latency(self.default_latency, self.best)


@dataclass(frozen=True)
class Failure:
    """A failed candidate: its task (``None`` for imported records), the kind of error the store gives it
    (:data:`tunewise.tuning.measure.BUILD_ERROR`, ``RUN_ERROR``, ``TIMEOUT``) and the error's message."""

    task: int | None
    kind: str
    message: str


@dataclass(frozen=True)
class RunSummary:
    """A run: its row, tasks, totals and model-latency curve ``(tuning seconds, estimate)``; its
    ``checkpoints`` (one per scheduler decision), ``failed`` candidates, compiled ``artifacts``, the
    whole-model latencies ``measured`` while tuning (:class:`~tunewise.stores.ModelLatency`) and the energy
    the run used (``joules``, ``None`` when it was not metered)."""

    run: Run
    tasks: tuple[TaskSummary, ...]
    trials: int
    failures: int
    elapsed: float
    untuned: float
    estimate: float
    curve: tuple[tuple[float, float], ...]
    checkpoints: tuple[Checkpoint, ...] = ()
    failed: tuple[Failure, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    measured: tuple[ModelLatency, ...] = ()
    joules: float | None = None
    # what the failed candidates cost: their build and run seconds, and the share of their slots' energy that
    # time stands for (None when the run was not metered)
    waste_seconds: float = 0.0
    waste_joules: float | None = None
    base_tasks: int = 0  # tasks with a trial made from a record base's record (tunewise.stores.FROM_BASE)

    @property
    def calibrated(self) -> float:
        """The final estimate brought to what the latest whole-model check measured
        (:func:`tunewise.tuning.estimate.calibrated_latency`); the estimate itself without a check."""
        return calibrated_latency(self.estimate, self.curve, ((m.elapsed, m.latency) for m in self.measured))

    @property
    def goal(self) -> float | None:
        """The run's latency goal in seconds, as its forecasts carry it, else as its setting states it (a goal
        relative to onnxruntime or PyTorch eager through its last artifact that timed that reference);
        ``None`` without a goal, or without the reference it is relative to."""
        for c in reversed(self.checkpoints):
            if c.forecast is not None and c.forecast.goal is not None:
                return c.forecast.goal
        text = self.run.settings.get("goal")
        if text is None:
            return None
        goal = Goal.parse(text)
        if not goal.relative:
            return goal.resolve()
        key = "onnxruntime_latency_s" if goal.reference == "ort" else "torch_eager_latency_s"
        timed = [a.metadata[key] for a in self.artifacts if isinstance(a.metadata.get(key), int | float)]
        return goal.factor * timed[-1] if timed else None

    @property
    def label(self) -> str:
        return f"run {self.run.id}: {self.run.scheduler} ({self.run.model})"

    def forecasts(self, fractions=(0.25, 0.5, 0.75)) -> tuple[Forecast, ...]:
        """The calibrated forecasts (:attr:`~tunewise.forecast.Forecast.calibrated`: only those are shown) as
        they stood at ``fractions`` of the run's tuning time so far (the last made by then) and after its last
        slot, each once, in time order."""
        made = [c.forecast for c in self.checkpoints if c.forecast is not None and c.forecast.calibrated]
        picked = [[f for f in made if f.elapsed <= share * self.elapsed][-1:] for share in fractions]
        unique = {f.slot: f for part in [*picked, made[-1:]] for f in part}
        return tuple(unique[slot] for slot in sorted(unique))


def summarize(store: Store, run: int) -> RunSummary:
    """Summarise run ``run`` of ``store``."""
    spec = store.get_run(run)
    stored_tasks = store.get_tasks(run)
    trials = store.get_trials(run, records=False)
    checkpoints = store.get_checkpoints(run)
    seconds = [0.0] * len(stored_tasks)
    for c in checkpoints:
        seconds[c.task] += c.seconds
    curves: list[list[tuple[int, float]]] = [[] for _ in stored_tasks]
    failures = [0] * len(stored_tasks)
    for t in trials:
        if t.task is None:
            continue
        best = min(t.latency, curves[t.task][-1][1] if curves[t.task] else math.inf)
        curves[t.task].append((len(curves[t.task]) + 1, best))
        failures[t.task] += t.error is not None
    bests = [c[-1][1] if c else math.inf for c in curves]
    current = [task_latency(s.default_latency, best) for s, best in zip(stored_tasks, bests, strict=True)]
    estimate = model_latency((s.weight, s.default_latency, best) for s, best in zip(stored_tasks, bests, strict=True))
    total_seconds = sum(seconds)
    tasks = tuple(
        TaskSummary(index=s.index, name=s.name, weight=s.weight, trials=len(curve), failures=fails,
                    best=curve[-1][1] if curve else math.inf, default_latency=s.default_latency,
                    latency_share=s.weight * latency / estimate if 0 < estimate < math.inf else 0.0,
                    seconds=spent, time_share=spent / total_seconds if total_seconds > 0 else 0.0, curve=tuple(curve))
        for s, curve, fails, latency, spent in zip(stored_tasks, curves, failures, current, seconds, strict=True))
    untuned = model_latency((s.weight, s.default_latency, math.inf) for s in stored_tasks) if stored_tasks else math.inf
    estimate = estimate if stored_tasks else math.inf  # an import has no tasks: no model to estimate
    curve = ((0.0, untuned), *((c.elapsed, c.latency) for c in checkpoints if c.trials))
    measured = tuple(store.get_model_latencies(run))
    metered = [c.joules for c in checkpoints if c.joules is not None] + [m.joules for m in measured
                                                                          if m.joules is not None]
    waste_seconds, waste_joules = _waste(trials, checkpoints)
    return RunSummary(run=spec, tasks=tasks, trials=len(trials), failures=sum(t.error is not None for t in trials),
                      elapsed=checkpoints[-1].elapsed if checkpoints else 0.0, untuned=untuned, estimate=estimate,
                      curve=curve, checkpoints=tuple(checkpoints),
                      failed=tuple(Failure(t.task, t.error, t.message) for t in trials if t.error is not None),
                      artifacts=tuple(store.get_artifacts(run)), measured=measured,
                      joules=math.fsum(metered) if metered else None, waste_seconds=waste_seconds,
                      waste_joules=waste_joules,
                      base_tasks=len({t.task for t in trials if t.origin == FROM_BASE and t.task is not None}))


def _waste(trials, checkpoints) -> tuple[float, float | None]:
    """Seconds the failed trials took to build and run, and their share of each slot's joules (by that time)."""
    per_slot: dict[int, list[float]] = {}
    for t in trials:
        if t.task is not None:
            spent = per_slot.setdefault(t.slot, [0.0, 0.0])
            spent[0] += t.build_seconds + t.run_seconds
            spent[1] += (t.build_seconds + t.run_seconds) if t.error is not None else 0.0
    seconds = math.fsum(failed for _, failed in per_slot.values())
    if not any(c.joules is not None for c in checkpoints):
        return seconds, None
    joules = math.fsum(c.joules * per_slot[c.slot][1] / per_slot[c.slot][0] for c in checkpoints
                       if c.joules is not None and c.slot in per_slot and per_slot[c.slot][0] > 0)
    return seconds, joules

"""Benchmark: a belief about each task's next slots learnt from other models' traces, judged on held-out traces
(no TVM).

::

    .venv/bin/python bench/studies/schedulers/learnt_belief.py --kept-out grouped,tcn \
        --out bench/studies/schedulers/results/learnt-belief.json

Every trace of ``bench/traces/`` gives one example per task, seed and slot boundary: the task as a scheduler
sees it after ``k`` slots of 16 trials (:func:`features`: ``k``, its last slot's drop, its drop since its first
slot and since its untuned latency, the trials since it last improved, its FLOPs, its throughput over the median
first-slot throughput of the model's tasks, its failure rate, its latency), and two targets: the log drop of
its best latency in the next slot, and the log drop still to come in its recorded run (its *headroom*). A
gradient-boosted regressor (scikit-learn) is trained on the development traces other than the one it is judged
on (on all of them for a trace kept out, ``--kept-out``), and its skill is ``1 - SSE / SSE of the mean at
the same k`` on the held-out trace: 0 when the features add nothing to the slot's index, 1 when they tell
everything.

Then ``expected-gain`` is replayed (:func:`tunewise.lab.replay.replay`, 16 trials a slot, the decision charged)
with the next slot of a tried task expected to take ``(1 - exp(-headroom)) * f(k)`` of its latency, the
headroom either learnt (``learnt``) or the training traces' mean at the same ``k`` (``mean at k``, which
isolates what the features bring), and ``f(k)`` the training traces' mean next-slot drop over their mean headroom
at ``k``; an untried task is expected to gain what ``expected-gain`` expects. Each trace's median time to within
5 % of the best reachable latency, over the clairvoyant bound's (``bench/studies/schedulers/scheduler_sweep.py``),
beside ``gradient``, ``gated-gradient`` and ``expected-gain``.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
import sys

import numpy as np

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
from scheduler_sweep import bound_seconds, geomean, median_seconds
from sklearn.ensemble import GradientBoostingRegressor

from tunewise import schedulers
from tunewise.lab import replay as rp
from tunewise.schedulers import ExpectedGain
from tunewise.tuning.ledger import slot_size
from tunewise.tuning.state import Snapshot, TaskView

SLOT = 16
FEATURES = ("k", "last drop", "drop since first slot", "drop since untuned", "slots since improving", "log10 flops",
            "throughput over median", "failure rate", "log10 latency")


def first_best(task: TaskView) -> float:
    """The task's best latency after its first slot that measured anything (``inf`` when none did)."""
    return next((b for b in task.best_history if math.isfinite(b)), math.inf)


def features(snapshot: Snapshot, task: TaskView) -> list[float]:
    """What the belief reads of a tried task with a valid best (:data:`FEATURES`, in order)."""
    best, hist = task.best, task.best_history
    last = math.log(hist[-2] / best) if len(hist) >= 2 and math.isfinite(hist[-2]) else 0.0
    untuned = math.log(task.default_latency / best) if math.isfinite(task.default_latency) else 0.0
    improved = [j for j in range(len(task.trial_bests)) if j == 0 or task.trial_bests[j] < task.trial_bests[j - 1]]
    since = (len(task.trial_bests) - 1 - improved[-1]) / SLOT if improved else float(task.slots)
    speeds = [t.flops / first_best(t) for t in snapshot.tasks if t.flops > 0 and math.isfinite(first_best(t))]
    relative = math.log(task.flops / best / statistics.median(speeds)) if task.flops > 0 and speeds else 0.0
    return [task.slots, last, math.log(first_best(task) / best), untuned, since, math.log10(task.flops + 1.0),
            relative, task.failures / max(task.trials, 1), math.log10(best)]


def view(index: int, task: rp.TraceTask, run: rp.TaskRun, slots: int) -> TaskView:
    """``task`` as the ledger shows it after ``slots`` slots of :data:`SLOT` trials of ``run``."""
    lat = np.array(run.latencies[:slots * SLOT])
    bests = tuple(float(b) for b in np.minimum.accumulate(lat))
    return TaskView(index, task.name, task.weight, task.flops, task.default_latency,
                    best_history=tuple(bests[SLOT * (j + 1) - 1] for j in range(slots)),
                    trials_history=tuple(SLOT * (j + 1) for j in range(slots)), trials=len(lat),
                    failures=int(np.sum(~np.isfinite(lat))), trial_bests=bests)


def examples(trace: rp.Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, next-slot log drop and headroom of every tried task at every slot boundary of the trace."""
    x, drop, headroom = [], [], []
    for runs in trace.runs:
        first = Snapshot(tuple(view(i, t, r, 1) for i, (t, r) in enumerate(zip(trace.tasks, runs, strict=True))
                               if len(r.latencies) >= SLOT))
        for i, (task, run) in enumerate(zip(trace.tasks, runs, strict=True)):
            slots = len(run.latencies) // SLOT
            bests = np.minimum.accumulate(np.array(run.latencies))[SLOT - 1::SLOT][:slots]
            for k in range(1, slots):
                if not math.isfinite(bests[k - 1]):
                    continue
                x.append(features(first, view(i, task, run, k)))
                drop.append(math.log(bests[k - 1] / bests[k]))
                headroom.append(math.log(bests[k - 1] / bests[-1]))
    return np.array(x), np.array(drop), np.array(headroom)


def mean_at_k(k: np.ndarray, y: np.ndarray) -> dict[int, float]:
    return {int(j): float(y[k == j].mean()) for j in np.unique(k)}


def skill(model, x: np.ndarray, y: np.ndarray, train_k: np.ndarray, train_y: np.ndarray) -> float:
    """``1 - SSE(model) / SSE(the training mean at each k)`` on ``x, y``."""
    means = mean_at_k(train_k, train_y)
    base = np.array([means.get(int(j), float(train_y.mean())) for j in x[:, 0]])
    return float(1.0 - np.sum((y - model.predict(x)) ** 2) / np.sum((y - base) ** 2))


class Belief(ExpectedGain):
    """``expected-gain`` with a tried task's next slot expected to take ``(1 - exp(-headroom)) * share[k]`` of its
    latency, the headroom from ``model`` (features to log headroom) or, without one, ``headroom[k]``."""

    def __init__(self, *, share: dict[int, float], headroom: dict[int, float], model=None):
        super().__init__()
        self.share, self.headroom, self.model = share, headroom, model
        self._predicted: dict[int, float] = {}

    def rates(self, snapshot):
        tried = [t for t in snapshot.live if t.slots and math.isfinite(t.best) and t.trials > 0]
        if self.model is not None and tried:
            predicted = self.model.predict(np.array([features(snapshot, t) for t in tried]))
            self._predicted = {t.index: float(p) for t, p in zip(tried, predicted, strict=True)}
        return super().rates(snapshot)

    def expected_gain(self, snapshot, task):
        if task.slots == 0 or not math.isfinite(task.best) or task.trials <= 0:
            return super().expected_gain(snapshot, task)
        k = min(task.slots, max(self.share))
        headroom = self._predicted[task.index] if self.model is not None else self.headroom[k]
        fraction = (1.0 - math.exp(-max(headroom, 0.0))) * self.share[k]
        return task.weight * task.current_latency * fraction * slot_size(snapshot, task) / SLOT


def contenders(share: dict[int, float], headroom: dict[int, float], model) -> dict:
    """The schedulers replayed on a trace, each as a maker of its scheduler for a seed."""
    makers = {n: (lambda seed, n=n: schedulers.create_seeded(n, seed))
              for n in ("gradient", "gated-gradient", "expected-gain")}
    makers["mean at k"] = lambda seed: Belief(share=share, headroom=headroom)
    makers["learnt"] = lambda seed: Belief(share=share, headroom=headroom, model=model)
    return makers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", help="default: every bench/traces/*.json.gz")
    parser.add_argument("--kept-out", default="grouped,tcn", help="the traces kept out of development")
    parser.add_argument("--seed", type=int, default=0, help="the regressor's seed")
    parser.add_argument("--out", default="bench/results/learnt-belief.json")
    args = parser.parse_args()
    paths = args.traces or sorted(glob.glob(os.path.join("bench", "traces", "*.json.gz")))
    kept_out = set(args.kept_out.split(",")) if args.kept_out else set()
    traces = {os.path.basename(p).removesuffix(".json.gz"): rp.Trace.load(p) for p in paths}
    data = {name: examples(trace) for name, trace in traces.items()}
    rows = {}
    for name, trace in traces.items():
        train = [m for m in traces if m != name and m not in kept_out]
        x = np.concatenate([data[m][0] for m in train])
        drop, headroom = (np.concatenate([data[m][i] for m in train]) for i in (1, 2))
        fitted = {}
        for target, y in (("drop", drop), ("headroom", headroom)):
            fitted[target] = GradientBoostingRegressor(n_estimators=200, max_depth=3, learning_rate=0.05,
                                                       subsample=0.8, random_state=args.seed).fit(x, y)
        means_drop, means_headroom = mean_at_k(x[:, 0], drop), mean_at_k(x[:, 0], headroom)
        share = {k: means_drop[k] / means_headroom[k] if means_headroom[k] > 0 else 0.0 for k in means_drop}
        hx, hdrop, hheadroom = data[name]
        bound = bound_seconds(trace)
        makers = contenders(share, means_headroom, fitted["headroom"])
        rows[name] = {"examples": len(hx), "trained on": train,
                      "skill, next-slot drop": skill(fitted["drop"], hx, hdrop, x[:, 0], drop),
                      "skill, headroom": skill(fitted["headroom"], hx, hheadroom, x[:, 0], headroom),
                      "importance, headroom": dict(zip(FEATURES, fitted["headroom"].feature_importances_.tolist(),
                                                       strict=True)),
                      "over bound": {n: median_seconds(trace, make) / bound for n, make in makers.items()}}
        row = rows[name]
        print(f"{name:26s} {row['examples']:5d} {row['skill, next-slot drop']:+6.2f} {row['skill, headroom']:+6.2f} "
              + " ".join(f"{r:6.2f}" for r in row["over bound"].values()), flush=True)
    groups = {"development": [m for m in rows if m not in kept_out], "kept out": [m for m in rows if m in kept_out]}
    summary = {group: {n: geomean(rows[m]["over bound"][n] for m in models) for n in rows[models[0]]["over bound"]}
               for group, models in groups.items() if models}
    for group, row in summary.items():
        print(f"{'geomean, ' + group:40s} " + " ".join(f"{r:6.2f}" for r in row.values()))
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"provenance": provenance.stamp(), "slot": SLOT, "features": FEATURES, "seed": args.seed,
                   "traces": paths, "groups": groups, "per_trace": rows, "geomean": summary}, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

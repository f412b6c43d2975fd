"""Record replay traces (:mod:`tunewise.lab.replay`): every task of a zoo model tuned alone, with tunewise's loop.

Run by hand, never in CI (ResNet-18, 256 trials per task, 3 seeds: several hours on 2 cores)::

    .venv/bin/python bench/record_traces.py --model resnet18 --trials 256 --seeds 3
    .venv/bin/python bench/record_traces.py --model /tmp/heldout/vit.pt2 --trials 128 --seeds 3  # traces/vit.json.gz
    python3 bench/record_traces.py --model resnet18 --target cuda --trials 64 --seeds 1   # on GPU 0

``--target`` takes what ``tunewise tune --target`` takes (default: this CPU); a GPU's trace is written to
``bench/traces/MODEL-GPU.json.gz``, the GPU named (``nvidia-h100-80gb-hbm3``), and its meta holds the GPU's
description (:func:`tunewise.target.cuda_description`).

For each seed ``s`` and each task ``k``, a :class:`tunewise.tuning.session.Session` tunes a one-task model (the
extracted model with only task ``k``, by ``dataclasses.replace``) in a fresh in-memory store (so no search
seeds from another recording), with its own XGBoost cost model, search seed ``s``,
``Budget(max_trials=trials)`` and the session's default slot of 16 trials; it stops early if the task's
search space runs out. Each trial's latency is what the session recorded (``inf`` for a failure). Each
slot's cost is the session clock between the end of the previous slot (or the start) and the end of this
one, less the scheduler's decision time: the search, the builds and runs, the records and the cost-model
update, shared equally by the slot's trials. The default latencies are measured once, by the extraction,
with the same :class:`tunewise.tuning.measure.MeasureConfig` as the trials.

Writes ``bench/traces/MODEL.json.gz`` (or ``--out``) after each task, so a long recording can be stopped and
still leave what it finished: the seeds done, and the tasks done of the seed under way in the meta's
``partial_seed`` (no replay reads it). ``--resume`` appends to that file instead (a recording spread over
several sittings, such as a GPU lent for minutes): it keeps the file's tasks, default latencies and settings,
refuses a file whose tasks are not this extraction's or whose trials per task differ, finishes the partial
seed from its first missing task (it counts as one of ``--seeds``) and records the seeds that follow.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import time

import provenance

from tunewise import callbacks, stores
from tunewise import target as targets
from tunewise.job import prepare
from tunewise.lab.replay import TaskRun, Trace, TraceTask
from tunewise.settings import RunSettings
from tunewise.tuning import session, tvm_env


class TrialCosts(callbacks.Callback):
    """Each trial's cost: its slot's session-clock time since the slot before, less the scheduler's decision
    time, shared equally by the slot's trials."""

    def __init__(self):
        self.costs: list[float] = []
        self._last_end = 0.0

    def slot_recorded(self, event: callbacks.SlotEvent, snapshot) -> None:
        cost = snapshot.elapsed - self._last_end - event.decision_seconds
        self.costs.extend([cost / event.trials] * event.trials)
        self._last_end = snapshot.elapsed


def record_task(model, k: int, trials: int, measurer, seed: int) -> TaskRun:
    """Task ``k`` of ``model`` tuned alone for up to ``trials`` trials: each trial's latency and cost."""
    alone = dataclasses.replace(model, tasks=(model.tasks[k],), task_mods=(model.task_mods[k],))
    settings = RunSettings(source=model.name, scheduler="sequential", budget=session.Budget(max_trials=trials),
                           seed=seed)
    costs = TrialCosts()
    store = stores.create("sqlite://")
    try:
        loop = prepare.open_session(alone, settings, store=store, measurer=measurer, callbacks=[costs])
        loop.run()
        return TaskRun(tuple(t.latency for t in loop.trials), tuple(costs.costs))
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--trials", type=int, default=256, help="trials per task and seed")
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds to record")
    parser.add_argument("--out", default=None, help="default: bench/traces/MODEL.json.gz")
    parser.add_argument("--resume", action="store_true", help="append seeds to the trace already in --out")
    parser.add_argument("--target", default=None, help="what tunewise tune --target takes (default: this CPU)")
    args = parser.parse_args()
    target = targets.resolve(args.target)
    targets.check_runnable(target)
    tvm_env.prepare(target.kind.name)
    device = targets.cuda_description() if targets.is_gpu(target) else None
    suffix = "" if device is None else "-" + re.sub(r"[^a-z0-9]+", "-", device["name"].lower()).strip("-")
    name = os.path.splitext(os.path.basename(args.model))[0]  # a zoo name, or a .pt2/.onnx file's stem
    out = args.out or os.path.join("bench", "traces", f"{name}{suffix}.json.gz")

    settings = RunSettings(source=args.model)
    config = settings.measure
    measurer = prepare.make_measurer(target, settings)
    model = prepare.load_model(args.model, settings, target=target, measurer=measurer)
    trace_tasks = tuple(TraceTask(t.name, t.weight, t.flops, t.default_latency) for t in model.tasks)
    meta = {"target": str(target), "trials_per_task": args.trials, "trials_per_slot": 16,
            "measure": dataclasses.asdict(config), "evaluator": repr(measurer.evaluator),
            "recorded": [provenance.stamp()], **({} if device is None else {"device": device})}
    runs: list = []
    partial: list = []  # the task runs done of the seed under way
    if args.resume:
        old = Trace.load(out)
        if [(t.name, t.weight) for t in old.tasks] != [(t.name, t.weight) for t in trace_tasks]:
            raise SystemExit(f"{out}: its tasks are not those of {args.model} as extracted now")
        for key in ("trials_per_task", "evaluator"):
            if old.meta.get(key, meta[key]) != meta[key]:
                raise SystemExit(f"{out}: recorded with {key} {old.meta[key]}, not {meta[key]}")
        trace_tasks, runs = old.tasks, list(old.runs)
        recorded = old.meta.get("recorded", [])
        recorded = [recorded] if isinstance(recorded, str) else recorded
        meta = {**meta, **old.meta, "recorded": [*recorded, *meta["recorded"]]}
        partial = [TaskRun.from_json(r) for r in meta.pop("partial_seed", [])]
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    for seed in range(len(runs), len(runs) + args.seeds):
        for k in range(len(partial), len(model.tasks)):
            task = model.tasks[k]
            start = time.perf_counter()
            run = record_task(model, k, args.trials, measurer, seed)
            partial.append(run)
            best = min(run.latencies, default=math.inf)
            print(f"seed {seed} task {k + 1}/{len(model.tasks)} {task.name}: {len(run.latencies)} trials, "
                  f"best {best * 1e6:.1f} us (default {task.default_latency * 1e6:.1f} us), "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
            if k + 1 < len(model.tasks):
                partial_seed = [r.to_json() for r in partial]
                Trace(name, trace_tasks, tuple(runs), {**meta, "partial_seed": partial_seed}).save(out)
        runs.append(tuple(partial))
        partial = []
        Trace(name, trace_tasks, tuple(runs), meta).save(out)
        print(f"saved {out} with {len(runs)} seed(s)", flush=True)
    measurer.close()


if __name__ == "__main__":
    main()

"""Benchmark: stock MetaSchedule against tunewise at its best settings, for the same wall-clock budget.

::

    .venv/bin/python bench/headline.py --models resnet18,mobilenetv2,transformer --minutes 30
    .venv/bin/python bench/headline.py --models tiny-cnn,unet,model.onnx,exported.pt2 --minutes 1

``--models`` takes zoo names, ``.pt2`` and ``.onnx`` files (a file's results go under its file name,
``model.onnx``), and the held-out models' names (``unet``, ``vit``, ``mobile-silu``, ``tcn``, ``grouped``,
``efficientnet-b0``, ``yolo``), each written by :mod:`heldout_models` as its ``.pt2`` file, with weights seeded
by ``--seed``, into a temporary folder.

Per model: one import, one extraction and one measurement of the default latencies, shared by both arms;
PyTorch eager, onnxruntime and ``torch.compile`` (inductor, its default mode) timed one after the other in a
fresh process (:func:`tunewise.delivery.timing.reference_latencies`), ``torch.compile``'s compilation (its first call,
with an empty inductor cache) timed apart. Then, one after the other, each arm tunes from an empty database
for ``--minutes`` of tuning time:

- ``stock``: ``stock.tune``, ``ms.tune_tasks`` with the gradient task scheduler and its defaults (64 trials per
  iteration, XGBoost, evolutionary search, ``LocalBuilder``/``LocalRunner``), changed only by the build function that
  skips the tensor-intrinsic import (without it every build times out here). It is stopped once its time is
  up and every batch it measured by then is recorded (:func:`run_stock`: its warm-up round hands every task a
  batch before any is recorded, so its checkpoints within that round find no record, and are taken at its end).
- ``tunewise``: a session with the settings ``--scheduler``, ``--cost-model``, ``--share``, ``--filter`` and
  the defaults of :class:`tunewise.settings.RunSettings` for the rest.

At each of ``--checkpoints`` (minutes of tuning time, those within the budget) and at the end, the model is
compiled with the arm's best records so far, verified and timed in a fresh process
(:meth:`tunewise.tuning.model_checks.ModelCheck.measure`, the same for both arms); the clock stops meanwhile, so neither
arm's tuning time includes its checkpoints. Beside that *compiled* curve each arm has its estimate (the sum of
the tasks' best latencies, weighted), after every batch.

Reported per model and arm: ``ttq5_s``, the tuning time of the first checkpoint within 5 % of the best final
compiled latency of either arm (:func:`tunewise.lab.curves.time_to_quality`), ``final_ms`` (the last check),
``trials_per_min``, and ``split`` (seconds of search, build and measurement; for ``stock``, build and
measurement are the wall time of its builder's and runner's calls, search the rest); per model ``ttq5_ratio``
(stock's ``ttq5_s`` over ours), ``onnxruntime_ms``, ``eager_ms``, ``torch_compile_ms`` and
``torch_compile_s`` (the seconds of its compilation; these three ``None`` for an ``.onnx`` file, which has no
PyTorch model). The ``tunewise`` arm also reports ``delivered``: what ``tunewise tune`` would save, the final
records' model and the fastest earlier check's timed side by side in one fresh process, the faster kept, with
onnxruntime and PyTorch eager taking turns with them round by round, and the kept model's median ratio to
each in the same round (:func:`delivered`). ``--out`` (default
``bench/results/headline.json``) holds them with the command line, the commit and the CPU model
(:mod:`provenance`); it is written after every arm, and ``--resume`` makes only the arms it lacks; ``--arms`` runs
only those named (``--arms tunewise``: our curve beside the references, with no stock run). ``--keep DIR``
keeps each ``tunewise`` arm's store as ``DIR/MODEL-seedS.db``, to study its records afterwards
(``bench/studies/estimate/estimate_gap.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import tempfile
import time

import heldout_models
import provenance
import stock

from tunewise import stores
from tunewise import target as targets
from tunewise.callbacks import Callback
from tunewise.delivery import timing
from tunewise.delivery.finish import steadiest
from tunewise.errors import InputError
from tunewise.importing import frontend
from tunewise.job import prepare
from tunewise.lab.curves import ratio, time_to_quality
from tunewise.lowering import tasks
from tunewise.settings import RunSettings
from tunewise.tuning import tvm_env
from tunewise.tuning.model_checks import ModelCheck
from tunewise.tuning.session import Budget

ARMS = ("stock", "tunewise")
REFERENCES = {"eager_ms": "torch_eager", "onnxruntime_ms": "onnxruntime", "openvino_ms": "openvino",
              "openvino_f32_ms": "openvino_f32", "torch_compile_ms": "torch_compile"}


class Checkpoints(ModelCheck):
    """A check at each of ``times`` (seconds of tuning time, its own checks not counted)."""

    def __init__(self, times: list[float]):
        super().__init__(max(times, default=1.0))
        self.times, self.spent = sorted(times), 0.0

    def tuned(self, elapsed: float) -> float:
        return elapsed - self.spent

    def due(self, snapshot, seconds_left: float = math.inf) -> bool:
        passed = [t for t in self.times if t <= self.tuned(snapshot.elapsed)]
        self.times = self.times[len(passed):]
        return bool(passed)

    def checked(self, elapsed: float, seconds: float) -> None:
        super().checked(elapsed, seconds)
        self.spent += seconds


class PhaseClock(Callback):
    """Seconds per phase of the session's slots (the default latencies count as measurement)."""

    def __init__(self):
        self.seconds = {"search": 0.0, "build": 0.0, "measure": 0.0}
        self._phase, self._since = None, 0.0

    def _close(self) -> None:
        if self._phase is not None:
            key = "measure" if self._phase == "default latencies" else self._phase
            self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - self._since
        self._phase = None

    def slot_phase(self, snapshot, task, phase) -> None:
        self._close()
        self._phase, self._since = phase, time.perf_counter()

    def slot_recorded(self, event, snapshot) -> None:
        self._close()

    def model_measured(self, point, snapshot) -> None:
        self._close()


def run_ours(model, settings: RunSettings, measurer, seconds: float, times: list[float], store_url: str,
             references: timing.References) -> dict:
    store = stores.create(store_url)
    checks, phases, origin = Checkpoints(times), PhaseClock(), []

    def deadline(snapshot) -> float:
        if not origin:
            origin.append(time.perf_counter() - snapshot.elapsed)
        return origin[0] + seconds + checks.spent

    loop = prepare.open_session(model, settings, store=store, measurer=measurer, callbacks=[phases],
                                deadline=deadline, resolved=prepare.Resolved(checker=checks))
    loop.run()
    loop.check_model()
    points = store.get_model_latencies(loop.run_id)
    compiled = [(tuning_clock(p.elapsed, points), p.latency * 1e3) for p in points]
    slots = store.get_checkpoints(loop.run_id)
    curve = [(0.0, model.untuned_latency() * 1e3)] + [(tuning_clock(c.elapsed, points), c.latency * 1e3)
                                                       for c in slots]
    tuning, trials = compiled[-1][0], len(store.get_trials(loop.run_id, records=False))
    return {"compiled": compiled, "estimate": curve, "trials": trials, "tuning_s": tuning,
            "trials_per_min": 60 * trials / tuning, "split": phases.seconds, "final_ms": compiled[-1][1],
            "slots": [(c.task, c.trials, c.seconds) for c in slots],
            "delivered": delivered(model, checks, loop.ledger.trials, points, references)}


def delivered(model, checks: ModelCheck, trials: int, points, references: timing.References) -> dict | None:
    """What ``tunewise tune`` saves as the artifact: the model of the final records and the fastest model an
    earlier check measured, timed side by side in one fresh process (:data:`tunewise.delivery.timing.ROUNDS` rounds,
    alternating) in turn with ``references`` in another, and the faster kept, with the references' latencies
    in those rounds (``onnxruntime_ms``, ``eager_ms``) and the kept model's median ratio to each in the same
    round (``to_onnxruntime``, ``to_eager``; :func:`tunewise.delivery.timing.time_side_by_side`), timed again as
    ``tune`` does where the model a check read times in a slow stretch (:func:`tunewise.delivery.finish.steadiest`, with
    no time limit; ``timings``: how many were made). ``None`` when the final check failed."""
    final, fastest = checks.holding(trials), checks.fastest_before(trials)
    if final is None:
        return None
    candidates = {"final": final} | ({} if fastest is None else {"fastest_checked": fastest})
    read = list(candidates).index("final" if fastest is None else "fastest_checked")  # the model finish reads
    side, timings = steadiest(
        lambda: timing.time_side_by_side([c.compiled for c in candidates.values()], model.inputs,
                                         references=references), read, list(candidates.values())[read].latency)
    timed = {f"{name}_ms": latency * 1e3 for name, latency in zip(candidates, side.latencies, strict=True)}
    kept = min(candidates, key=lambda name: timed[f"{name}_ms"])
    ratios = side.ratios[list(candidates).index(kept)]
    beside = {key: None if side.references.get(name) is None else side.references[name] * 1e3
              for key, name in REFERENCES.items() if name in timing.cpu_references()}
    at = None if fastest is None else next(
        (tuning_clock(p.elapsed, points) for p in points if p.trials == fastest.trials), None)
    return {**timed, "delivered_ms": timed[f"{kept}_ms"], "records": kept, "rounds": side.rounds, **beside,
            "to_onnxruntime": ratios.get("onnxruntime"), "to_eager": ratios.get("torch_eager"),
            "fastest_checked_at_s": at, "fastest_checked_trials": None if fastest is None else fastest.trials,
            "timings": timings}


def tuning_clock(elapsed: float, points) -> float:
    """A run's ``elapsed`` seconds less the seconds of its whole-model checks (``points``) ended by then."""
    return elapsed - sum(p.seconds for p in points if p.elapsed <= elapsed)


def run_stock(model, config, seconds: float, times: list[float], seed: int) -> dict:
    """Stock's gradient scheduler first hands every task a batch before it joins any (its warm-up round), and
    its database gets a batch's records only when the batch is joined. So stock is stopped in two steps: once
    its time is up, its builder fails every new candidate at once ("time is up"), which lets the scheduler
    join, and record, every batch measured in time; the next build after that ends the run (or, should some
    batch never be joined, the build after twice as many refusals as tasks). Its tuning time
    ends when its time is up; ``trials`` are the candidates it measured by then. A checkpoint falls at the
    first join after its time (only joins add records)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    best = [math.inf] * len(model.tasks)
    checker, pending = ModelCheck(), sorted(times)
    split = {"search": 0.0, "build": 0.0, "measure": 0.0}
    clock = {"start": 0.0, "paused": 0.0, "stopped": None}
    batches = {"built": 0, "joined": 0, "measured": 0, "refused": 0}
    curve, compiled = [], []
    time_up = "time is up"

    class TimeUp(Exception):
        pass

    def tuned() -> float:
        if clock["stopped"] is not None:
            return clock["stopped"]
        return time.perf_counter() - clock["start"] - clock["paused"]

    def estimate() -> float:
        return sum(t.weight * min(b, t.default_latency) for t, b in zip(model.tasks, best, strict=True))

    def checkpoint(database) -> None:
        at, start = tuned(), time.perf_counter()
        latency, _ = checker.measure(model, database)
        compiled.append((at, latency * 1e3))
        clock["paused"] += time.perf_counter() - start

    @contextlib.contextmanager
    def timing(phase: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            split[phase] += time.perf_counter() - start

    @derived_object
    class TimedBuilder(ms.builder.PyBuilder):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def build(self, build_inputs):
            if clock["stopped"] is None and tuned() >= seconds:
                clock["stopped"] = tuned()
            if clock["stopped"] is not None:
                # a scheduler that joins only the task it picks may never come back to some batch: give up on
                # it after every task had two chances
                if batches["joined"] == batches["built"] or batches["refused"] > 2 * len(model.tasks):
                    raise TimeUp
                batches["refused"] += 1
                return [ms.builder.BuilderResult(None, time_up) for _ in build_inputs]
            batches["built"] += 1
            with timing("build"):
                return self.inner.build(build_inputs)

    @derived_object
    class TimedRunner(ms.runner.PyRunner):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def run(self, runner_inputs):  # LocalRunner measures within the call: its futures come back done
            batches["measured"] += len(runner_inputs)
            with timing("measure"):
                return self.inner.run(runner_inputs)

    def track(task_id, candidates, builder_results, runner_results) -> None:
        if any(result.error_msg != time_up for result in builder_results):
            batches["joined"] += 1
        for result in runner_results:
            seconds = stock.mean_seconds(result)
            if seconds is not None:
                best[task_id] = min(best[task_id], seconds)
        curve.append((tuned(), estimate() * 1e3))
        passed = [t for t in pending if t <= tuned()]
        del pending[:len(passed)]
        if passed and clock["stopped"] is None:
            checkpoint(database)

    tasks, database = stock.contexts(model, seed), stock.database()
    builder, runner = TimedBuilder(stock.builder()), TimedRunner(stock.runner(config))
    clock["start"] = time.perf_counter()
    curve.append((0.0, estimate() * 1e3))
    try:
        stock.tune(model, tasks, database, builder, runner, on_batch=track)
    except Exception:
        if clock["stopped"] is None:
            raise
    checkpoint(database)
    tuning, trials = clock["stopped"], batches["measured"]
    split["search"] = tuning - split["build"] - split["measure"]
    return {"compiled": compiled, "estimate": curve, "trials": trials, "tuning_s": tuning,
            "trials_per_min": 60 * trials / tuning, "split": split, "final_ms": compiled[-1][1]}


def sources(names: list[str], folder: str, seed: int) -> dict[str, str]:
    """``--models``' names by their keys in the results: a zoo name as it is; a ``.pt2`` or ``.onnx`` file under
    its file name; a held-out model as its ``.pt2`` file, written to ``folder`` with weights seeded by ``seed``."""
    models = {}
    for name in names:
        if name in heldout_models.MODELS:
            models[name] = heldout_models.write(name, folder, seed)[0]
            continue
        try:
            frontend.check_source(name)
        except InputError as err:
            raise SystemExit(f"{err}; or a held-out model ({', '.join(heldout_models.MODELS)})") from None
        models[os.path.basename(name) if name.endswith((".pt2", ".onnx")) else name] = name
    return models


def time_references(entry: dict, source: str, inputs, seed: int) -> None:
    """Fill in the entry's references (:data:`REFERENCES`, in milliseconds) and ``torch_compile_s``."""
    timed = timing.reference_latencies(source, inputs, seed=seed, torch_compile=True)
    for key, name in REFERENCES.items():
        entry[key] = None if timed.get(name) is None else timed[name] * 1e3  # openvino: where installed
    entry["torch_compile_s"] = timed["torch_compile_seconds"]


def summarise(entry: dict) -> None:
    """Fill in each arm's ``ttq5_s`` and the model's ``ttq5_ratio`` once both arms ran."""
    if not all(arm in entry for arm in ARMS):
        return
    goal, times = time_to_quality({arm: entry[arm]["compiled"] for arm in ARMS}, within=0.05)
    entry["goal_ms"] = goal
    for arm in ARMS:
        entry[arm]["ttq5_s"] = times[arm]
    entry["ttq5_ratio"] = ratio(times["stock"], times["tunewise"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet18,mobilenetv2,transformer",
                        help="zoo names, .pt2/.onnx files and held-out models' names (bench/heldout_models.py)")
    parser.add_argument("--minutes", type=float, default=30.0, help="tuning time of each arm on each model")
    parser.add_argument("--checkpoints", default="2,5,10,20", help="minutes of tuning time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scheduler", default=RunSettings.scheduler)
    parser.add_argument("--cost-model", default=RunSettings.cost_model)
    parser.add_argument("--share", default=RunSettings.share)
    parser.add_argument("--filter", default="cold", help="a candidate filter (tunewise.filters), or none")
    parser.add_argument("--out", default="bench/results/headline.json")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--keep", metavar="DIR", help="keep each tunewise arm's store in DIR (MODEL-seedS.db)")
    parser.add_argument("--arms", default=",".join(ARMS), help="the arms to run, of " + ", ".join(ARMS))
    args = parser.parse_args()
    asked = args.arms.split(",")
    if not set(asked) <= set(ARMS):
        raise SystemExit(f"--arms takes {' and '.join(ARMS)}, not {args.arms!r}")
    arms = [arm for arm in ARMS if arm in asked]
    seconds = 60 * args.minutes
    times = [60 * float(m) for m in args.checkpoints.split(",") if m and 60 * float(m) < seconds]
    target = targets.resolve(None)
    header = {"cpu": provenance.cpu_model(), "target": str(target), "minutes": args.minutes, "seed": args.seed,
              "checkpoints_min": [t / 60 for t in times],
              "tunewise_settings": {"scheduler": args.scheduler, "cost_model": args.cost_model, "share": args.share,
                                    "filter": args.filter}}
    models = {}
    if args.resume and os.path.exists(args.out):
        with open(args.out) as f:
            kept = json.load(f)
        if any(kept.get(key) != value for key, value in header.items()):
            raise SystemExit(f"{args.out} was made with other settings or on another CPU")
        models = kept["models"]

    def save() -> None:
        with open(args.out, "w") as f:
            json.dump(provenance.stamped({**header, "models": models}), f, indent=1)

    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    tvm_env.prepare("llvm")
    with tempfile.TemporaryDirectory(prefix="headline-") as folder:
        for name, source in sources(args.models.split(","), folder, args.seed).items():
            entry = models.setdefault(name, {})
            if all(arm in entry for arm in arms):
                continue
            settings = RunSettings(source=source, seed=args.seed, budget=Budget(max_trials=10**7),
                                   scheduler=args.scheduler, cost_model=args.cost_model, share=args.share,
                                   candidate_filter=None if args.filter == "none" else args.filter)
            imported = frontend.load(source, seed=args.seed)
            if not all(key in entry for key in (*REFERENCES, "torch_compile_s")):
                time_references(entry, source, imported.inputs, args.seed)
            measurer = prepare.make_measurer(target, settings)
            try:
                model = tasks.extract(imported, target, level=settings.level, measurer=measurer)
                for arm in arms:
                    if arm in entry:
                        continue
                    if arm == "stock":
                        entry[arm] = run_stock(model, settings.measure, seconds, times, args.seed)
                    else:
                        url = "sqlite://"
                        if args.keep:  # a store of its own: records of an earlier run would join its best
                            path = os.path.join(os.path.abspath(args.keep), f"{name}-seed{args.seed}.db")
                            with contextlib.suppress(FileNotFoundError):
                                os.remove(path)
                            url = f"sqlite:///{path}"
                        entry[arm] = run_ours(model, settings, measurer, seconds, times, url,
                                              timing.References(source, seed=args.seed))
                    entry[arm]["provenance"] = provenance.stamp()
                    entry["cpu"] = entry[arm]["provenance"]["cpu"]
                    entry["commit"] = entry[arm]["provenance"]["commit"]
                    summarise(entry)
                    save()
                    print(name, arm, {k: v for k, v in entry[arm].items() if k not in ("compiled", "estimate")},
                          flush=True)
            finally:
                measurer.close()
            print(name, {k: v for k, v in entry.items() if k not in ARMS}, flush=True)


if __name__ == "__main__":
    main()

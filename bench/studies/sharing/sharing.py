"""Benchmark: selective tuning against tuning every task, and a new model started warm from another's records.

::

    .venv/bin/python bench/studies/sharing/sharing.py --models resnet18,mobilenetv2,vgg11,transformer --seeds 0,1

**Modes.** Per model and seed, one run in each sharing mode (:data:`tunewise.sharing.MODES`: ``off``,
``same-anchor``, ``selective``), each in an empty store, run to convergence at the same per-task budget: every
searched task gets up to ``--per-task`` trials and finishes after ``--patience`` trials without improvement
(:class:`tunewise.tuning.session.Budget`). As the schedule-sharing seed reports it, per model (medians over seeds):

- ``time_share``: ``selective``'s tuning time over ``off``'s;
- ``performance_share``: ``off``'s compiled latency over ``selective``'s (1.0: as fast as tuning every task);
  with ``--keep``, from ``side_by_side``: once a model's runs are all made, each is compiled again from its
  kept store and all are timed together in alternating rounds in one fresh process, so that the comparison
  does not ride on the machine's state when each run ended; else from each run's own final latency;

their means over the models (``average``), and the same two figures for ``same-anchor``.

**Warm start.** ``--warm-from`` (ResNet-18) is tuned for ``--warm-minutes`` into a store; then each of
``--warm-models`` (MobileNetV2, VGG-11) is tuned for as long again, cold (an empty store, no warm start) and
warm (a copy of that store), with a whole-model check every ``--check-every`` seconds. ``cold_s`` and
``warm_s``: the tuning time of the first measurement of the model within 10 % of the cold run's final
latency (``null`` when none was): the checks, then the final artifact at the end of tuning, so that a cold run
always reaches its own final latency, at the latest when it ends.

Every run is saved in ``--out`` (default ``bench/results/sharing.json``, with the command line, the commit and
the CPU model: :mod:`provenance`) as soon as it is made. ``--resume`` keeps what ``--out`` holds (made with
the same settings) and makes only the missing runs, so the models can be run a few at a time
(``--models vgg11 --warm-models ''``); each model records its CPU target, since its runs compare with each
other only when made on one machine, and a model left incomplete on another target is made again.
``--keep DIR`` keeps each run's store there (``MODEL-MODE-SEED.db``, ``MODEL-cold-SEED.db``,
``MODEL-warm-SEED.db``) to study its records afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

import tunewise
from tunewise import target as targets
from tunewise.tuning.session import Budget

MODES = ("off", "same-anchor", "selective")
WITHIN = 0.10


def tune(name: str, store: str, output: str, **options) -> dict:
    result = tunewise.tune(name, store=store, output=output, progress=False, compare_torch=False, **options)
    return {"tuning_s": result.tuning_seconds, "final_latency_ms": result.tuned_latency * 1e3,
            "trials": result.trials, "shared": result.shared,
            "checks": [(p.elapsed, p.latency * 1e3) for p in result.measured],
            "provenance": provenance.stamp()}


def side_by_side(name: str, stores_by_run: dict) -> dict:
    """The compiled latencies (ms) of a model's runs, each rebuilt from its store ``stores_by_run[(mode, seed)]``
    (a SQLite path), checked against the model's reference outputs, and timed together in alternating rounds in
    one fresh process (:func:`tunewise.delivery.timing.time_models`)."""
    from tunewise import stores
    from tunewise.delivery import compile as compiler
    from tunewise.delivery import timing
    from tunewise.importing import frontend
    from tunewise.lowering import tasks

    model = tasks.extract(frontend.load(name), targets.resolve(None))
    compiled = []
    for path in stores_by_run.values():
        store = stores.create(f"sqlite:///{path}")
        [run] = store.get_runs()
        tuned = model.with_default_latencies(t.default_latency for t in store.get_tasks(run.id))
        compiled.append(compiler.compile_checked(tuned, stores.StoreDatabase(store, target=tuned.target))[0])
    latencies, rounds = timing.time_models(compiled, model.inputs)
    timed = {}
    for (mode, seed), latency in zip(stores_by_run, latencies, strict=True):
        timed.setdefault(mode, {})[seed] = latency * 1e3
    return {"latency_ms": timed, "rounds": rounds, "provenance": provenance.stamp()}


def within(checks: list, goal_ms: float) -> float | None:
    """The tuning time of the first check at or under ``goal_ms``, or ``None``."""
    return next((elapsed for elapsed, latency in checks if latency <= goal_ms), None)


def shares(by_mode: dict, timed: dict | None = None) -> dict:
    """``selective``'s time and performance shares (medians over the seeds every mode ran), and under
    ``same_anchor`` that mode's. The performance compares the runs' latencies timed side by side (``timed``:
    :func:`side_by_side`'s ``latency_ms``) when given, else each run's own final latency."""
    seeds = sorted(set.intersection(*(set(runs) for runs in by_mode.values()))) if len(by_mode) == len(MODES) else []
    if not seeds:
        return {}
    off = by_mode["off"]

    def latency(mode: str, seed: int) -> float:
        return timed[mode][seed] if timed else by_mode[mode][seed]["final_latency_ms"]

    def share(mode: str) -> dict:
        runs = by_mode[mode]
        return {"time_share": statistics.median(runs[s]["tuning_s"] / off[s]["tuning_s"] for s in seeds),
                "performance_share": statistics.median(latency("off", s) / latency(mode, s) for s in seeds),
                "seeds": seeds}

    return share("selective") | {"same_anchor": share("same-anchor")}


def warm_summary(runs: dict) -> dict:
    """``cold_s`` and ``warm_s`` (medians over the seeds both ran; ``None`` where a run never came within
    10 % of its cold run's final latency, at a check or at its end)."""
    seeds = sorted(set(runs.get("cold", {})) & set(runs.get("warm", {})))
    if not seeds:
        return {}

    def reached(run: dict, goal_ms: float) -> float | None:
        return within([*run["checks"], (run["tuning_s"], run["final_latency_ms"])], goal_ms)

    times = {arm: [reached(runs[arm][s], (1 + WITHIN) * runs["cold"][s]["final_latency_ms"]) for s in seeds]
             for arm in ("cold", "warm")}
    return {f"{arm}_s": None if None in values else statistics.median(values) for arm, values in times.items()} | {
        "seeds": seeds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet18,mobilenetv2,vgg11,transformer")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--per-task", type=int, default=64)
    parser.add_argument("--patience", type=int, default=32)
    parser.add_argument("--warm-from", default="resnet18")
    parser.add_argument("--warm-models", default="mobilenetv2,vgg11")
    parser.add_argument("--warm-minutes", type=float, default=10.0)
    parser.add_argument("--check-every", type=float, default=60.0)
    parser.add_argument("--out", default="bench/results/sharing.json")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "tunewise-sharing"),
                        help="where the warm-from store is kept between invocations")
    parser.add_argument("--keep", metavar="DIR", help="keep each run's store in DIR")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    target = str(targets.resolve(None))
    header = {"per_task": args.per_task, "patience": args.patience, "warm_from": args.warm_from,
              "warm_minutes": args.warm_minutes, "check_every_s": args.check_every}
    results = {"modes": {}, "warm": {}}
    if args.resume and os.path.exists(args.out):
        with open(args.out) as f:
            kept = json.load(f)
        if any(kept.get(key) != value for key, value in header.items()):
            raise SystemExit(f"{args.out} was made with other settings")
        for part, arms in (("modes", MODES), ("warm", ("cold", "warm"))):
            for name, entry in kept[part].items():
                runs = {arm: {int(s): run for s, run in by_seed.items()} for arm, by_seed in entry["runs"].items()}
                complete = all(set(seeds) <= set(runs.get(arm, {})) for arm in arms)
                if entry["target"] == target or complete:  # a model's runs compare only on one machine
                    results[part][name] = {"target": entry["target"], "cpu": entry["cpu"], "runs": runs}
                    if "side_by_side" in entry:
                        timed = entry["side_by_side"]
                        results[part][name]["side_by_side"] = {**timed, "latency_ms": {
                            mode: {int(s): ms for s, ms in by_seed.items()}
                            for mode, by_seed in timed["latency_ms"].items()}}
                else:
                    print(f"{name}: its {part} runs were made on {entry['target']}: made again here", flush=True)

    def save() -> None:
        modes = {name: {**entry, **shares(entry["runs"], entry.get("side_by_side", {}).get("latency_ms"))}
                 for name, entry in results["modes"].items()}
        done = [entry for entry in modes.values() if "time_share" in entry]
        out = {**header, "modes": modes,
               "average": {key: statistics.mean(entry[key] for entry in done)
                           for key in ("time_share", "performance_share")} if done else {},
               "warm": {name: {**entry, **warm_summary(entry["runs"])} for name, entry in results["warm"].items()}}
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(provenance.stamped(out), f, indent=1)

    def model_runs(part: str, name: str) -> dict:
        entry = results[part].setdefault(name, {"target": target, "cpu": provenance.cpu_model(), "runs": {}})
        return entry["runs"]

    os.makedirs(args.work, exist_ok=True)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:

        def fresh(file: str) -> str:
            """The path of a new store named ``file``: in ``--keep`` (what a run cut short left there removed)
            or in the scratch folder."""
            path = os.path.join(os.path.abspath(args.keep or scratch), file)
            for leftover in (path, f"{path}-wal", f"{path}-shm"):
                if os.path.exists(leftover):
                    os.remove(leftover)
            return path

        for name in filter(None, args.models.split(",")):
            for seed in seeds:
                for mode in MODES:
                    runs = model_runs("modes", name).setdefault(mode, {})
                    if seed in runs:
                        continue
                    runs[seed] = tune(name, f"sqlite:///{fresh(f'{name}-{mode}-{seed}.db')}", f"{scratch}/out",
                                      budget=Budget(per_task_trials=args.per_task, patience=args.patience),
                                      share=mode, warm_start=False, seed=seed)
                    print(name, mode, seed, {k: v for k, v in runs[seed].items() if k != "provenance"}, flush=True)
                    save()
            entry = results["modes"][name]
            kept = {(mode, seed): os.path.join(args.keep, f"{name}-{mode}-{seed}.db") for mode in MODES
                    for seed in seeds} if args.keep else {}
            made = sorted([mode, seed, run["provenance"]["date"]] for mode in MODES  # the runs timed, by date
                          for seed, run in entry["runs"].get(mode, {}).items() if seed in seeds)
            if (kept and all(os.path.exists(path) for path in kept.values())
                    and entry.get("side_by_side", {}).get("runs") != made):
                entry["side_by_side"] = {**side_by_side(name, kept), "runs": made}
                print(name, "side by side", entry["side_by_side"]["latency_ms"], flush=True)
                save()
        machine = hashlib.sha256(target.encode()).hexdigest()[:12]  # a store tuned on this CPU target
        source = os.path.join(args.work, f"{args.warm_from}-{args.warm_minutes:g}min-{machine}.db")
        timed = {"budget": Budget(time_budget=60 * args.warm_minutes), "check_every": args.check_every}
        if args.warm_models and not os.path.exists(source):
            if os.path.exists(f"{source}.part"):  # what an invocation cut short left
                os.remove(f"{source}.part")
            tune(args.warm_from, f"sqlite:///{source}.part", f"{scratch}/out", warm_start=False, seed=0, **timed)
            os.replace(f"{source}.part", source)
        for name in filter(None, args.warm_models.split(",")):
            for seed in seeds:
                for arm in ("cold", "warm"):
                    runs = model_runs("warm", name).setdefault(arm, {})
                    if seed in runs:
                        continue
                    store = fresh(f"{name}-{arm}-{seed}.db")
                    if arm == "warm":
                        shutil.copy(source, store)
                    runs[seed] = tune(name, f"sqlite:///{store}", f"{scratch}/out", warm_start=arm == "warm",
                                      seed=seed, **timed)
                    print(name, arm, seed, runs[seed]["final_latency_ms"], flush=True)
                    save()
    save()
    with open(args.out) as f:
        saved = json.load(f)
    print(json.dumps({part: {name: {k: v for k, v in entry.items() if k != "runs"}
                             for name, entry in saved[part].items()} for part in ("modes", "warm")}, indent=1))


if __name__ == "__main__":
    main()

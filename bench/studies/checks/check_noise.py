"""Whole-model checks replayed on a finished run: how far a check's latency moves when the same records are
timed again, against how far it moves as the run's records improve.

A whole-model check (:mod:`tunewise.tuning.model_checks`) compiles the model with the run's best records so far and
times it
in one fresh process. This takes a finished run from a store, and for each cut (every ``--every`` seconds of its
tuning time, and its end) compiles the model as a check at that moment would have: with the trials measured
up to the cut, each task's best record applied if it beats the task's default latency, as the run measured
those. Then it times every cut's model ``--rounds`` times, each time in a fresh process of its own as a check
does (:func:`tunewise.delivery.timing.time_models`), cuts in turn within a round; and once more all cuts together in one
fresh process, in alternating rounds. Per cut: the loop's estimate (the weighted sum of the best latencies, as
the run's checkpoint of that slot stored it), every fresh-process latency, and the one-process latency.

    PYTHONPATH=bench .venv/bin/python bench/studies/checks/check_noise.py --store sqlite:///STORE.db --run 1 \\
        --out bench/results/check-noise-resnet18.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
from tvm.s_tir import meta_schedule as ms

from tunewise import stores
from tunewise import target as targets
from tunewise.delivery import compile as compiler
from tunewise.delivery import timing
from tunewise.job import prepare
from tunewise.settings import RunSettings


def cut_database(store, trials, upto_slot: int):
    """A MetaSchedule database of the successful trials of slots up to ``upto_slot``."""
    database = ms.database.MemoryDatabase()
    stores.StoreDatabase(store).copy_into(database, [t for t in trials if t.slot <= upto_slot])
    return database


def cut_moments(checkpoints, every: float) -> list[tuple[float, int]]:
    """``(tuning time, the last slot ended by then)`` every ``every`` seconds of a run's tuning time and at its
    end (the slot ``-1`` before any ended), from the run's ``checkpoints``."""
    end = checkpoints[-1].elapsed
    moments = [every * i for i in range(1, int(end // every) + 1) if every * i < end] + [end]
    return [(moment, max((c.slot for c in checkpoints if c.elapsed <= moment + 1e-9), default=-1))
            for moment in moments]


def compile_cut(model, store, trials, slot: int):
    """``model`` (with the run's default latencies) compiled as a check after ``slot`` would have compiled it,
    and its largest error against the reference outputs (:func:`tunewise.delivery.compile.compile_checked`)."""
    return compiler.compile_checked(model, cut_database(store, trials, slot))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--every", type=float, default=120.0, help="seconds of tuning time between two cuts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    store = stores.create(args.store, read_only=True)
    spec = store.get_run(args.run)
    settings = RunSettings.from_json(spec.settings)
    model = prepare.load_model(spec.model, settings, target=targets.resolve(spec.target))
    model = model.with_default_latencies(t.default_latency for t in store.get_tasks(args.run))
    trials, checkpoints = store.get_trials(args.run), store.get_checkpoints(args.run)
    estimates = {c.slot: c.latency for c in checkpoints}  # the loop's estimate after each slot
    cuts = []
    for moment, slot in cut_moments(checkpoints, args.every):
        estimate = estimates[slot]
        compiled, error = compile_cut(model, store, trials, slot)
        cuts.append({"elapsed_s": moment, "slot": slot, "trials": sum(t.slot <= slot for t in trials),
                     "estimate_ms": estimate * 1e3, "max_error": error, "fresh_ms": [], "compiled": compiled})
        print(f"cut at {moment:.0f}s: slot {slot}, estimate {estimate * 1e3:.2f} ms", flush=True)
    for _ in range(args.rounds):
        for cut in cuts:
            (latency,), _ = timing.time_models([cut["compiled"]], model.inputs)
            cut["fresh_ms"].append(latency * 1e3)
        print("fresh:", [f"{c['fresh_ms'][-1]:.2f}" for c in cuts], flush=True)
    together, rounds = timing.time_models([c["compiled"] for c in cuts], model.inputs)
    for cut, latency in zip(cuts, together, strict=True):
        del cut["compiled"]
        cut["one_process_ms"] = latency * 1e3
        cut["fresh_median_ms"] = statistics.median(cut["fresh_ms"])
        cut["fresh_spread"] = max(cut["fresh_ms"]) / min(cut["fresh_ms"])
    result = {"store": args.store, "run": args.run, "model": spec.model, "target": spec.target,
              "every_s": args.every, "rounds": args.rounds, "one_process_rounds": rounds, "cuts": cuts}
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)
    for cut in cuts:
        print(f"{cut['elapsed_s']:6.0f}s estimate {cut['estimate_ms']:7.2f} ms | fresh "
              + " ".join(f"{x:7.2f}" for x in cut["fresh_ms"]) + f" | one process {cut['one_process_ms']:7.2f} ms")


if __name__ == "__main__":
    main()

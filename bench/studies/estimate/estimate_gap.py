"""Why the compiled model is slower than the tuning loop's estimate ``sum(weight_k * best_k)``.

Takes a finished run from a store and, for every task whose best record is applied at compile time,
re-measures that record alone: warm, as tuning measures (runs back to back, the same inputs every repeat),
and cold, one run a repeat with the CPU caches flushed of its arguments (weights included) before each. Then
compiles the model with the records, times it, and times each kernel inside it (the VM's instrument hook
around every call it makes, over ``--calls`` model calls): a kernel slower in the model than alone shows
where the gap is, and one as slow cold as in the model says its weights come from memory there. Last, in the
same process, each kernel is also called in a loop on copies of the arguments it had in the model (``loop``),
in rounds alternating with the model's calls: against ``in model`` that is what the model's surroundings cost
it, free of the host's drift from one process or second to the next, which the re-measurements in their own
runner process are not.

    python bench/studies/estimate/estimate_gap.py --store sqlite:///tunewise.db --run 1 \
        --out bench/results/estimate-gap.json
    python bench/studies/estimate/estimate_gap.py --store sqlite:///STORE.db --run 1 --model resnet18 \
        --level fold-bn  # a run
        # stored without settings (by a bench script that did not store them)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections import defaultdict

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
from stored_run import looped, open_run

from tunewise.delivery import compile as compiler
from tunewise.tuning import measure


def remeasure(measurer: measure.Measurer, records, passes: int) -> list[float]:
    """Median over ``passes`` of each record's mean latency, measured alone."""
    candidates = [r.as_measure_candidate() for r in records]
    batch = [(c.sch.mod, c.args_info) for c in candidates]
    samples = [[m.latency for m in measurer.measure(batch)] for _ in range(passes)]
    return [statistics.median(column) for column in zip(*samples, strict=True)]


def in_model(compiled: compiler.CompiledModel, inputs, calls: int, rounds: int = 5,
             loops: bool = True) -> tuple[dict, dict, float]:
    """Each function the model's VM calls (its kernels by task name, and the VM's builtins), with the seconds a
    model call spends in it (all its calls together); each one's seconds a call when called in a loop on
    copies of the arguments of its first call in the model (tensor arguments only: the builtins are left
    out); and the seconds of a model call so instrumented. Each a median over ``rounds`` rounds, a round being
    ``calls`` model calls, then ``calls`` calls of every kernel in turn: both meet the host alike, however fast
    it runs that second. ``loops=False``: the model's calls alone (no kernel looped)."""
    import tvm

    spent, started, captured = defaultdict(float), {}, {}

    def instrument(func, name, before_run, ret_value, *args):
        now = time.perf_counter()
        if before_run:
            started[name] = now
            return 0  # VMInstrumentReturnKind.NO_OP
        spent[name] += now - started.pop(name)
        if loops and name not in captured and args and all(isinstance(a, tvm.runtime.Tensor) for a in args):
            captured[name] = (func, [tvm.runtime.tensor(a.numpy(), a.device) for a in args])
        return 0

    vm, device = compiled.vm, compiled.device
    arrays = [tvm.runtime.tensor(x, device) for x in inputs]
    model_rounds, loop_rounds, seconds = defaultdict(list), defaultdict(list), []
    vm.set_instrument(instrument)  # the VM's calls only: a kernel called directly is not instrumented
    try:
        for _ in range(5):  # a warm-up
            vm["main"](*arrays)
        for _ in range(rounds):
            spent.clear()
            start = time.perf_counter()
            for _ in range(calls):
                vm["main"](*arrays)
            seconds.append((time.perf_counter() - start) / calls)
            for name, total in spent.items():
                model_rounds[name].append(total / calls)
            for name, (func, args) in captured.items():
                loop_rounds[name].append(looped(func, args, calls))
    finally:
        vm.set_instrument(None)
    median = statistics.median
    return ({name: median(v) for name, v in model_rounds.items()},
            {name: median(v) for name, v in loop_rounds.items()}, median(seconds))


def kernel_name(calls: dict, task: str) -> str | None:
    """The function of ``calls`` (:func:`in_model`) that runs task ``task``'s kernel: its own, or at the prepack
    level its function reading pre-packed weights (``None``: the model calls neither)."""
    return next((n for n in (task, task + "_prepacked") if n in calls), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="sqlite:///tunewise.db")
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--model", help="zoo name or file (default: the run's own source)")
    parser.add_argument("--level", default=None, help="graph level (default: the run's own)")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20, help="instrumented model calls (the in-model times)")
    parser.add_argument("--out", default="bench/results/estimate-gap.json")
    args = parser.parse_args()

    run = open_run(args.store, args.run, args.model, args.level)
    model, target, database = run.model, run.target, run.database
    chosen = compiler.best_records_database(model, database)

    rows, applied = [], []
    for task, mod in zip(model.tasks, model.task_mods, strict=True):
        row = {"name": task.name, "weight": task.weight, "default": task.default_latency}
        if chosen.has_workload(mod):
            record = chosen.get_top_k(chosen.commit_workload(mod), 1)[0]
            row["tuned"] = compiler.record_latency(record)
            applied.append((len(rows), record))
        rows.append(row)

    records = [r for _, r in applied]
    passes = {}
    # warm: as tuning measures (runs back to back, caches hot); cold: one run a repeat, the caches flushed of
    # its arguments (weights included) before each, which the back-to-back runs of a warm repeat would undo
    configs = {"warm": measure.MeasureConfig(repeat=3),
               "cold": measure.MeasureConfig(number=1, repeat=20, min_repeat_ms=0, enable_cpu_cache_flush=True)}
    for name, config in configs.items():
        measurer = measure.Measurer(target, config, evaluator="fixed")
        try:
            passes[name] = remeasure(measurer, records, args.passes)
        finally:
            measurer.close()
    for (i, _), warm, cold in zip(applied, passes["warm"], passes["cold"], strict=True):
        rows[i].update(warm=warm, cold=cold)

    def total(key: str) -> float:
        return sum(r["weight"] * r.get(key, r["default"]) for r in rows)

    compiled, _ = compiler.compile_checked(model, database)
    latency = compiled.time(*model.inputs, repeat=20).median
    calls, loops, call_seconds = in_model(compiled, model.inputs, args.calls)
    for row in rows:
        name = kernel_name(calls, row["name"])
        if name is not None:
            row["in_model"] = calls.pop(name) / row["weight"]
            row["loop"] = loops[name]
    result = {"store": args.store, "run": args.run, "model": model.name, "tasks": rows,
              "estimate_tuned": total("tuned"), "estimate_warm": total("warm"), "estimate_cold": total("cold"),
              "estimate_in_model": total("in_model"), "estimate_loop": total("loop"), "compiled": latency,
              "compiled_instrumented": call_seconds, "in_model_other": calls}
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)
    print(f"{'task':40s} {'w':>2s} {'tuned':>9s} {'warm':>9s} {'cold':>9s} {'in model':>9s} {'loop':>9s}  (ms)")
    for r in rows:
        cells = [f"{1e3 * r[k]:9.3f}" if k in r and math.isfinite(r[k]) else f"{'-':>9s}"
                 for k in ("tuned", "warm", "cold", "in_model", "loop")]
        print(f"{r['name'][:40]:40s} {r['weight']:2d} {' '.join(cells)}")
    print({k: round(1e3 * v, 2) for k, v in result.items() if k.startswith(("estimate", "compiled"))}, "ms; other "
          "calls in the model:", {k: round(1e3 * v, 3) for k, v in result["in_model_other"].items()})


if __name__ == "__main__":
    main()

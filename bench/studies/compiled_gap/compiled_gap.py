"""Where a compiled model's latency goes beyond its estimate, kernel by kernel, with and without the weight layout
rewrites of the producers a concatenation calls in place split out.

Compiles a stored run's model with its best records (those that beat their task's default, as ``tunewise tune``
compiles) in two variants: ``split`` as tunewise compiles it, and ``call_tir only`` with TVM's
``SplitLayoutRewritePreproc`` alone, which splits the weight layout rewrites out of the callees of ``call_tir``
and leaves those of ``call_tir_inplace`` (a concatenation's later producers, :mod:`tunewise.lowering.concat`) in
the kernel.
For each variant it lists the TIR functions of the final module (the one the VM executable is built from) that
still hold a layout rewrite, checks the outputs against the reference, and takes every kernel call of one model
call (the VM's instrument hook). Then, in ``--rounds`` rounds in which the variants take turns: ``--calls`` whole
model calls, and each kernel call timed in the model's order (``in model``) and called ``--calls`` times back to
back on the model's own tensors (``loop``). Per kernel call, the median over the rounds of each round's median
(in model) or mean (loop); a model call and a replay of the kernel calls in order, the median of all timed; beside
each kernel's task latency in the estimate (its best record's, or its default where that is faster:
:mod:`tunewise.tuning.estimate`)::

    .venv/bin/python bench/studies/compiled_gap/compiled_gap.py --store sqlite:///STORE.db --run 1 --save DIR
    .venv/bin/python bench/time_artifacts.py --model squeezenet1.1 DIR/* --references

``--save DIR`` also writes each variant's artifact, ``DIR/split`` and ``DIR/call_tir-only``, for
``bench/time_artifacts.py`` to time in fresh processes beside onnxruntime.
The machine may be shared: compare the variants and columns of one invocation only.
"""

from __future__ import annotations

import argparse
import contextlib
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
from stored_run import kernel_calls, looped, open_run

from tunewise.delivery import compile as compiler
from tunewise.lowering import graph
from tunewise.tuning.estimate import task_latency

VARIANTS = ("split", "call_tir only")
REWRITE = "meta_schedule.layout_rewrite_preproc"  # the annotation of a weight layout rewrite block


def tvm_split_only():
    """``SplitLayoutRewritePreproc`` on the functions with layout-free weights, as TVM gives it: the callees of
    ``call_tir_inplace`` keep their rewrites."""
    import tvm
    from tvm import relax

    @tvm.transform.module_pass(opt_level=0, name="SplitLayoutRewritesCallTIROnly")
    def split(mod, _ctx):
        others = {gv: f for gv, f in mod.functions.items()
                  if isinstance(f, tvm.tirx.PrimFunc) and not (f.attrs and f.attrs.get("layout_free_buffers"))}
        done = relax.transform.SplitLayoutRewritePreproc()(
            tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv not in others}, attrs=mod.attrs))
        done.update(tvm.IRModule(others))
        return done

    return split


@contextlib.contextmanager
def variant(name: str):
    """Compilation as variant ``name`` asks while inside."""
    original = graph.split_layout_rewrites
    if name == "call_tir only":
        graph.split_layout_rewrites = tvm_split_only
    try:
        yield
    finally:
        graph.split_layout_rewrites = original


def final_module(model, chosen):
    """The Relax module the VM executable of ``model`` is built from, with the records of ``chosen``."""
    import tvm

    with model.target, chosen, tvm.transform.PassContext(opt_level=3):
        return graph.compile_pipeline(model.target, model.level)(model.mod)


def kept_rewrites(mod) -> dict[str, list[int]]:
    """The TIR functions of ``mod`` that still rewrite a weight's layout at every call, by name, each with the
    indices of its layout-free parameters (the weights it may rewrite)."""
    import tvm

    return {gv.name_hint: [int(i) for i in f.attrs.get("layout_free_buffers", [])]
            for gv, f in sorted(mod.functions.items(), key=lambda item: item[0].name_hint)
            if isinstance(f, tvm.tirx.PrimFunc) and REWRITE in f.script()}


def relaid_bytes(calls, kept: dict[str, list[int]]) -> int:
    """Bytes of layout-free arguments that the kernel calls ``calls`` of functions in ``kept`` get: what a model
    call re-lays at most."""
    return sum(args[i].numpy().nbytes for name, _, args in calls if name in kept for i in kept[name])


def in_order(calls) -> list[float]:
    """Seconds of each kernel call of one replay of the model's calls, in its order."""
    seconds = []
    for _, func, args in calls:
        start = time.perf_counter()
        func(*args)
        seconds.append(time.perf_counter() - start)
    return seconds


def task_latencies(model, chosen) -> dict[str, float]:
    """Per task name, the seconds one call adds to the estimate (:func:`tunewise.tuning.estimate.task_latency`)."""
    out = {}
    for task, mod in zip(model.tasks, model.task_mods, strict=True):
        top = chosen.get_top_k(chosen.commit_workload(mod), 1) if chosen.has_workload(mod) else []
        out[task.name] = task_latency(task.default_latency, compiler.record_latency(top[0]) if top else math.inf)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="the store's URL, e.g. sqlite:///tunewise.db")
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20, help="model calls and kernel calls a round")
    parser.add_argument("--out", help="also write the results to this JSON file")
    parser.add_argument("--save", metavar="DIR", help="also write each variant's artifact into DIR")
    args = parser.parse_args()

    import tvm

    run = open_run(args.store, args.run)
    model = run.model
    chosen = compiler.best_records_database(model, run.database)
    latencies = task_latencies(model, chosen)
    estimate = sum(t.weight * latencies[t.name] for t in model.tasks)

    arrays, compiled, relaid = {}, {}, {}
    for name in VARIANTS:
        with variant(name):
            kept = kept_rewrites(final_module(model, chosen))
            model_ = compiler.CompiledModel(compiler._build(model, chosen), model.target)
        error = compiler.verify(model_, model.inputs, model.reference_outputs)
        if args.save:
            model_.metadata.update(model=model.name, **compiler.io_metadata(model.inputs, model.reference_outputs))
            model_.save(os.path.join(args.save, name.replace(" ", "-").replace("_", "-")))
        arrays[name] = [tvm.runtime.tensor(x, model_.device) for x in model.inputs]
        calls = kernel_calls(model_.vm, arrays[name])
        compiled[name] = (model_, calls, kept, error)
        relaid[name] = relaid_bytes(calls, kept)
        print(f"{name}: {len(calls)} kernel calls, max relative error {error:.2g}, {len(kept)} functions keep a "
              f"weight layout rewrite ({relaid[name] / 1e6:.2f} MB of their weights a model call): "
              f"{', '.join(kept) or '-'}", flush=True)

    whole, replayed = defaultdict(list), defaultdict(list)  # seconds of each model call, of each replay
    order, loop = defaultdict(lambda: defaultdict(list)), defaultdict(lambda: defaultdict(list))
    for _ in range(args.rounds):
        for name in VARIANTS:
            model_, calls, _, _ = compiled[name]
            main_func = model_.vm["main"]
            main_func(*arrays[name])
            for _ in range(args.calls):
                start = time.perf_counter()
                main_func(*arrays[name])
                whole[name].append(time.perf_counter() - start)
            replays = [in_order(calls) for _ in range(args.calls)]
            replayed[name] += [sum(seconds) for seconds in replays]
            for i, column in enumerate(zip(*replays, strict=True)):
                order[name][i].append(statistics.median(column))
            for i, (_, func, call_args) in enumerate(calls):
                loop[name][i].append(looped(func, call_args, args.calls))

    median = statistics.median
    result = {"store": args.store, "run": args.run, "model": model.name, "threads": tvm.runtime.num_threads(),
              "rounds": args.rounds, "calls": args.calls, "estimate": estimate, "variants": {}}
    for name in VARIANTS:
        _, calls, kept, error = compiled[name]
        rows = [{"kernel": kernel, "task": latencies.get(kernel.removesuffix("_prepacked")),
                 "in_model": median(order[name][i]), "loop": median(loop[name][i])}
                for i, (kernel, _, _) in enumerate(calls)]
        result["variants"][name] = {"model_call": median(whole[name]), "replay": median(replayed[name]),
                                    "kept_rewrites": sorted(kept), "relaid_bytes": relaid[name], "max_error": error,
                                    "in_model": sum(r["in_model"] for r in rows), "loop": sum(r["loop"] for r in rows),
                                    "kernel_calls": rows}

    def ms(seconds) -> str:
        return f"{1e3 * seconds:8.3f}" if seconds is not None else f"{'-':>8s}"

    first, second = (result["variants"][v] for v in VARIANTS)
    print(f"\n{'kernel call':48s} {'task':>8s} | {'split':>8s} {'':8s} | {'call_tir only':>17s}")
    print(f"{'':48s} {'':8s} | {'in model':>8s} {'loop':>8s} | {'in model':>8s} {'loop':>8s}   (ms)")
    for a, b in zip(first["kernel_calls"], second["kernel_calls"], strict=True):
        print(f"{a['kernel'][:48]:48s} {ms(a['task'])} | {ms(a['in_model'])} {ms(a['loop'])} | "
              f"{ms(b['in_model'])} {ms(b['loop'])}")
    print(f"{'sum of kernel calls':48s} {ms(estimate)} | {ms(first['in_model'])} {ms(first['loop'])} | "
          f"{ms(second['in_model'])} {ms(second['loop'])}")
    print(f"{'a replay of them':48s} {'':8s} | {ms(first['replay'])} {'':8s} | {ms(second['replay'])}")
    print(f"{'a model call':48s} {'':8s} | {ms(first['model_call'])} {'':8s} | {ms(second['model_call'])}")
    print(f"the estimate {1e3 * estimate:.3f} ms; a model call {first['model_call'] / estimate:.2f}x it "
          f"({VARIANTS[0]}), {second['model_call'] / estimate:.2f}x ({VARIANTS[1]}); {result['threads']} threads")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(provenance.stamped(result), f, indent=1)


if __name__ == "__main__":
    main()

"""What a tuned model's kernels lose inside the model, and to which of their arguments.

Compiles a stored run's model with its best records and keeps every kernel call one model call makes, in
order, on the model's own tensors (the VM's instrument hook, for one call). Replaying those calls from Python
is timed against the model itself, then each kernel call is timed on its own in the replay, under:

- ``in the model``: the calls in the model's order, each timed as it comes (what the model's kernels take);
- ``called twice``: each call made once untimed just before (its arguments as warm as a tuning loop has them);
- ``weights warmed``: the untimed call on the model's weights and copies of the activations;
- ``activations warmed``: the untimed call on copies of the weights and the model's activations (a kernel's
  inputs and its output);
- ``loop``: each kernel called ``--calls`` times back to back.

A *weight* is an argument that no earlier call wrote and that is not a model input. The conditions take turns
in ``--rounds`` rounds of ``--calls`` replays each, medians per kernel call; ``--threads`` runs the kernels on
another thread count than the target's. The model's own calls time whole model calls in the same rounds.

    python bench/studies/estimate/in_model_split.py --store sqlite:///STORE.db --run 1 \
        --out bench/studies/estimate/results/in-model-split.json
"""

from __future__ import annotations

import argparse
import json
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
from tunewise.tuning import tvm_env

CONDITIONS = ("in the model", "called twice", "weights warmed", "activations warmed", "loop")


def weight_flags(calls, arrays) -> list[list[bool]]:
    """Per call, which arguments are weights: read, not written by an earlier call, not a model input."""
    written = {a.data_ptr() for a in arrays}
    flags = []
    for _, _, args in calls:
        flags.append([i < len(args) - 1 and a.data_ptr() not in written for i, a in enumerate(args)])
        written.add(args[-1].data_ptr())
    return flags


def timed_replay(calls, warmups) -> list[float]:
    """Seconds of each call of one replay; ``warmups[i]``: the arguments of an untimed call just before call
    ``i`` (``None``: none)."""
    seconds = []
    for (_, func, args), warmup in zip(calls, warmups, strict=True):
        if warmup is not None:
            func(*warmup)
        start = time.perf_counter()
        func(*args)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--threads", type=int, help="kernels on this many threads (default: the target's cores)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import tvm

    run = open_run(args.store, args.run)
    model = run.model
    if args.threads:  # compiling the model sets the target's thread count, and its check runs the first kernels
        tvm_env.use_target_threads = lambda _: tvm_env.use_threads(args.threads)
    compiled, _ = compiler.compile_checked(model, run.database)
    vm, main_func = compiled.vm, compiled.vm["main"]
    arrays = [tvm.runtime.tensor(x, compiled.device) for x in model.inputs]
    for _ in range(5):
        main_func(*arrays)
    calls = kernel_calls(vm, arrays)
    flags = weight_flags(calls, arrays)
    hosts = [[a.numpy() for a in call_args] for _, _, call_args in calls]
    copies = [[tvm.runtime.tensor(x, compiled.device) for x in host] for host in hosts]
    warmups = {
        "in the model": [None] * len(calls),
        "called twice": [call_args for _, _, call_args in calls],
        "weights warmed": [[a if w else c for a, c, w in zip(call_args, copy, flag, strict=True)]
                           for (_, _, call_args), copy, flag in zip(calls, copies, flags, strict=True)],
        "activations warmed": [[c if w else a for a, c, w in zip(call_args, copy, flag, strict=True)]
                               for (_, _, call_args), copy, flag in zip(calls, copies, flags, strict=True)],
    }

    samples = defaultdict(lambda: defaultdict(list))
    whole = defaultdict(list)
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.calls):
            main_func(*arrays)
        whole["model"].append((time.perf_counter() - start) / args.calls)
        start = time.perf_counter()
        for _ in range(args.calls):
            for _, func, call_args in calls:
                func(*call_args)
        whole["replay"].append((time.perf_counter() - start) / args.calls)
        for condition, warmup in warmups.items():
            replays = [timed_replay(calls, warmup) for _ in range(args.calls)]
            for i, column in enumerate(zip(*replays, strict=True)):
                samples[condition][i].append(statistics.median(column))
        for i, (_, func, call_args) in enumerate(calls):
            samples["loop"][i].append(looped(func, call_args, args.calls))

    median = statistics.median
    rows = [{"name": name, "weight_bytes": sum(x.nbytes for x, w in zip(host, flag, strict=True) if w),
             "activation_bytes": sum(x.nbytes for x, w in zip(host, flag, strict=True) if not w),
             **{c: median(samples[c][i]) for c in CONDITIONS}}
            for i, ((name, _, _), host, flag) in enumerate(zip(calls, hosts, flags, strict=True))]
    totals = {c: sum(r[c] for r in rows) for c in CONDITIONS}
    result = {"store": args.store, "run": args.run, "model": model.name, "threads": tvm.runtime.num_threads(),
              "rounds": args.rounds, "calls": args.calls,
              "model_call": median(whole["model"]), "replay_call": median(whole["replay"]),
              "totals": totals, "kernel_calls": rows}
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)
    print(f"{len(rows)} kernel calls on {result['threads']} threads; a model call {1e3 * result['model_call']:.3f} ms, "
          f"its replay {1e3 * result['replay_call']:.3f} ms; kernels:",
          {c: round(1e3 * v, 3) for c, v in totals.items()}, "ms")


if __name__ == "__main__":
    main()

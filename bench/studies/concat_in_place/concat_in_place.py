"""What writing concatenations in place is worth (``tunewise.concat``): each model extracted and compiled with
its concatenations copied (the pass off) and written in place (the default), side by side::

    .venv/bin/python bench/studies/concat_in_place/concat_in_place.py --models squeezenet1.1 --tune-seconds 180 \
        --out bench/results/concat-in-place

Per model and variant: the tasks, the untuned estimate (sum of weighted default latencies) and the share of it
in concatenation tasks, the largest relative error against torch; then the compiled models (untuned, and with
``--tune-seconds`` after that much tuning of each variant from an empty store) timed in turn, round after round,
in one process (medians). The machine may be shared: compare the variants of one invocation only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import compile as compiler
from tunewise import concat, frontend, prepare, session, stores, tasks, timing, tvm_env
from tunewise import target as targets
from tunewise.settings import RunSettings

VARIANTS = ("copied", "in place")


@contextlib.contextmanager
def variant(name: str):
    """Lowering as variant ``name`` asks while inside: ``copied`` leaves every concatenation a kernel."""
    if name == "in place":
        yield
        return
    import tvm

    original = concat.in_place
    concat.in_place = lambda: tvm.transform.module_pass(lambda mod, _ctx: mod, opt_level=0, name="Off")
    try:
        yield
    finally:
        concat.in_place = original


def concatenation_share(model) -> float:
    """The share of ``model``'s untuned estimate in tasks that are concatenations."""
    total = model.untuned_latency()
    copies = sum(t.weight * t.default_latency for t, m in zip(model.tasks, model.task_mods, strict=True)
                 if concat.concat_axis(m["main"]) is not None)
    return copies / total if total > 0 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="squeezenet1.1")
    parser.add_argument("--tune-seconds", type=float, default=0.0, help="tuning time per variant (0: untuned only)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results/concat-in-place")
    args = parser.parse_args()

    target = targets.resolve(None)
    tvm_env.prepare("llvm")
    measurer = prepare.make_measurer(target, RunSettings())
    rows = []
    try:
        for name in args.models.split(","):
            imported = frontend.load(name)
            compiled, row = [], {"model": name, "variants": {}}
            for kind in VARIANTS:
                with variant(kind):
                    model = tasks.extract(imported, target, measurer=measurer)
                    untuned, error = compiler.compile_checked(model)
                    compiled.append((f"{kind} untuned", untuned))
                    entry = {"tasks": len(model.tasks), "calls": sum(t.weight for t in model.tasks),
                             "untuned_estimate_ms": 1e3 * model.untuned_latency(),
                             "concatenation_share": concatenation_share(model), "max_relative_error": error}
                    if args.tune_seconds > 0:
                        store = stores.create("sqlite://")
                        settings = RunSettings(source=name, seed=args.seed,
                                               budget=session.Budget(time_budget=args.tune_seconds))
                        final = prepare.open_session(model, settings, store=store, measurer=measurer).run()
                        tuned, entry["tuned_max_relative_error"] = compiler.compile_checked(
                            model, stores.StoreDatabase(store, target=target))
                        entry["tuned_trials"] = sum(s.trials for s in final.tasks)
                        compiled.append((f"{kind} tuned", tuned))
                    row["variants"][kind] = entry
                    print(json.dumps({name: {kind: entry}}), flush=True)
            latencies, rounds = timing.time_models([c for _, c in compiled], imported.inputs, args.rounds)
            row["compiled_median_ms"] = {label: 1e3 * s for (label, _), s in zip(compiled, latencies, strict=True)}
            row["timing_rounds"] = rounds
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        measurer.close()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(provenance.stamped(rows), f, indent=1)


if __name__ == "__main__":
    main()

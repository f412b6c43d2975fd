"""What writing concatenations in place is worth (``tunewise.lowering.concat``): each model extracted and compiled with
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
import math
import os
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import stores
from tunewise import target as targets
from tunewise.delivery import compile as compiler
from tunewise.delivery import timing
from tunewise.importing import frontend
from tunewise.job import prepare
from tunewise.lowering import concat, spaces, tasks
from tunewise.settings import RunSettings
from tunewise.tuning import session, tvm_env

VARIANTS = ("copied", "in place", "padding inlined")


@contextlib.contextmanager
def variant(name: str):
    """Lowering and search as variant ``name`` asks while inside: ``copied`` leaves every concatenation a
    kernel; ``padding inlined`` writes them in place and also inlines the padding of thin convolutions in every schedule
    (:func:`padding_inlined`)."""
    import tvm

    original, generator = concat.in_place, spaces.generator
    if name == "copied":
        concat.in_place = lambda: tvm.transform.module_pass(lambda mod, _ctx: mod, opt_level=0, name="Off")
    elif name == "padding inlined":
        spaces.generator = padding_inlined(generator)
    try:
        yield
    finally:
        concat.in_place, spaces.generator = original, generator


THIN_REDUCTION = 64  # the most multiply-adds per output of a convolution whose padding is inlined


def padding_inlined(generator):
    """``generator`` (:func:`tunewise.lowering.spaces.generator`) with a rule before MetaSchedule's inlining that
    inlines a padding (a spatial block storing an ``if_then_else``) into its only consumer when that is a thin
    convolution (a reduction over a window of at most :data:`THIN_REDUCTION` elements): MetaSchedule's own
    inlining refuses such a block, so most of its schedules compute a padded copy of the input."""
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule

    def is_padding(block) -> bool:
        if any(int(v.iter_type) != 0 for v in block.iter_vars) or len(block.reads) != 1 or len(block.writes) != 1:
            return False
        store = block.body
        op = getattr(getattr(store, "value", None), "op", None) if isinstance(store, tvm.tirx.BufferStore) else None
        return getattr(op, "name", "").endswith(".if_then_else")

    def is_thin(block) -> bool:
        extents = [v.dom.extent for v in block.iter_vars if int(v.iter_type) == 2]
        return (len(extents) >= 2 and len(block.reads) >= 2 and all(hasattr(e, "value") for e in extents)
                and math.prod(int(e) for e in extents) <= THIN_REDUCTION)

    @derived_object
    class InlinePadding(PyScheduleRule):
        def _initialize_with_tune_context(self, context) -> None:
            pass

        def apply(self, sch, block):
            consumers = sch.get_consumers(block) if is_padding(sch.get(block)) else []
            if len(consumers) == 1 and is_thin(sch.get(consumers[0])):
                sch.compute_inline(block)
            return [sch]

        def clone(self):
            return InlinePadding()

    def with_rule(mod, target):
        stock = generator(mod, target)
        if targets.is_gpu(target):
            return stock
        context = ms.TuneContext(mod, target=target, space_generator=ms.space_generator.PostOrderApply(
            sch_rules="from-target", postprocs="from-target", mutator_probs="from-target"))
        rules = list(context.space_generator.sch_rules)
        first = next((k for k, r in enumerate(rules) if type(r).__name__ == "AutoInline"), 0)
        return ms.space_generator.PostOrderApply(sch_rules=[*rules[:first], InlinePadding(), *rules[first:]],
                                                 postprocs="from-target", mutator_probs="from-target")

    return with_rule


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
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"some of {', '.join(VARIANTS)}")
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
            for kind in args.variants.split(","):
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

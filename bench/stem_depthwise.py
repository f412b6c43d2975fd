"""Stem and depthwise convolutions: each tuned alone in MetaSchedule's stock CPU design space and in tunewise's
(:mod:`tunewise.spaces`), against onnxruntime's kernel for the same convolution, side by side.

Extracts the tasks of ``CASES`` from their zoo models at the default graph level (a stem convolution on three
input channels, depthwise convolutions with bias and ReLU6), tunes each alone for ``--trials`` trials per space
(the same seed, an evolutionary search as a run's, XGBoost, the fixed evaluator), then times every space's
best schedule and onnxruntime's ``Conv`` node of the same convolution (its profile, the kernel alone: its
layout reorders left out) in ``--rounds`` rounds, one after the other within a round, in one process. Reported:
the median over rounds, GFLOP/s from the task's FLOPs. On a loaded host only the ratios within a round mean
anything.

    python bench/stem_depthwise.py --trials 64 --rounds 5 --out bench/results/stem-depthwise.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
from dataclasses import dataclass

import provenance

from tunewise import measure, prepare, spaces, tvm_env
from tunewise import target as targets
from tunewise.settings import RunSettings
from tunewise.tasks import args_info


@dataclass(frozen=True)
class Case:
    """A convolution of a zoo model: the task reading NHWC ``data`` with the HWIO ``weight``; onnxruntime
    computes it as ``Conv2d(cin, cout, 3, stride, padding, groups)`` then ``act`` on an NCHW input."""

    name: str
    model: str
    data: tuple
    weight: tuple
    stride: int
    padding: int
    act: str  # "relu" or "relu6"


CASES = (
    Case("squeezenet1.1 stem 3->64 s2", "squeezenet1.1", (1, 224, 224, 3), (3, 3, 3, 64), 2, 0, "relu"),
    Case("mobilenetv2 stem 3->32 s2", "mobilenetv2", (1, 224, 224, 3), (3, 3, 3, 32), 2, 1, "relu6"),
    Case("mobilenetv2 depthwise 32 112x112", "mobilenetv2", (1, 112, 112, 32), (3, 3, 1, 32), 1, 1, "relu6"),
    Case("mobilenetv2 depthwise 144 56x56", "mobilenetv2", (1, 56, 56, 144), (3, 3, 1, 144), 1, 1, "relu6"),
    Case("mobilenetv2 depthwise 96 s2", "mobilenetv2", (1, 112, 112, 96), (3, 3, 1, 96), 2, 1, "relu6"),
)


def stock_space():
    """MetaSchedule's own CPU design space, as ``tune_tir`` builds it."""
    from tvm.s_tir import meta_schedule as ms

    return ms.space_generator.PostOrderApply(sch_rules="from-target", postprocs="from-target",
                                             mutator_probs="from-target")


SPACES = {"stock": lambda mod, target: stock_space(), "tunewise": spaces.generator}


def find_task(model, case: Case):
    """``(mod, flops)`` of the task of ``model`` (an extracted model) that reads the case's data and weight."""
    for task, mod in zip(model.tasks, model.task_mods, strict=True):
        shapes = [tuple(int(d) for d in a.shape) for a in args_info(mod)]
        if shapes[:2] == [case.data, case.weight]:
            return mod, task.flops
    raise SystemExit(f"{case.name}: no task of {case.model} reads {case.data} and {case.weight}")


def tune(mod, target, space, trials: int, seed: int, measurer, batch: int = 16):
    """The best scheduled module of ``trials`` trials of an evolutionary search of ``space`` (a space
    generator) on ``mod`` alone, its latency, and the best latency after each batch."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise import cost_models

    database = ms.database.MemoryDatabase()
    workload = database.commit_workload(mod)
    cost_model = cost_models.create("xgb", seed=seed, num_tuning_cores=2)
    context = ms.TuneContext(mod, target=target, space_generator=space, search_strategy=(
        ms.search_strategy.EvolutionarySearch(population_size=8 * batch, init_min_unmeasured=4 * batch,
                                              genetic_num_iters=2)),
        task_name="task", rand_state=seed, num_threads=2).clone()
    context.pre_tuning(trials, batch, context.generate_design_space(), database, cost_model)
    best, best_mod, curve, done = math.inf, None, [], 0
    while done < trials:
        candidates = context.generate_measure_candidates()
        if not candidates:
            break
        measured = measurer.measure([(c.sch.mod, c.args_info) for c in candidates])
        results = [ms.runner.RunnerResult(list(m.run_secs) or None, m.error) for m in measured]
        context.notify_runner_results(candidates, results)
        cost_model.update(context, candidates, results)
        for candidate, m in zip(candidates, measured, strict=True):
            if m.run_secs:
                database.commit_tuning_record(ms.database.TuningRecord(
                    candidate.sch.trace, workload, list(m.run_secs), target, candidate.args_info))
            if m.latency < best:
                best, best_mod = m.latency, candidate.sch.mod
        done += len(candidates)
        curve.append((done, best))
    context.post_tuning()
    return best_mod, best, curve


def onnx_convolution(case: Case, directory: str):
    """The case's convolution exported to ONNX (its path) and a random NCHW input."""
    import torch

    _, height, width, cin = case.data
    _, _, group_in, cout = case.weight
    conv = torch.nn.Conv2d(cin, cout, 3, stride=case.stride, padding=case.padding, groups=cin // group_in)
    act = torch.nn.ReLU() if case.act == "relu" else torch.nn.ReLU6()
    x = torch.randn(1, cin, height, width)
    path = os.path.join(directory, "conv.onnx")
    torch.onnx.export(torch.nn.Sequential(conv, act).eval(), (x,), path, dynamo=False)
    return path, x.numpy()


class OnnxruntimeConv:
    """onnxruntime's ``Conv`` kernel of a case, timed by its profiler: each :meth:`time` call runs ``calls``
    calls and gives the median kernel time of those."""

    def __init__(self, case: Case, directory: str):
        import onnxruntime

        path, x = onnx_convolution(case, directory)
        options = onnxruntime.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(directory, "profile")
        self.session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.feeds = {self.session.get_inputs()[0].name: x}
        self.rounds = []

    def time(self, calls: int) -> None:
        for _ in range(calls):
            self.session.run(None, self.feeds)
        self.rounds.append(calls)

    def medians(self) -> list[float]:
        """The median kernel time of each :meth:`time` call (seconds)."""
        with open(self.session.end_profiling()) as f:
            times = [e["dur"] / 1e6 for e in json.load(f) if e.get("cat") == "Node"
                     and e["name"].endswith("_kernel_time") and e["args"]["op_name"] == "Conv"]
        medians, start = [], 0
        for calls in self.rounds:
            medians.append(statistics.median(times[start:start + calls]))
            start += calls
        return medians


def timer(mod, target):
    """A function timing one round of ``mod`` (a scheduled task module): the median of repeated calls."""
    import numpy as np
    import tvm

    built = tvm_env.build_candidate(mod, target)
    rng = np.random.default_rng(0)
    arguments = [tvm.runtime.tensor(rng.random([int(d) for d in a.shape], dtype="float32"))
                 for a in args_info(mod)]
    evaluate = built.time_evaluator(built.entry_name, tvm.cpu(), number=10, repeat=7)
    return lambda: statistics.median(evaluate(*arguments).results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(str(k) for k in range(len(CASES))),
                        help="indices into CASES, comma-separated")
    parser.add_argument("--spaces", default=",".join(SPACES))
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50, help="onnxruntime calls a round")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    target = targets.resolve(None)
    tvm_env.prepare("llvm")
    measurer = measure.Measurer(target, evaluator="fixed")
    chosen = [CASES[int(k)] for k in args.cases.split(",")]
    models = {name: prepare.load_model(name, RunSettings(), target=target) for name in {c.model for c in chosen}}
    rows = []
    try:
        for case in chosen:
            mod, flops = find_task(models[case.model], case)
            tuned = {name: tune(mod, target, SPACES[name](mod, target), args.trials, args.seed, measurer)
                     for name in args.spaces.split(",")}
            timers = {name: timer(best, target) for name, (best, _, _) in tuned.items()}
            rounds = {name: [] for name in timers}
            with tempfile.TemporaryDirectory() as directory:
                reference = OnnxruntimeConv(case, directory)
                reference.time(args.calls)  # warm-up
                for _ in range(args.rounds):
                    reference.time(args.calls)
                    for name, run in timers.items():
                        rounds[name].append(run())
                rounds["onnxruntime"] = reference.medians()[1:]
            row = {"case": case.name, "flops": flops, "trials": args.trials,
                   "median_s": {name: statistics.median(r) for name, r in rounds.items()}, "rounds_s": rounds,
                   "tuning": {name: {"best_s": best, "curve": curve} for name, (_, best, curve) in tuned.items()}}
            rows.append(row)
            print(f"{case.name:34s} " + "  ".join(
                f"{name} {1e3 * s:.3f} ms ({flops / s / 1e9:.0f} GFLOP/s)" for name, s in row["median_s"].items()),
                flush=True)
    finally:
        measurer.close()
    with open(args.out, "w") as f:
        json.dump(provenance.stamped({"target": str(target), "seed": args.seed, "rows": rows}), f, indent=1)


if __name__ == "__main__":
    main()

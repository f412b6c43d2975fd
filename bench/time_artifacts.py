"""Benchmark: the latency of compiled artifacts, each timed in a fresh process, all of them in turn.

On the 2-core VM a compiled model's latency depends on the process it lives in as much as on its
schedules: in one ``bench/studies/schedulers/schedulers.py`` invocation two runs' models timed 5.87 and 6.68 ms in turn,
and the same records compiled again in a new process timed 5.70 and 5.43 ms. So each round here starts one
Python process per artifact, in turn, that loads it, runs it ``--warmup`` times and reports the median of
``--repeat`` timed repeats (:meth:`tunewise.delivery.compile.CompiledModel.time`); an artifact's latency is its
median over ``--rounds`` rounds. The inputs are the seeded example inputs of ``--model`` (a zoo name, or the
``.pt2``/``.onnx`` file the artifacts were tuned from; ``--seed``), as in the run that compiled it. With
``--references`` each round also times the model in PyTorch eager and onnxruntime (an ``.onnx`` file: onnxruntime
alone), in a fresh process of their own (:func:`tunewise.delivery.timing.reference_latencies`), and the summary adds
each
artifact's median ratio to onnxruntime's latency in the same round. With ``--cores`` how far apart the
machine's two CPUs are is probed (``host_cores.Probe``) before and after each fresh process, and the summary
is given again over the samples whose two probes both found the cores near (``host_cores.is_near`` the
lowest latency of the invocation), and over those whose two probes both found them far (ratios over the rounds
where both samples are kept)::

    .venv/bin/python bench/time_artifacts.py --model transformer --seed 4 DIR/transformer-seed4-* \\
        --out bench/results/transformer-artifacts-seed4

Writes ``OUT.json`` (every sample, the probes around it, and the summaries) when ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import nullcontext

import provenance
from host_cores import Probe, is_near


def child(path: str, inputs_file: str, warmup: int, repeat: int) -> None:
    """Load ``path``, time it on the arrays of ``inputs_file``, print its median latency in seconds (the only
    line on stdout)."""
    import numpy as np

    from tunewise.delivery import compile as compiler

    compiled = compiler.load(path)
    with np.load(inputs_file) as saved:
        inputs = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    for _ in range(warmup):
        compiled(*inputs)
    print(compiled.time(*inputs, repeat=repeat).median)


def example_inputs(model: str, seed: int) -> list:
    """The seeded example inputs of ``model``, as the run that tuned it had them."""
    from tunewise import zoo
    from tunewise.importing import frontend

    if model in zoo.MODELS:
        return [t.numpy() for t in zoo.get(model, seed=seed)[1]]
    return list(frontend.load(model, seed=seed).inputs)


def add_artifact_arguments(parser: argparse.ArgumentParser) -> None:
    """An ``artifact`` folder, and the ``--model`` and ``--seed`` its example inputs come from."""
    parser.add_argument("artifact", help="an artifact folder (tunewise.delivery.compile.CompiledModel.save)")
    parser.add_argument("--model", required=True, help="the zoo model or .pt2/.onnx file it compiles")
    parser.add_argument("--seed", type=int, default=0, help="the seed of its example inputs and weights")


def load_artifact(args: argparse.Namespace) -> tuple:
    """``(compiled model, its model, example inputs)`` named by :func:`add_artifact_arguments`' ``args``: the
    model a zoo name, or its file's absolute path (for processes started elsewhere)."""
    from tunewise.delivery import compile as compiler

    model = args.model if not os.path.exists(args.model) else os.path.abspath(args.model)
    return compiler.load(args.artifact), model, example_inputs(model, args.seed)


def time_in_fresh_process(path: str, inputs_file: str, args) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", path, "--inputs", inputs_file,
                          "--warmup", str(args.warmup), "--repeat", str(args.repeat)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def summarize(samples: dict[str, list[float]], kept: dict[str, list[bool]] | None = None) -> dict[str, dict]:
    """Median, min and max seconds of each timed thing over its samples that ``kept`` marks (all of them without
    it); with onnxruntime among them, also each other thing's median ratio to onnxruntime's latency in the same
    round, over the rounds where both samples are kept."""
    kept = kept or {name: [True] * len(xs) for name, xs in samples.items()}
    summary = {}
    for name, xs in samples.items():
        chosen = [x for x, keep in zip(xs, kept[name], strict=True) if keep]
        if not chosen:
            continue
        summary[name] = {"samples": len(chosen), "median": statistics.median(chosen), "min": min(chosen),
                         "max": max(chosen)}
        if "onnxruntime" in samples and name != "onnxruntime":
            ratios = [x / ort for x, ort, keep, keep_ort in zip(xs, samples["onnxruntime"], kept[name],
                                                               kept["onnxruntime"], strict=True) if keep and keep_ort]
            if ratios:
                summary[name]["to_onnxruntime"] = statistics.median(ratios)
    return summary


def described(path: str, entry: dict) -> str:
    """One summary entry in a line: the thing's name, its median and, where there is one, its ratio to
    onnxruntime."""
    return (f"{os.path.basename(path)} {1e3 * entry['median']:.3f} ms"
            + (f", {entry['to_onnxruntime']:.2f}x onnxruntime" if "to_onnxruntime" in entry else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifacts", nargs="*", help="artifact folders (tunewise.delivery.compile.CompiledModel.save)")
    parser.add_argument("--model", help="the zoo model or .pt2/.onnx file they compile (for its example inputs)")
    parser.add_argument("--seed", type=int, default=0, help="the seed of the example inputs")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10, help="timed repeats of at least 200 ms each")
    parser.add_argument("--references", action="store_true", help="also time PyTorch eager and onnxruntime")
    parser.add_argument("--cores", action="store_true",
                        help="probe how far apart the two CPUs are around each fresh process (needs cc)")
    parser.add_argument("--out")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.inputs, args.warmup, args.repeat)
        return
    if not args.artifacts or not args.model:
        parser.error("give --model and at least one artifact")
    import numpy as np

    from tunewise.delivery import timing

    model = args.model if not os.path.exists(args.model) else os.path.abspath(args.model)
    inputs = example_inputs(model, args.seed)
    samples: dict[str, list[float | None]] = {path: [] for path in args.artifacts}
    if args.references:
        samples.update({name: [] for name in timing.cpu_references()})
    brackets: dict[str, list[tuple[float, float]]] = {name: [] for name in samples}  # the probes around each
    with tempfile.TemporaryDirectory(prefix="time-artifacts-") as directory, \
            (Probe() if args.cores else nullcontext()) as probe:
        inputs_file = os.path.join(directory, "inputs.npz")
        np.savez(inputs_file, *inputs)
        for r in range(args.rounds):
            marks = [probe.one_way_ns()] if probe else []
            for path in args.artifacts:
                samples[path].append(time_in_fresh_process(path, inputs_file, args))
                if probe:
                    marks.append(probe.one_way_ns())
                    brackets[path].append((marks[-2], marks[-1]))
            if args.references:
                for name, seconds in timing.reference_latencies(model, inputs, seed=args.seed).items():
                    samples[name].append(seconds)
                if probe:
                    marks.append(probe.one_way_ns())
                    for name in timing.cpu_references():
                        brackets[name].append((marks[-2], marks[-1]))
            print(f"round {r + 1}: " + ", ".join(f"{os.path.basename(p)} {1e3 * xs[-1]:.3f} ms"
                                                 for p, xs in samples.items() if xs[-1] is not None)
                  + (f"; cores {', '.join(f'{ns:.0f}' for ns in marks)} ns" if probe else ""), flush=True)
    samples = {name: xs for name, xs in samples.items() if None not in xs}  # what could not run (eager of .onnx)
    summary = summarize(samples)
    for path, s in summary.items():
        print(f"{described(path, s)} [{1e3 * s['min']:.3f}-{1e3 * s['max']:.3f}]")
    by_cores = {}
    if probe:
        lowest = min(ns for pairs in brackets.values() for pair in pairs for ns in pair)
        for state, near in (("near", True), ("far", False)):
            kept = {name: [all(is_near(ns, lowest) == near for ns in pair) for pair in brackets[name]]
                    for name in samples}
            by_cores[state] = summarize(samples, kept)
            if by_cores[state]:
                print(f"cores {state}: " + "; ".join(f"{described(p, s)} ({s['samples']} samples)"
                                                     for p, s in by_cores[state].items()))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out + ".json", "w") as f:
            settings = {k: v for k, v in vars(args).items() if k not in ("child", "artifacts")}
            json.dump({"provenance": provenance.stamp(), "settings": settings, "samples": samples,
                       "cross_core_ns": brackets, "summary": summary, "by_cores": by_cores}, f, indent=1)


if __name__ == "__main__":
    main()

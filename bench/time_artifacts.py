"""Benchmark: the latency of compiled artifacts, each timed in a fresh process, all of them in turn.

On the 2-core VM a compiled model's latency depends on the process it lives in as much as on its
schedules: in one ``bench/schedulers.py`` invocation two runs' models timed 5.87 and 6.68 ms in turn, and
the same records compiled again in a new process timed 5.70 and 5.43 ms. So each round here starts one
Python process per artifact, in turn, that loads it, runs it ``--warmup`` times and reports the median of
``--repeat`` timed repeats (:meth:`tunewise.compile.CompiledModel.time`); an artifact's latency is its
median over ``--rounds`` rounds. The inputs are the seeded example inputs of ``--model`` (a zoo name, or the
``.pt2``/``.onnx`` file the artifacts were tuned from; ``--seed``), as in the run that compiled it. With
``--references`` each round also times the model in PyTorch eager and onnxruntime (an ``.onnx`` file: onnxruntime
alone), in a fresh process of their own (:func:`tunewise.timing.reference_latencies`)::

    .venv/bin/python bench/time_artifacts.py --model transformer --seed 4 DIR/transformer-seed4-* \\
        --out bench/results/transformer-artifacts-seed4

Writes ``OUT.json`` (every sample, and the median, min and max per artifact) when ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import provenance


def child(path: str, inputs_file: str, warmup: int, repeat: int) -> None:
    """Load ``path``, time it on the arrays of ``inputs_file``, print its median latency in seconds (the only
    line on stdout)."""
    import numpy as np

    from tunewise import compile as compiler

    compiled = compiler.load(path)
    with np.load(inputs_file) as saved:
        inputs = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    for _ in range(warmup):
        compiled(*inputs)
    print(compiled.time(*inputs, repeat=repeat).median)


def example_inputs(model: str, seed: int) -> list:
    """The seeded example inputs of ``model``, as the run that tuned it had them."""
    from tunewise import frontend, zoo

    if model in zoo.MODELS:
        return [t.numpy() for t in zoo.get(model, seed=seed)[1]]
    return list(frontend.load(model, seed=seed).inputs)


def time_in_fresh_process(path: str, inputs_file: str, args) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", path, "--inputs", inputs_file,
                          "--warmup", str(args.warmup), "--repeat", str(args.repeat)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifacts", nargs="*", help="artifact folders (tunewise.compile.CompiledModel.save)")
    parser.add_argument("--model", help="the zoo model or .pt2/.onnx file they compile (for its example inputs)")
    parser.add_argument("--seed", type=int, default=0, help="the seed of the example inputs")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10, help="timed repeats of at least 200 ms each")
    parser.add_argument("--references", action="store_true", help="also time PyTorch eager and onnxruntime")
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

    from tunewise import timing

    model = args.model if not os.path.exists(args.model) else os.path.abspath(args.model)
    inputs = example_inputs(model, args.seed)
    samples: dict[str, list[float | None]] = {path: [] for path in args.artifacts}
    if args.references:
        samples.update({name: [] for name in timing.CPU_REFERENCES})
    with tempfile.TemporaryDirectory(prefix="time-artifacts-") as directory:
        inputs_file = os.path.join(directory, "inputs.npz")
        np.savez(inputs_file, *inputs)
        for r in range(args.rounds):
            for path in args.artifacts:
                samples[path].append(time_in_fresh_process(path, inputs_file, args))
            if args.references:
                for name, seconds in timing.reference_latencies(model, inputs, seed=args.seed).items():
                    samples[name].append(seconds)
            print(f"round {r + 1}: " + ", ".join(f"{os.path.basename(p)} {1e3 * xs[-1]:.3f} ms"
                                                 for p, xs in samples.items() if xs[-1] is not None), flush=True)
    samples = {name: xs for name, xs in samples.items() if None not in xs}  # what could not run (eager of .onnx)
    summary = {path: {"median": statistics.median(xs), "min": min(xs), "max": max(xs)} for path, xs in samples.items()}
    for path, s in summary.items():
        print(f"{os.path.basename(path)}: {1e3 * s['median']:.3f} ms [{1e3 * s['min']:.3f}-{1e3 * s['max']:.3f}]")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out + ".json", "w") as f:
            settings = {k: v for k, v in vars(args).items() if k not in ("child", "artifacts")}
            json.dump({"provenance": provenance.stamp(), "settings": settings,
                       "samples": samples, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()

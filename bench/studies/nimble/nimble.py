"""Nimble benchmark: batch-1 inference latency of zoo models and a MobileNetV2 training step, on one GPU.

Run by hand on a CUDA machine, never in CI:

    python bench/studies/nimble/nimble.py --out results.json

Inference modes: ``eager`` PyTorch; ``compile``, torch.compile(mode="reduce-overhead"); ``cudagraph``, the
plain model captured into one CUDA graph on a single stream; ``tunewise``, tunewise.runtime.aot (the
multi-stream plan captured into one CUDA graph). Training modes (MobileNetV2, batch 32, SGD): ``eager``,
``cudagraph`` (torch.cuda.make_graphed_callables of the plain model) and ``tunewise``
(tunewise.runtime.aot_training).

Every latency is the median over ``--runs`` calls timed with CUDA events, after ``--warmup`` calls; graph
modes copy their inputs in and (inference) clone their outputs, as a caller would. Every mode's outputs (or
first-step gradients, see ``max_rel_grad_err``) are compared with eager ones. Results go to the JSON file
``--out``, and a table is printed. A mode that fails is recorded with its error and the others still run.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
import torch
from torch import nn

from tunewise import zoo
from tunewise.runtime import aot, aot_training, cuda_graph

MODELS = ["resnet18", "mobilenetv2", "squeezenet1.1", "vgg11", "transformer", "inception-cells"]
INFERENCE_MODES = ["eager", "compile", "cudagraph", "tunewise"]
TRAINING_MODES = ["eager", "cudagraph", "tunewise"]


def median_ms(step: Callable[[], object], runs: int, warmup: int) -> float:
    """Median GPU time of ``step()`` in milliseconds, each call between two CUDA events."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def failure(err: Exception) -> dict:
    """What a result records of a mode that failed: the error's type and first line."""
    return {"error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}


def inference_runner(mode: str, model: nn.Module, x: torch.Tensor, merge: bool):
    """A callable for ``mode`` and what it reports about itself (preparation time, stream plan)."""
    start = time.perf_counter()
    info: dict = {}
    if mode == "eager":
        run = model
    elif mode == "compile":
        compiled = torch.compile(model, mode="reduce-overhead")

        def run(inputs):
            return compiled(inputs).clone()

        for _ in range(3):  # compilation and cudagraph-tree recording happen in the first calls
            run(x)
    elif mode == "cudagraph":
        run = cuda_graph.single_stream(model, (x,))
    else:
        run = aot(model, (x,), merge=merge)
        plan = run.plan
        info["plan"] = {"operators": len(plan.order), "streams": len(plan.streams), "syncs": len(plan.syncs),
                        "width": plan.width}
    torch.cuda.synchronize()
    info["prepare_s"] = time.perf_counter() - start
    return run, info


def bench_inference(name: str, args: argparse.Namespace) -> dict:
    model, (x,) = zoo.get(name)
    model, x = model.cuda().eval(), x.cuda()
    results = {}
    with torch.no_grad():
        reference = model(x)
        for mode in INFERENCE_MODES:
            try:
                run, info = inference_runner(mode, model, x, args.merge)
                error = (run(x) - reference).abs().max().item()
                info |= {"median_ms": median_ms(lambda run=run: run(x), args.runs, args.warmup),
                         "max_abs_err": error, "ok": error <= 1e-2 * max(1.0, reference.abs().max().item())}
            except Exception as err:  # a benchmark reports a failing mode and goes on with the others
                info = failure(err)
            results[mode] = info
            torch.cuda.synchronize()
    return results


def bench_training(args: argparse.Namespace) -> dict:
    base, _ = zoo.get("mobilenetv2")
    base = base.cuda().train()
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(args.batch, 3, 224, 224, device="cuda", generator=generator)
    labels = torch.randint(0, 1000, (args.batch,), device="cuda", generator=generator)
    loss_fn = nn.CrossEntropyLoss()
    reference_grads = None
    results = {}
    for mode in TRAINING_MODES:
        try:
            model = copy.deepcopy(base)
            start = time.perf_counter()
            if mode == "eager":
                forward = model
            elif mode == "cudagraph":
                forward = torch.cuda.make_graphed_callables(model, (x,))
            else:
                forward = aot_training(model, (x,), merge=args.merge)
            torch.cuda.synchronize()
            info = {"prepare_s": time.perf_counter() - start}
            loss_fn(forward(x), labels).backward()
            grads = [p.grad.detach().clone() for p in model.parameters()]
            reference_grads = reference_grads or grads
            info["max_rel_grad_err"] = max_rel_grad_err(grads, reference_grads)
            optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

            def step(forward=forward, model=model, optimizer=optimizer):
                model.zero_grad(set_to_none=False)
                loss_fn(forward(x), labels).backward()
                optimizer.step()

            info["median_ms"] = median_ms(step, max(args.runs // 4, 10), max(args.warmup // 4, 3))
        except Exception as err:  # a benchmark reports a failing mode and goes on with the others
            info = failure(err)
        results[mode] = info
    return {"model": "mobilenetv2", "batch": args.batch, "modes": results}


def max_rel_grad_err(grads: list[torch.Tensor], reference: list[torch.Tensor]) -> float:
    """The largest error of a parameter's gradient relative to its reference gradient's largest entry, floored at
    1e-3 of the largest reference entry of the model: a parameter whose true gradient is zero (a batch norm's
    bias before a linear layer and another training-mode batch norm) has only rounding noise to compare."""
    floor = 1e-3 * max(r.abs().max().item() for r in reference)
    return max((g - r).abs().max().item() / max(r.abs().max().item(), floor)
               for g, r in zip(grads, reference, strict=True))


def cell(info: dict) -> str:
    if "error" in info:
        return "error"
    return f"{info['median_ms']:.3f}" + ("" if info.get("ok", True) else " (wrong)")


def print_table(inference: dict, training: dict | None) -> None:
    header = f"{'model':<16}" + "".join(f"{mode + ' ms':>16}" for mode in INFERENCE_MODES)
    print(header + f"{'tunewise speedup':>18}{'streams':>9}{'width':>7}")
    for name, modes in inference.items():
        row = f"{name:<16}" + "".join(f"{cell(modes[mode]):>16}" for mode in INFERENCE_MODES)
        tw, eager = modes["tunewise"], modes["eager"]
        speedup = eager["median_ms"] / tw["median_ms"] if "error" not in tw and "error" not in eager else None
        plan = tw.get("plan", {})
        row += f"{f'{speedup:.2f}x' if speedup else '-':>18}"
        row += f"{plan.get('streams', '-'):>9}{plan.get('width', '-'):>7}"
        print(row)
    if training:
        print(f"\ntraining step, {training['model']} batch {training['batch']}:")
        for mode, info in training["modes"].items():
            if "error" in info:
                print(f"  {mode:<10} {info['error']}")
            else:
                grad_err = info["max_rel_grad_err"]
                print(f"  {mode:<10}{cell(info):>12} ms  (max relative grad error {grad_err:.1e})")
    for name, modes in inference.items():
        for mode, info in modes.items():
            if "error" in info:
                print(f"{name} {mode}: {info['error']}")


def write(path: str, results: dict) -> None:
    with open(path, "w") as f:
        json.dump(provenance.stamped(results), f, indent=2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write the JSON results")
    parser.add_argument("--models", nargs="+", default=MODELS, help="zoo models to time at batch 1")
    parser.add_argument("--runs", type=int, default=200, help="timed calls per inference mode")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls before timing")
    parser.add_argument("--batch", type=int, default=32, help="training batch size")
    parser.add_argument("--merge", action="store_true", help="merge stream chains in the tunewise modes")
    parser.add_argument("--skip-training", action="store_true", help="time inference only")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("bench/studies/nimble/nimble.py needs a CUDA GPU, and torch.cuda.is_available() is False here; "
                 "the CPU tests in tests/runtime cover the stream plans")
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "runs": args.runs,
               "warmup": args.warmup, "merge": args.merge, "inference": {}, "training": None}
    for name in args.models:  # the file is rewritten after each model, so a run cut short keeps what it timed
        print(f"timing {name} ...", file=sys.stderr)
        results["inference"][name] = bench_inference(name, args)
        write(args.out, results)
    if not args.skip_training:
        print("timing the training step ...", file=sys.stderr)
        results["training"] = bench_training(args)
        write(args.out, results)
    print_table(results["inference"], results["training"])
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()

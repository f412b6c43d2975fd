"""Where the multi-stream graph's time goes: the GPU kernels of a model's graphs, profiled side by side.

Run by hand on a CUDA machine, never in CI:

    python bench/studies/nimble/nimble_kernels.py --out results.json

For each model (batch 1, inference), three CUDA graphs: ``cudagraph``, the plain model captured on one stream
(``tunewise.runtime.cuda_graph.single_stream``); ``tunewise``, ``tunewise.runtime.aot`` as it is; ``exported``, the
same engine launching every exported ATen operator as exported (``StreamedModule``'s replacement kernels,
``engine.FIRST_RESULT_KERNELS``, turned off); and ``keep-all``, the same engine keeping every intermediate to
the end of a call (no memory reused within a call). Each is timed as bench/studies/nimble/nimble.py times it (median
over ``--runs`` replays between CUDA events), then ``--profiled`` replays run under torch.profiler, which reports
every kernel's count and GPU time per replay. Results go to the JSON file ``--out``, and a table is printed.
"""

from __future__ import annotations

import argparse
import collections
import sys
from unittest import mock

import torch
from nimble import failure, median_ms, write
from torch.profiler import ProfilerActivity, profile

from tunewise import zoo
from tunewise.runtime import AotEngine, StreamedModule, aot, cuda_graph, engine

MODELS = ["mobilenetv2", "resnet18"]


def single_stream_graph(model: torch.nn.Module, x: torch.Tensor):
    return cuda_graph.single_stream(model, (x,))


def tunewise_engine(model: torch.nn.Module, x: torch.Tensor) -> AotEngine:
    return aot(model, (x,))


def exported_engine(model: torch.nn.Module, x: torch.Tensor) -> AotEngine:
    """``aot(model, (x,))`` with every operator launched as exported: no ``engine.FIRST_RESULT_KERNELS``."""
    with mock.patch.dict(engine.FIRST_RESULT_KERNELS, clear=True):
        module = StreamedModule(model, (x,))
    return AotEngine(module, (x,))


def keep_all_engine(model: torch.nn.Module, x: torch.Tensor) -> AotEngine:
    """``aot(model, (x,))`` with every intermediate kept to the end of the call: none of its memory reused."""
    return AotEngine(StreamedModule(model, (x,), reuse_memory=False), (x,))


def kernels_per_replay(run, x: torch.Tensor, replays: int) -> dict[str, dict]:
    """Each GPU kernel's launches and microseconds per replay of ``run(x)``, most time first."""
    run(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            run(x)
        torch.cuda.synchronize()
    count, micros = collections.Counter(), collections.Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            count[event.name] += 1
            micros[event.name] += event.device_time
    return {name: {"launches": count[name] / replays, "us": micros[name] / replays}
            for name, _ in micros.most_common()}


def profile_model(name: str, args: argparse.Namespace) -> dict:
    model, (x,) = zoo.get(name)
    model, x = model.cuda().eval(), x.cuda()
    runners = {"cudagraph": single_stream_graph, "tunewise": tunewise_engine, "exported": exported_engine,
               "keep-all": keep_all_engine}
    results = {}
    with torch.no_grad():
        reference = model(x)
        for mode, make in runners.items():
            try:
                run = make(model, x)
                kernels = kernels_per_replay(run, x, args.profiled)
                results[mode] = {
                    "median_ms": median_ms(lambda run=run: run(x), args.runs, args.warmup),
                    "max_abs_err": (run(x) - reference).abs().max().item(),
                    "kernels_per_replay": sum(k["launches"] for k in kernels.values()),
                    "kernel_us_per_replay": sum(k["us"] for k in kernels.values()),
                    "top_kernels": dict(list(kernels.items())[:args.top]),
                }
            except Exception as err:  # a benchmark reports a failing graph and goes on with the others
                results[mode] = failure(err)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write the JSON results")
    parser.add_argument("--models", nargs="+", default=MODELS, help="zoo models to profile at batch 1")
    parser.add_argument("--runs", type=int, default=200, help="timed replays per graph")
    parser.add_argument("--warmup", type=int, default=20, help="untimed replays before timing")
    parser.add_argument("--profiled", type=int, default=20, help="replays under the profiler")
    parser.add_argument("--top", type=int, default=8, help="kernels kept per graph, most GPU time first")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("bench/studies/nimble/nimble_kernels.py needs a CUDA GPU, and torch.cuda.is_available() is False here")
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "runs": args.runs,
               "profiled": args.profiled, "models": {}}
    for name in args.models:
        print(f"profiling {name} ...", file=sys.stderr)
        results["models"][name] = profile_model(name, args)
        write(args.out, results)
    print(f"{'model':<14}{'graph':<11}{'median ms':>10}{'kernels':>9}{'kernel us':>11}  top kernel")
    for name, modes in results["models"].items():
        for mode, info in modes.items():
            if "error" in info:
                print(f"{name:<14}{mode:<11}  {info['error']}")
                continue
            top = next(iter(info["top_kernels"].items()), None)
            print(f"{name:<14}{mode:<11}{info['median_ms']:>10.3f}{info['kernels_per_replay']:>9.0f}"
                  f"{info['kernel_us_per_replay']:>11.1f}  "
                  + (f"{top[0][:60]} ({top[1]['launches']:.0f}x, {top[1]['us']:.1f} us)" if top else "-"))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()

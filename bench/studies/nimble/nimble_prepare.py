"""Where the CPU time of preparing a model for tunewise.runtime.aot goes, phase by phase, on branchy networks.

Run by hand, never in CI; no GPU is needed:

    python bench/studies/nimble/nimble_prepare.py --out bench/results/nimble-prepare.json

Preparing a model (``aot``) exports it, builds its operator DAG, plans its streams, builds the launch program
and the module's launch tables (``StreamedModule``), then warms it up and captures it on the GPU. Everything
before the GPU is timed here, phase by phase, on the CPU, with the model and its inputs on the CPU (the
export records fake tensors, so the device changes little), and torch on one thread:

* ``export``: ``dag.export_program``, the model in functional ATen through torch.export;
* ``dag``: ``dag.operator_dag``;
* ``plan``: ``streams.plan_streams`` (transitive reduction, matching, the DAG's width);
* ``program``: ``StreamPlan.program``, the steps to issue;
* ``module``: ``StreamedModule`` built from the exported program: its check that the program has only what the
  engine can run, the plan and program again, and the launch tables (kernels, foreign inputs, values to drop);
  the side streams and events are no-ops on the CPU.

``total`` is export + module, what ``aot`` spends before the GPU. Where CUDA is available, ``aot_s`` is the
whole of ``aot`` on GPU 0 as well (the model and inputs there; its first call, then the fastest and median
of the repeats, each ended by a device synchronisation): its excess over ``total`` is the GPU's share
(warm-up runs and the capture). Each phase is timed ``--repeats`` times, in
wall-clock seconds and in CPU seconds of the process, and the fastest is reported (the others only add the
noise of a shared machine); ``first_s`` is the preparation before them, whose export pays torch's lazy
imports when it is the process's first. One more pass under cProfile names the hot spots: the slowest
functions by their own time, and the cumulative time of every function of ``dag`` and ``streams``.

The networks are random-weight stacks of cells in plain PyTorch (batch 1, 8 x 8 images, few channels: the
export does not depend on sizes): ``inception-13``, the zoo's ``InceptionCells`` with 13 cells (GoogLeNet-style
branches, about 300 operators), and ``nasnet-5`` / ``nasnet-23``, NASNet-A normal cells (two inputs, five
blocks of separable convolutions, poolings and identities, about 55 operators a cell) for about 300 and
1300 operators.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
import torch
from torch import nn

from tunewise import target
from tunewise.runtime import dag, engine, streams
from tunewise.zoo import architectures


def _relu_conv_bn(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.ReLU(), nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))


def _separable(c: int, k: int) -> nn.Sequential:
    """NASNet's separable convolution: twice ReLU, depthwise k x k, pointwise 1 x 1, batch norm (8 operators)."""
    layers: list[nn.Module] = []
    for _ in range(2):
        layers += [nn.ReLU(), nn.Conv2d(c, c, k, padding=k // 2, groups=c, bias=False),
                   nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c)]
    return nn.Sequential(*layers)


def _avg_pool() -> nn.AvgPool2d:
    return nn.AvgPool2d(3, 1, 1, count_include_pad=False)


class NasNetCell(nn.Module):
    """A NASNet-A normal cell (Zoph et al., 2018, figure 4): both inputs adjusted to ``c`` channels, five blocks
    each adding two branches, and the concatenation of the adjusted previous input with the five blocks."""

    def __init__(self, c_prev: int, c_cur: int, c: int):
        super().__init__()
        self.adjust_prev, self.adjust_cur = _relu_conv_bn(c_prev, c), _relu_conv_bn(c_cur, c)
        self.sep = nn.ModuleList([_separable(c, 3), _separable(c, 3), _separable(c, 5), _separable(c, 5),
                                  _separable(c, 3)])
        self.pool = nn.ModuleList([_avg_pool() for _ in range(3)])

    def forward(self, prev: torch.Tensor, cur: torch.Tensor) -> torch.Tensor:
        p, h = self.adjust_prev(prev), self.adjust_cur(cur)
        blocks = [self.sep[0](h) + h,
                  self.sep[1](p) + self.sep[2](h),
                  self.pool[0](h) + p,
                  self.pool[1](p) + self.pool[2](p),
                  self.sep[3](p) + self.sep[4](p)]
        return torch.cat([p, *blocks], 1)


class NasNet(nn.Module):
    """A stem, ``cells`` NASNet-A normal cells each reading the two cells before it, and a classifier."""

    def __init__(self, cells: int, c: int = 4, num_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        widths = [c, c] + [6 * c] * cells
        self.cells = nn.ModuleList(NasNetCell(widths[i], widths[i + 1], c) for i in range(cells))
        self.fc = nn.Linear(widths[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        prev = cur = self.stem(x)
        for cell in self.cells:
            prev, cur = cur, cell(prev, cur)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(torch.relu(cur), 1), 1))


MODELS: dict[str, Callable[[], nn.Module]] = {
    "inception-13": lambda: architectures.InceptionCells(channels=16, cells=13),
    "nasnet-5": lambda: NasNet(cells=5),
    "nasnet-23": lambda: NasNet(cells=23),
}


def build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Model ``name`` in eval mode with seeded random weights, and a batch-1 8 x 8 image."""
    generator = torch.Generator().manual_seed(0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = MODELS[name]().eval()
    return model, (torch.randn(1, 3, 8, 8, generator=generator),)


def timed(fn: Callable[[], object], wall: dict, cpu: dict, phase: str) -> object:
    """``fn()``, its wall-clock and CPU seconds (this process's, all threads) recorded under ``phase``."""
    start, start_cpu = time.perf_counter(), time.process_time()
    result = fn()
    wall[phase], cpu[phase] = time.perf_counter() - start, time.process_time() - start_cpu
    return result


def phases(model: nn.Module, inputs: tuple[torch.Tensor, ...], merge: bool) -> tuple[dict, dict, dict]:
    """Wall-clock and CPU seconds of each phase of one preparation, and what it made (operators, streams, syncs,
    width)."""
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    program = timed(lambda: dag.export_program(model, inputs), wall, cpu, "export")
    operators = timed(lambda: dag.operator_dag(program.graph), wall, cpu, "dag")
    plan = timed(lambda: streams.plan_streams(operators, merge=merge), wall, cpu, "plan")
    timed(plan.program, wall, cpu, "program")
    module = timed(lambda: engine.StreamedModule(model, inputs, merge=merge, program=program), wall, cpu, "module")
    for seconds in (wall, cpu):
        seconds["total"] = seconds["export"] + seconds["module"]
    assert module.plan == plan
    made = {"operators": len(plan.order), "edges": operators.number_of_edges(), "reduced_edges": plan.reduced_edges,
            "streams": len(plan.streams), "syncs": len(plan.syncs), "width": plan.width}
    return wall, cpu, made


def whole_aot(model: nn.Module, inputs: tuple[torch.Tensor, ...], merge: bool, repeats: int) -> dict:
    """Wall-clock seconds of ``engine.aot`` on GPU 0, warm-up and capture included: the first call, then the
    fastest and the median of ``repeats`` more."""
    model, inputs = model.cuda(), tuple(x.cuda() for x in inputs)

    def once() -> float:
        start = time.perf_counter()
        engine.aot(model, inputs, merge=merge)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    first = once()
    runs = [once() for _ in range(repeats)]
    return {"first": first, "best": min(runs), "median": statistics.median(runs)}


def hot_spots(model: nn.Module, inputs: tuple[torch.Tensor, ...], merge: bool, top: int) -> dict:
    """One preparation under cProfile: the ``top`` functions by own time, and the cumulative time of every
    function of tunewise.runtime.s dag and streams modules."""
    profile = cProfile.Profile()
    profile.enable()
    phases(model, inputs, merge)
    profile.disable()
    stats = pstats.Stats(profile).stats  # {(file, line, name): (calls, primitive calls, tottime, cumtime, ...)}

    def label(key: tuple) -> str:
        file, line, name = key
        return f"{file.split('site-packages/')[-1].split('/src/')[-1]}:{line}({name})"

    by_own = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    ours = sorted(((key, value) for key, value in stats.items()
                   if key[0].endswith(("tunewise/runtime/streams.py", "tunewise/runtime/dag.py"))),
                  key=lambda item: -item[1][3])
    return {"by_own_time": [{"function": label(key), "calls": value[1], "own_s": value[2], "cumulative_s": value[3]}
                            for key, value in by_own],
            "runtime": [{"function": label(key), "calls": value[1], "cumulative_s": value[3]}
                        for key, value in ours if value[3] >= 1e-3]}


PHASES = ["export", "dag", "plan", "program", "module", "total"]


def print_table(rows: dict) -> None:
    print("fastest of the repeats, wall-clock seconds (CPU seconds of the process in the last two columns; "
          "first: the process's first preparation of the model)")
    print(f"{'model':<14}{'ops':>6}{'streams':>9}{'syncs':>7}{'width':>7}" + "".join(f"{p:>9}" for p in PHASES)
          + f"{'cpu export':>12}{'cpu total':>11}{'first':>8}")
    for name, row in rows.items():
        made, best, cpu = row["made"], row["best_s"], row["best_cpu_s"]
        print(f"{name:<14}{made['operators']:>6}{made['streams']:>9}{made['syncs']:>7}{made['width']:>7}"
              + "".join(f"{best[p]:>9.3f}" for p in PHASES)
              + f"{cpu['export']:>12.3f}{cpu['total']:>11.3f}{row['first_s']['total']:>8.2f}"
              + (f"   aot on the GPU: {row['aot_s']['best']:.3f} (first {row['aot_s']['first']:.2f})"
                 if "aot_s" in row else ""))
    for name, row in rows.items():
        print(f"\n{name}: functions of tunewise.runtime.dag and .streams, cumulative seconds under cProfile")
        for item in row["hot_spots"]["runtime"]:
            print(f"  {item['cumulative_s']:8.3f}  {item['calls']:>7}  {item['function']}")
        print(f"{name}: slowest functions by own time under cProfile")
        for item in row["hot_spots"]["by_own_time"]:
            print(f"  {item['own_s']:8.3f}  {item['calls']:>7}  {item['function']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results/nimble-prepare.json", help="where to write the JSON")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--repeats", type=int, default=3, help="timed preparations a model (the fastest counts)")
    parser.add_argument("--merge", action="store_true", help="merge stream chains, as aot(merge=True) does")
    parser.add_argument("--top", type=int, default=12, help="functions listed by own time")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cpu = target.host_cpu()
    results = {"cpu": provenance.cpu_model(), "mcpu": cpu["mcpu"], "cores": cpu["num-cores"],
               "torch": torch.__version__, "merge": args.merge, "repeats": args.repeats, "models": {}}
    for name in args.models:
        print(f"preparing {name} ...", file=sys.stderr)
        model, inputs = build(name)
        first, _, made = phases(model, inputs, args.merge)  # the first model's pays for torch's lazy imports
        runs = [phases(model, inputs, args.merge) for _ in range(args.repeats)]
        results["models"][name] = {
            "made": made,
            "first_s": first,
            "best_s": {p: min(wall[p] for wall, _, _ in runs) for p in PHASES},
            "median_s": {p: statistics.median(wall[p] for wall, _, _ in runs) for p in PHASES},
            "best_cpu_s": {p: min(cpu[p] for _, cpu, _ in runs) for p in PHASES},
            "hot_spots": hot_spots(model, inputs, args.merge, args.top),
        }
        if torch.cuda.is_available():
            results["gpu"] = torch.cuda.get_device_name(0)
            results["models"][name]["aot_s"] = whole_aot(model, inputs, args.merge, args.repeats)
        with open(args.out, "w") as f:  # rewritten after each model, so a run cut short keeps what it timed
            json.dump(provenance.stamped(results), f, indent=2)
    print_table(results["models"])
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()

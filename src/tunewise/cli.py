"""The ``tunewise`` command line: parses, calls the library, prints.

User errors (:class:`~tunewise.errors.TunewiseError`) are one line on stderr and exit code 2; anything else
is a bug, shown as one line too unless ``TUNEWISE_DEBUG=1`` asks for the traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from tunewise.errors import InputError, TunewiseError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")


def parse_duration(text: str) -> float:
    """``"90"``, ``"90s"``, ``"10m"``, ``"1.5h"`` -> seconds."""
    match = _DURATION.match(text)
    if not match or float(match.group(1)) <= 0:
        raise InputError(f"bad time budget {text!r}: expected a positive duration like 90s, 10m or 1h")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def _whole(name: str, value: str | None, minimum: int = 1) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise InputError(f"bad {name} {value!r}: expected a whole number of at least {minimum}")
    return number


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of usage + message
        raise InputError(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tunewise", description="Tune, compile and run deep-learning models with TVM.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    tune = sub.add_parser("tune", help="tune a model and save a compiled artifact")
    tune.add_argument("model", help="zoo name (see `tunewise tasks --help`), .onnx or .pt2 file")
    tune.add_argument("--target", help="'host' (default: this CPU with its mcpu), a JSON target, or a tag")
    tune.add_argument("--trials", help="total trials (default 200 unless --time-budget is given)")
    tune.add_argument("--time-budget", help="wall-clock budget for tuning: 90s, 10m, 1h")
    tune.add_argument("--per-task-trials", help="at most this many trials for any task")
    tune.add_argument("--patience", help="finish a task after this many trials without improvement")
    tune.add_argument("--scheduler", default="gradient", help="task scheduler (default: gradient)")
    tune.add_argument("--trials-per-slot", default="16", help="candidates per slot (default 16)")
    tune.add_argument("--graph-level", default="fold-bn", help="graph passes: none, decompose, fold-bn")
    tune.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                      help="shape of an ONNX input with dynamic dimensions")
    tune.add_argument("--output", "-o", help="artifact folder (default tunewise-out/MODEL)")
    tune.add_argument("--seed", default="0")

    run = sub.add_parser("run", help="run and time a saved artifact")
    run.add_argument("artifact")
    run.add_argument("--repeat", default="20", help="timed repeats; the median is reported")

    tasks = sub.add_parser("tasks", help="list a model's tunable tasks")
    tasks.add_argument("model")
    tasks.add_argument("--target")
    tasks.add_argument("--graph-level", default="fold-bn")
    tasks.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...")
    tasks.add_argument("--no-measure", action="store_true", help="skip measuring default latencies")
    return parser


def _cmd_tune(args) -> int:
    from tunewise import frontend, schedulers, session, workflow
    from tunewise.progress import LiveProgress

    trials = _whole("--trials", args.trials)
    time_budget = parse_duration(args.time_budget) if args.time_budget else None
    if trials is None and time_budget is None:
        trials = 200
    budget = session.Budget(max_trials=trials, time_budget=time_budget,
                            per_task_trials=_whole("--per-task-trials", args.per_task_trials),
                            patience=_whole("--patience", args.patience))
    seed = _whole("--seed", args.seed, minimum=0)
    scheduler = schedulers.create(args.scheduler, seed=seed)
    result = workflow.tune(
        args.model, input_shapes=frontend.parse_input_shapes(args.input_shape), target=args.target,
        scheduler=scheduler, budget=budget, trials_per_slot=_whole("--trials-per-slot", args.trials_per_slot),
        output=args.output, level=args.graph_level, seed=seed, reporter=LiveProgress(),
    )
    print(f"model            {result.model} ({result.tasks} tasks)")
    print(f"trials           {result.trials} ({result.failures} failed) in {result.tuning_seconds:.0f}s")
    print(f"untuned TVM      {result.untuned_latency * 1e3:.3f} ms")
    print(f"tuned TVM        {result.tuned_latency * 1e3:.3f} ms "
          f"({result.untuned_latency / result.tuned_latency:.1f}x faster than untuned)")
    if result.torch_latency is not None:
        print(f"PyTorch eager    {result.torch_latency * 1e3:.3f} ms "
              f"({result.torch_latency / result.tuned_latency:.2f}x slower than tuned)")
    print(f"outputs          match the reference (max relative error {result.max_error:.2e})")
    print(f"artifact         {result.artifact}")
    return 0


def _cmd_run(args) -> int:
    import numpy as np

    from tunewise import compile as compiler

    repeat = _whole("--repeat", args.repeat)
    model = compiler.load(args.artifact)
    generator = np.random.default_rng(0)
    inputs = [generator.standard_normal(spec["shape"]).astype(spec["dtype"])
              if np.dtype(spec["dtype"]).kind == "f" else np.zeros(spec["shape"], dtype=spec["dtype"])
              for spec in model.metadata.get("inputs", [])]
    outputs = model(*inputs)
    latency = model.time(*inputs, repeat=repeat)
    print(f"{model.metadata.get('model', args.artifact)}: median {latency.median * 1e3:.3f} ms over "
          f"{latency.repeats} repeats (min {latency.minimum * 1e3:.3f} ms); outputs "
          + ", ".join(str(tuple(o.shape)) for o in outputs))
    return 0


def _cmd_tasks(args) -> int:
    from tunewise import frontend, measure, tasks, tvm_env
    from tunewise import target as targets

    target = targets.resolve(args.target)
    tvm_env.prepare(target.kind.name)
    imported = frontend.load(args.model, input_shapes=frontend.parse_input_shapes(args.input_shape))
    measurer = None if args.no_measure else measure.Measurer(target)
    try:
        model = tasks.extract(imported, target, level=args.graph_level, measurer=measurer)
    finally:
        if measurer is not None:
            measurer.close()
    print(f"{'task':48s} {'weight':>6s} {'MFLOP':>10s} {'default ms':>11s}")
    for t in model.tasks:
        print(f"{t.name[:48]:48s} {t.weight:6d} {t.flops / 1e6:10.2f} {t.default_latency * 1e3:11.3f}")
    print(f"{len(model.tasks)} tasks; untuned estimate {model.untuned_latency() * 1e3:.3f} ms")
    return 0


_COMMANDS = {"tune": _cmd_tune, "run": _cmd_run, "tasks": _cmd_tasks}


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        return _COMMANDS[args.command](args)
    except TunewiseError as err:
        print(f"tunewise: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("tunewise: interrupted; every trial measured so far is kept in the records", file=sys.stderr)
        return 130
    except Exception as err:
        if os.environ.get("TUNEWISE_DEBUG"):
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        print(f"tunewise: internal error: {type(err).__name__}: {first} (TUNEWISE_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

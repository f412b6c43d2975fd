"""The ``tunewise`` command line: parses, calls the library, prints.

User errors (:class:`~tunewise.errors.TunewiseError`) are one line on stderr and exit code 2; anything else
is a bug, shown as one line too unless ``TUNEWISE_DEBUG=1`` asks for the traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys

from tunewise import graph
from tunewise.errors import InputError, TunewiseError, message_line

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


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=None, metavar="URL",
                        help="sqlite:///tunewise.db (default, in this folder) or postgresql+psycopg://user@host/db")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tunewise", description="Tune, compile and run deep-learning models with TVM.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    tune = sub.add_parser("tune", help="tune a model and save a compiled artifact")
    tune.add_argument("model", nargs="?",
                      help="zoo name (see `tunewise tasks --help`), .onnx or .pt2 file (optional with --resume)")
    tune.add_argument("--resume", metavar="RUN",
                      help="continue run RUN of the store with its own settings (budget options extend it)")
    tune.add_argument("--target", help="'host' (default: this CPU with its mcpu), a JSON target, or a tag")
    tune.add_argument("--trials", help="total trials (default 200 unless --time-budget is given)")
    tune.add_argument("--time-budget", help="wall-clock budget for tuning: 90s, 10m, 1h")
    tune.add_argument("--per-task-trials", help="at most this many trials for any task")
    tune.add_argument("--patience", help="finish a task after this many trials without improvement")
    tune.add_argument("--scheduler", help="task scheduler (default: gradient)")
    tune.add_argument("--trials-per-slot", help="candidates per slot (default 16)")
    tune.add_argument("--evaluator", help="how candidates are timed: adaptive (AdaTune; default), fixed")
    tune.add_argument("--cost-model", help="what ranks candidates: xgb (default), rfei (AdaTune)")
    tune.add_argument("--no-share", action="store_true",
                      help="tune every task alone (default: tasks with the same convolution/matmul share schedules)")
    tune.add_argument("--graph-level", help="graph passes: none, decompose, fold-bn, nhwc (default)")
    tune.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                      help="shape of an ONNX input with dynamic dimensions")
    tune.add_argument("--output", "-o", help="artifact folder (default tunewise-out/MODEL)")
    tune.add_argument("--seed", help="seed of the searches and the scheduler (default 0)")
    _store_option(tune)

    runs = sub.add_parser("runs", help="list the runs in the store")
    _store_option(runs)

    show = sub.add_parser("show", help="one run's tasks: trials, failures, best latency, shares of latency and time")
    show.add_argument("run")
    _store_option(show)

    report = sub.add_parser("report", help="plot runs (several: on the same axes) to an .html or .png file")
    report.add_argument("runs", nargs="+", metavar="RUN")
    report.add_argument("--output", "-o", required=True, help="report file: .html (tables + plots), .png, .svg")
    _store_option(report)

    records = sub.add_parser("records", help="MetaSchedule JSON databases in and out of the store")
    records_sub = records.add_subparsers(dest="records_command", required=True, parser_class=_Parser)
    export = records_sub.add_parser("export", help="write a run's records as a MetaSchedule JSON database")
    export.add_argument("run")
    export.add_argument("directory")
    _store_option(export)
    load = records_sub.add_parser("import", help="add a MetaSchedule JSON database's records as a new run")
    load.add_argument("directory")
    _store_option(load)

    run = sub.add_parser("run", help="run and time a saved artifact")
    run.add_argument("artifact")
    run.add_argument("--repeat", default="20", help="timed repeats; the median is reported")

    streams = sub.add_parser("streams", help="a model's multi-stream plan (Nimble): streams, syncs, concurrency")
    streams.add_argument("model", help="zoo name")
    streams.add_argument("--merge", action="store_true", help="merge chains into fewer streams")

    tasks = sub.add_parser("tasks", help="list a model's tunable tasks")
    tasks.add_argument("model")
    tasks.add_argument("--target")
    tasks.add_argument("--graph-level", default=graph.DEFAULT_LEVEL)
    tasks.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...")
    tasks.add_argument("--no-measure", action="store_true", help="skip measuring default latencies")
    return parser


def _budget(args, default_trials: int | None):
    """The budget the options give, or ``None`` when they give none and there is no default."""
    from tunewise import session

    trials = _whole("--trials", args.trials)
    time_budget = parse_duration(args.time_budget) if args.time_budget else None
    per_task, patience = _whole("--per-task-trials", args.per_task_trials), _whole("--patience", args.patience)
    if trials is None and time_budget is None:
        if per_task is None and patience is None and default_trials is None:
            return None
        trials = default_trials
    return session.Budget(max_trials=trials, time_budget=time_budget, per_task_trials=per_task, patience=patience)


def _cmd_tune(args) -> int:
    from tunewise import frontend, runners, workflow
    from tunewise.progress import LiveProgress
    from tunewise.timing import relation

    if args.resume is not None:
        own = ("scheduler", "trials_per_slot", "graph_level", "seed", "output", "target", "evaluator", "cost_model")
        fixed = [f"--{name.replace('_', '-')}" for name in own if getattr(args, name) is not None]
        fixed += ["--no-share"] if args.no_share else []
        if fixed or args.input_shape:
            dropped = ", ".join(fixed) or "--input-shape"
            raise InputError(f"--resume continues a run with its own settings; drop {dropped}")
        result = workflow.resume(_whole("RUN", args.resume, minimum=1), store=args.store, budget=_budget(args, None),
                                 source=args.model, reporter=LiveProgress())
    elif args.model is None:
        raise InputError("name a model to tune, or --resume RUN (see tunewise tune --help)")
    else:
        seed = _whole("--seed", args.seed or "0", minimum=0)
        result = workflow.tune(
            args.model, input_shapes=frontend.parse_input_shapes(args.input_shape), target=args.target,
            scheduler=args.scheduler or "gradient", budget=_budget(args, 200),
            trials_per_slot=_whole("--trials-per-slot", args.trials_per_slot or "16"), output=args.output,
            level=args.graph_level or graph.DEFAULT_LEVEL, seed=seed, reporter=LiveProgress(), store=args.store,
            evaluator=args.evaluator or runners.DEFAULT, cost_model=args.cost_model or "xgb", share=not args.no_share,
        )
    print(f"model            {result.model} ({result.tasks} tasks), run {result.run}")
    shared = f", {result.shared} shared between tasks" if result.shared else ""
    print(f"trials           {result.trials} ({result.failures} failed{shared}) in {result.tuning_seconds:.0f}s")
    print(f"untuned TVM      {result.untuned_latency * 1e3:.3f} ms")
    print(f"tuned TVM        {result.tuned_latency * 1e3:.3f} ms "
          f"({relation(result.tuned_latency, result.untuned_latency, 'untuned')})")
    for name, latency in (("PyTorch eager", result.torch_latency), ("onnxruntime", result.onnxruntime_latency)):
        if latency is not None:
            print(f"{name:16s} {latency * 1e3:.3f} ms (tuned TVM is {relation(result.tuned_latency, latency)})")
    print(f"timed as         {result.timing}")
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


def _cmd_streams(args) -> int:
    from tunewise import runtime, zoo

    model, inputs = zoo.get(args.model)
    print(runtime.plan_model(model, inputs, merge=args.merge).describe())
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


def _open_store(args):
    from tunewise import stores

    return stores.create(args.store, must_exist=True)


def _cmd_runs(args) -> int:
    from tunewise import report

    store = _open_store(args)
    print("\n".join(report.runs_table([report.summarize(store, r.id) for r in store.get_runs()])))
    return 0


def _cmd_show(args) -> int:
    from tunewise import report

    run = _whole("RUN", args.run)
    store = _open_store(args)
    print("\n".join(report.run_table(report.summarize(store, run))))
    for artifact in store.get_artifacts(run):
        print(f"artifact {artifact.path}: {artifact.metadata.get('latency_s', math.nan) * 1e3:.3f} ms")
    return 0


def _cmd_report(args) -> int:
    from tunewise import report

    runs = [_whole("RUN", run) for run in args.runs]
    store = _open_store(args)
    summaries = [report.summarize(store, run) for run in runs]
    print(f"wrote {report.write(summaries, args.output)}")
    return 0


def _cmd_records(args) -> int:
    from tunewise import stores, tvm_env

    if args.records_command == "export":
        run = _whole("RUN", args.run)
        store = _open_store(args)
        tvm_env.prepare()
        count = stores.export_records(store, run, args.directory)
        print(f"wrote {count} records of run {args.run} to {args.directory}")
    else:
        store = stores.create(args.store)
        tvm_env.prepare()
        run, count = stores.import_records(store, args.directory)
        print(f"imported {count} records from {args.directory} as run {run}")
    return 0


_COMMANDS = {"tune": _cmd_tune, "run": _cmd_run, "tasks": _cmd_tasks, "runs": _cmd_runs, "show": _cmd_show,
             "report": _cmd_report, "records": _cmd_records, "streams": _cmd_streams}


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        return _COMMANDS[args.command](args)
    except TunewiseError as err:
        print(f"tunewise: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("tunewise: interrupted; every trial measured so far is in the store: "
              "continue with tunewise tune --resume RUN", file=sys.stderr)
        return 130
    except Exception as err:
        if os.environ.get("TUNEWISE_DEBUG"):
            raise
        first = message_line(err) if str(err).strip() else ""
        print(f"tunewise: internal error: {type(err).__name__}: {first} (TUNEWISE_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

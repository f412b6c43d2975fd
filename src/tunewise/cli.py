"""The ``tunewise`` command line: parses, calls the library, prints.

User errors (:class:`~tunewise.errors.TunewiseError`) are one line on stderr and exit code 2; anything else
is a bug, shown as one line too unless ``TUNEWISE_DEBUG=1`` asks for the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import re
import sys
import textwrap

from tunewise import cost_models, energy, evaluators, filters, schedulers, sharing
from tunewise.errors import InputError, TunewiseError, message_line
from tunewise.job import logs
from tunewise.lowering import graph, precision
from tunewise.settings import RunSettings
from tunewise.target import ISA_CLASSES
from tunewise.tuning import kernel_checks, model_checks
from tunewise.tuning.measure import MeasureConfig

_VERBOSE = ("show TVM's, PyTorch's and ONNX's own output (logs, warnings) here instead of in a log file "
            "under tunewise-logs/ (also: TUNEWISE_DEBUG=1)")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")


def parse_duration(text: str, what: str = "time budget", *, words: tuple[str, ...] = ()) -> float:
    """``"90"``, ``"90s"``, ``"10m"``, ``"1.5h"`` -> seconds; ``what`` names the value in the error, which
    offers ``words`` too (the value's other forms)."""
    match = _DURATION.match(text)
    if not match or float(match.group(1)) <= 0:
        alternatives = ", or " + " or ".join(repr(word) for word in words) if words else ""
        raise InputError(f"bad {what} {text!r}: expected a positive duration like 90s, 10m or 1h{alternatives}")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


_ENERGY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(J|kJ|MJ|Wh|kWh)\s*$")


def parse_energy(text: str) -> float:
    """``"50kJ"``, ``"2000J"``, ``"1.5MJ"``, ``"10Wh"``, ``"0.2kWh"`` -> joules."""
    match = _ENERGY.match(text)
    if not match or float(match.group(1)) <= 0:
        raise InputError(f"bad energy budget {text!r}: expected a positive energy like 50kJ, 2000J or 10Wh")
    return float(match.group(1)) * {"J": 1, "kJ": 1e3, "MJ": 1e6, "Wh": 3600, "kWh": 3.6e6}[match.group(2)]


def _number(name: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise InputError(f"bad {name} {value!r}: expected a number")
    return number


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


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps help text between words only, so that a name such as ``expected-gain`` stays whole."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        # negative numbers and durations ("-1m") are option values, so their own checks say what is wrong
        self._negative_number_matcher = re.compile(r"^-\d*\.?\d+(?:ms|us|kJ|J|[smh])?$")

    def error(self, message: str):  # one line instead of usage + message
        raise InputError(f"{message} (see {self.prog} --help)")


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=None, metavar="URL",
                        help="sqlite:///tunewise.db (default, in this folder) or postgresql+psycopg://user@host/db")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tunewise", description="Tune, compile and run deep-learning models with TVM.")
    parser.add_argument("--verbose", action="store_true", help=_VERBOSE)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    tune = sub.add_parser("tune", help="tune a model and save a compiled artifact")
    tune.add_argument("model", nargs="?",
                      help="zoo name (`tunewise tasks --list` lists them), .onnx or .pt2 file (optional with --resume)")
    tune.add_argument("--resume", metavar="RUN",
                      help="continue run RUN of the store with its own settings; a budget option given replaces "
                           "that limit only (--trials counts the trials measured before), and --output, "
                           "--no-references, --timing-rounds and --time-untuned replace the run's; each is kept for "
                           "the run")
    tune.add_argument("--target", help="'host' (default: this CPU with its mcpu), a JSON target, or a tag")
    tune.add_argument("--trials", help=f"total trials (default {RunSettings.budget.max_trials} unless --time-budget "
                      "is given)")
    tune.add_argument("--time-budget", help="wall-clock budget for the whole command (import, extract, tune, "
                      "compile): 90s, 10m, 1h")
    tune.add_argument("--per-task-trials", help="at most this many trials for any task")
    tune.add_argument("--patience", help="finish a task after this many trials without improvement")
    tune.add_argument("--no-count-failures", action="store_true",
                      help="failed candidates do not count against --trials (they do by default)")
    tune.add_argument("--scheduler", help=f"task scheduler: {', '.join(schedulers.names())} "
                      f"(default: {RunSettings.scheduler})")
    tune.add_argument("--trials-per-slot", help=f"candidates per slot (default {RunSettings.trials_per_slot})")
    tune.add_argument("--evaluator", help=f"how candidates are timed: {', '.join(evaluators.names())} (adaptive: "
                      f"AdaTune; default: {RunSettings.evaluator})")
    tune.add_argument("--cache-flush", action="store_true", default=None,
                      help="time every run of a candidate cold, with its weights and output flushed from the CPU "
                           "caches first, as inside a model whose weights exceed the last-level cache (default: "
                           "warm, runs back to back)")
    tune.add_argument("--cost-model", help=f"what ranks candidates: {', '.join(cost_models.names())} (rfei: "
                      f"AdaTune; default: {RunSettings.cost_model})")
    tune.add_argument("--share", metavar="MODE",
                      help=f"how tasks share schedules: {', '.join(sharing.MODES)} (default {RunSettings.share}: "
                           "tasks with the same convolution/matmul start from each other's best schedules; "
                           "selective: only one representative of each group of similar tasks, whatever their "
                           "shapes, is searched, the others get its best schedules and are searched only when "
                           "those do not pay)")
    tune.add_argument("--no-share", action="store_true", help="the same as --share off")
    tune.add_argument("--no-warm-start", action="store_true",
                      help="do not start new tasks from the best records of the most similar workloads other runs "
                           "stored (they do by default, when the store has such records)")
    tune.add_argument("--records-base", metavar="FILE|off",
                      help="the record base new tasks also start from where the store has no record of their "
                           "workload: a base file (tunewise records build), or off (default: the one tunewise ships "
                           "for this CPU's instruction-set class, when it ships one)")
    tune.add_argument("--no-pretrained", action="store_true",
                      help="start the cost model untrained, its first candidates of each task sampled at random "
                           "(by default it starts from the pretrained model shipped for this CPU's ISA class, "
                           "where there is one)")
    tune.add_argument("--graph-level", help=f"graph passes: {', '.join(graph.LEVELS)} "
                      "(default: winograd on a CPU, nhwc on a GPU)")
    tune.add_argument("--precision",
                      help="what the model computes in: float32 (the default), bfloat16 (a CPU with AMX: the "
                           "products of constant weights in bfloat16 on AMX tiles, summed in float32)")
    tune.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                      help="shape of an ONNX input with dynamic dimensions")
    tune.add_argument("--output", "-o", help="artifact folder (default tunewise-out/MODEL; with --resume, "
                                             "replaces the run's)")
    tune.add_argument("--seed", help=f"seed of the searches and the scheduler (default {RunSettings.seed})")
    tune.add_argument("--no-references", action="store_true",
                      help="do not time PyTorch eager and onnxruntime beside the tuned model at the end (they are "
                           "by default, each in a fresh process)")
    tune.add_argument("--timing-rounds", metavar="N",
                      help="rounds the tuned model is timed in at the end (default 10; fewer finish sooner, with "
                           "rougher latencies)")
    tune.add_argument("--time-untuned", action="store_true",
                      help="also compile the untuned model and time it beside the tuned one at the end (under a "
                           "time budget, at the expense of tuning time; by default its latency is estimated from "
                           "its tasks')")
    tune.add_argument("--goal", help="stop once the measured model latency reaches this: 12ms, or a multiple of a "
                      "reference timed at the start: 0.9x-ort (onnxruntime), 0.8x-eager (PyTorch eager)")
    tune.add_argument("--give-up", metavar="P",
                      help="with --goal: stop once the forecast says the goal will not be reached within the budget "
                           "with probability P or more (e.g. 0.9; default: never give up)")
    tune.add_argument("--energy-budget", help="stop once tuning has used this much energy: 50kJ, 2000J, 10Wh")
    tune.add_argument("--diminishing", nargs="?", const="-0.25", metavar="PHI",
                      help="stop once the model improves PHI (default -0.25: 25%%) more slowly per second of "
                           "tuning than over the check interval before (Trimmer's early stop)")
    tune.add_argument("--check-every", help="tuning time between whole-model checks (compile, verify, time in a "
                      "fresh process; the estimate shown is then brought to the compiled model): 90s, 5m, 'epoch' "
                      "(after every epoch, one slot per live task) or 'never' "
                      f"(default {model_checks.DEFAULT_EVERY:.0f}s)")
    tune.add_argument("--filter", dest="candidate_filter", choices=filters.names(),
                      help="skip proposals not worth measuring: cold (Trimmer: those whose most similar measured "
                           "candidates were all far slower than the search's trend)")
    tune.add_argument("--runner", help="where candidates run: local (default) or rpc://TRACKER_HOST:PORT/KEY (the "
                      "devices a TVM RPC tracker hands out under KEY)")
    tune.add_argument("--energy-meter", help=f"how energy is metered: {', '.join(energy.names())} (default: "
                      f"{RunSettings.energy_meter}: RAPL, else NVML, else an estimate from CPU time)")
    _store_option(tune)

    many = sub.add_parser("tune-many", help="tune several models at once on a Ray cluster, each as its own run")
    many.add_argument("models", nargs="*", metavar="MODEL", help="zoo names, .onnx or .pt2 files (the same path "
                      "on every node)")
    many.add_argument("--resume", metavar="RUNS",
                      help="continue the fleet of runs RUNS (comma-separated: 3,4) with their own models and settings, "
                           "as a stopped fleet or a lost cluster's message names them")
    many.add_argument("--cluster", default="local",
                      help="'local' (default: Ray on this machine) or a running cluster's address: ray://HOST:PORT "
                           "(Ray client), HOST:PORT or 'auto' (from a node of it)")
    many.add_argument("--policy", default="suspension", help="which models tune in each round: suspension "
                      "(default: Trimmer's, the ones improving fastest per second; the others wait) or fair")
    many.add_argument("--round", default="2m", help="tuning time of a model in one round (default 2m)")
    many.add_argument("--trials", help="trials per model")
    many.add_argument("--time-budget", help="tuning time per model: 90s, 10m, 1h")
    many.add_argument("--goal", help="stop a model once its measured latency reaches this: 12ms, 0.9x-ort, "
                      "0.8x-eager")
    many.add_argument("--scheduler", help=f"task scheduler of every model: {', '.join(schedulers.names())} "
                      f"(default: {RunSettings.scheduler})")
    many.add_argument("--seed", help=f"seed of the searches and the schedulers (default {RunSettings.seed})")
    many.add_argument("--output", "-o", help="folder of the artifacts, one per model (default tunewise-out/MODEL)")
    many.add_argument("--no-references", action="store_true",
                      help="do not time PyTorch eager and onnxruntime beside each tuned model at the end")
    _store_option(many)

    runs = sub.add_parser("runs", help="list the runs in the store")
    _store_option(runs)

    show = sub.add_parser("show", help="one run's tasks: trials, failures, best latency, shares of latency and time")
    show.add_argument("run")
    _store_option(show)

    report = sub.add_parser("report", help="plot runs (several: on the same axes) to an .html or .png file")
    report.add_argument("runs", nargs="+", metavar="RUN")
    report.add_argument("--output", "-o", required=True,
                        help="report file: .html (interactive page, plotly.js written beside it), .png, .svg, .pdf")
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
    build = records_sub.add_parser("build", help="write a record base: the best records of each workload of the "
                                   "store's finished and suspended runs, by CPU instruction-set class")
    build.add_argument("--runs", metavar="RUNS", help="only these runs (comma-separated: 1,2)")
    build.add_argument("--isa", choices=ISA_CLASSES,
                       help="only records of this instruction-set class (the package ships one base per class)")
    build.add_argument("--output", "-o", required=True, metavar="FILE", help="the base file to write (.json.gz)")
    _store_option(build)
    merge = records_sub.add_parser("merge", help="join record bases: the best records of each workload win")
    merge.add_argument("bases", nargs="+", metavar="BASE")
    merge.add_argument("--output", "-o", required=True, metavar="FILE", help="the base file to write (.json.gz)")

    run = sub.add_parser("run", help="run and time a saved artifact")
    run.add_argument("artifact")
    run.add_argument("--repeat", default="20", help="timed repeats; the median is reported")

    streams = sub.add_parser("streams", help="a model's multi-stream plan (Nimble): streams, syncs, concurrency")
    streams.add_argument("model", help="zoo name (`tunewise tasks --list` lists them) or .pt2 file")
    streams.add_argument("--merge", action="store_true", help="merge chains into fewer streams")

    tasks = sub.add_parser("tasks", help="list a model's tunable tasks (or, with --list, the zoo's models)")
    tasks.add_argument("model", nargs="?", help="zoo name, .onnx or .pt2 file")
    tasks.add_argument("--list", action="store_true", help="list the zoo's model names and input shapes, and exit")
    tasks.add_argument("--target", help="'host' (default: this CPU with its mcpu), a JSON target, or a tag")
    tasks.add_argument("--graph-level", help=f"graph passes: {', '.join(graph.LEVELS)} "
                       "(default: winograd on a CPU, nhwc on a GPU)")
    tasks.add_argument("--precision", default=precision.DEFAULT,
                       help=f"what the model computes in: {', '.join(precision.PRECISIONS)} (as tunewise tune takes)")
    tasks.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                       help="shape of an ONNX input with dynamic dimensions")
    tasks.add_argument("--no-measure", action="store_true", help="skip measuring default latencies")
    tasks.add_argument("--no-groups", action="store_true",
                       help="skip grouping the tasks as --share selective does (group and representative columns)")
    for command in [*sub.choices.values(), *records_sub.choices.values()]:
        command.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE)
    return parser


def _limits(args) -> dict:
    """The budget limits the options set (as :class:`~tunewise.budget.Budget` fields)."""
    limits = {"max_trials": _whole("--trials", args.trials),
              "time_budget": parse_duration(args.time_budget) if args.time_budget else None,
              "per_task_trials": _whole("--per-task-trials", args.per_task_trials),
              "patience": _whole("--patience", args.patience),
              "count_failures": False if args.no_count_failures else None}
    return {k: v for k, v in limits.items() if v is not None}


def _budget(args):
    """The budget the options give (with the default budget's run-wide limits when they set neither trials nor
    time), or ``None`` when they set no limit."""
    import dataclasses

    limits = _limits(args)
    if not limits:
        return None
    if "max_trials" not in limits and "time_budget" not in limits:
        return dataclasses.replace(RunSettings.budget, **limits)
    from tunewise.budget import Budget

    return Budget(**limits)


def _tune_options(args) -> dict:
    """The run settings the ``tune`` options give (:class:`~tunewise.settings.RunSettings` fields); those not
    given are left to the settings' defaults."""
    from tunewise.importing import frontend

    options = {"input_shapes": frontend.parse_input_shapes(args.input_shape), "budget": _budget(args),
               "scheduler": args.scheduler, "trials_per_slot": _whole("--trials-per-slot", args.trials_per_slot),
               "level": args.graph_level, "precision": args.precision,
               "seed": _whole("--seed", args.seed, minimum=0),
               "evaluator": args.evaluator, "cost_model": args.cost_model, "output": args.output,
               "share": _share(args), "warm_start": False if args.no_warm_start else None,
               "pretrained": False if args.no_pretrained else None, "goal": args.goal,
               "records_base": args.records_base,
               "energy_budget": parse_energy(args.energy_budget) if args.energy_budget is not None else None,
               "diminishing": _number("--diminishing", args.diminishing),
               "give_up": _number("--give-up", args.give_up),
               "check_every": (args.check_every if args.check_every in (None, model_checks.EPOCH, model_checks.NEVER)
                               else parse_duration(args.check_every, "model-check interval",
                                                   words=(model_checks.EPOCH, model_checks.NEVER))),
               "energy_meter": args.energy_meter, "candidate_filter": args.candidate_filter, "runner": args.runner,
               "measure": MeasureConfig(enable_cpu_cache_flush=True) if args.cache_flush else None,
               **_finish_options(args)}
    return {k: v for k, v in options.items() if v is not None and v != {}}


def _finish_options(args) -> dict:
    """The finish the ``tune`` options set (:class:`~tunewise.settings.RunSettings` fields), those not given left
    out: a new run's defaults, a resumed run's own."""
    options = {"references": False if args.no_references else None,
               "timing_rounds": _whole("--timing-rounds", args.timing_rounds),
               "time_untuned": True if args.time_untuned else None}
    return {k: v for k, v in options.items() if v is not None}


def _share(args) -> str | None:
    """The sharing mode ``--share`` or ``--no-share`` gives (``None``: neither)."""
    if args.no_share and args.share not in (None, "off"):
        raise InputError(f"--no-share is --share off: drop one of --no-share and --share {args.share}")
    return "off" if args.no_share else args.share


def _cmd_tune(args) -> int:
    from tunewise.delivery.timing import REFERENCES, relation
    from tunewise.job import workflow

    if args.resume is not None:
        own = ("scheduler", "trials_per_slot", "graph_level", "precision", "seed", "target", "evaluator",
               "cost_model", "goal", "energy_budget", "diminishing", "check_every", "energy_meter", "candidate_filter",
               "share", "runner", "cache_flush", "give_up", "records_base")
        fixed = [f"--{name.replace('_', '-')}" for name in own if getattr(args, name) is not None]
        fixed += [flag for flag, given in (("--no-share", args.no_share), ("--no-warm-start", args.no_warm_start),
                                           ("--no-pretrained", args.no_pretrained)) if given]
        if fixed or args.input_shape:
            dropped = ", ".join(fixed) or "--input-shape"
            raise InputError(f"--resume continues a run with its own settings; drop {dropped}")
        finishing = _finish_options(args)
        result = workflow.resume(_whole("RUN", args.resume, minimum=1), store=args.store, budget=_limits(args),
                                 source=args.model, progress=True, output=args.output,
                                 compare_torch=finishing.get("references"),
                                 timing_rounds=finishing.get("timing_rounds"),
                                 time_untuned=finishing.get("time_untuned"))
    elif args.model is None:
        raise InputError("name a model to tune, or --resume RUN (see tunewise tune --help)")
    else:
        result = workflow.tune(args.model, RunSettings(**_tune_options(args)), target=args.target, store=args.store,
                               progress=True)
    print(f"model            {result.model} ({result.tasks} tasks), run {result.run}")
    shared = f", {result.shared} shared between tasks" if result.shared else ""
    skipped = f"; {result.skipped} proposals skipped by the filter" if result.skipped else ""
    print(f"trials           {result.trials} ({result.failures} failed{shared}) in {result.tuning_seconds:.0f}s"
          + skipped)
    if result.base_tasks:
        from tunewise.report import base_line

        print(f"record base      {base_line(result.base_tasks, result.tasks, result.records_base)}")
    if result.pretrained_tasks:
        from tunewise.report import pretrained_line

        print(f"pretrained       {pretrained_line(result.pretrained_tasks, result.tasks)}")
    timed = result.untuned_latency is not None
    untuned = result.untuned_latency if timed else result.untuned_estimate
    if math.isfinite(untuned):
        estimated = "" if timed else " estimated from its tasks' default latencies (--time-untuned times it)"
        print(f"untuned TVM      {untuned * 1e3:.3f} ms{estimated}")
    print(f"tuned TVM        {result.tuned_latency * 1e3:.3f} ms"
          + (f" ({relation(result.tuned_latency, untuned, 'untuned')})" if math.isfinite(untuned) else ""))
    if result.records != "final":
        print(f"records          the best as of {result.records}, checked while tuning: the final ones timed "
              f"{result.final_latency * 1e3:.3f} ms beside them")
    for key, latency in result.references().items():
        name = REFERENCES[key]
        ratio = result.ratios.get(key, result.tuned_latency / latency)  # in the same rounds, where timed in turn
        print(f"{name:16s} {latency * 1e3:.3f} ms (tuned TVM is {relation(ratio, 1.0)})")
    print(f"timed as         {result.timing}")
    slower = _slower_than_while_tuning(result.since_check)
    if slower:
        print(f"slow stretch     {slower}")
    if result.measured:
        from tunewise.report import check_text

        print(f"while tuning     {', '.join(map(check_text, result.measured))} (compiled, checked and timed as above)")
    if result.stopped_by:
        print(f"stopped          {result.stopped_by}")
    if result.joules is not None:
        parts = " + ".join(f"{joules / 1e3:.1f} kJ {energy.LABELS.get(name, name)}"
                           for name, joules in result.joules_parts.items())
        estimated = f" ({parts})" if parts else " (estimated from CPU time)" if result.joules_estimated else ""
        print(f"tuning energy    {result.joules / 1e3:.1f} kJ{estimated}")
    print(f"outputs          {_outputs_text(result)}")
    print(f"artifact         {result.artifact}")
    split = ", ".join(f"{name} {seconds:.0f}s" for name, seconds in result.phase_seconds.items())
    print(f"wall time        {sum(result.phase_seconds.values()):.0f}s: {split}")
    return 0


def _outputs_text(result) -> str:
    """How the tuned model's outputs compare with the reference's, for the summary."""
    stated = result.accuracy or {"samples": 1, "max_relative_error": result.max_error, "argmax_agreement": None}
    inputs = f"{stated['samples']} random input{'s' if stated['samples'] > 1 else ''}"
    if result.precision == precision.DEFAULT:
        text = f"match the reference on {inputs} (max relative error {stated['max_relative_error']:.2e})"
    else:
        text = (f"{result.precision}: within {kernel_checks.tolerance(result.precision)[1]:g} of the float32 "
                f"reference's scale on {inputs} (max error {stated['max_relative_error']:.2e} of it)")
    if stated["argmax_agreement"] is not None:
        text += f"; the arg-max agrees on {stated['argmax_agreement']:.0%} of them"
    return text


def _cmd_tune_many(args) -> int:
    from tunewise import cluster, populations
    from tunewise.budget import Budget

    limits = {"max_trials": _whole("--trials", args.trials),
              "time_budget": parse_duration(args.time_budget) if args.time_budget else None}
    limits = {k: v for k, v in limits.items() if v is not None}
    options = {"goal": args.goal, "references": False if args.no_references else None,
               "scheduler": args.scheduler, "seed": _whole("--seed", args.seed, minimum=0)}
    policy = populations.create(args.policy)
    round_seconds = parse_duration(args.round, "round length")
    resume = []
    if args.resume is not None:
        given = [flag for flag in ("--trials", "--time-budget", "--goal", "--scheduler", "--seed", "--output",
                                   "--no-references") if getattr(args, flag[2:].replace("-", "_")) not in (None, False)]
        if args.models or given:
            raise InputError(f"--resume continues the fleet's runs with their own models and settings; drop "
                             f"{', '.join(given) or ' '.join(args.models)}")
        resume = [_whole("RUNS", run) for run in args.resume.split(",")]
    elif not limits:
        raise InputError("give each model a budget: --trials or --time-budget (see tunewise tune-many --help)")
    settings = RunSettings(**{k: v for k, v in options.items() if v is not None},
                           **({"budget": Budget(**limits)} if limits else {}))

    def print_round(index, plan, names, outcomes) -> None:
        waiting = [names[i] for i in plan.suspend]
        print(f"round {index}: " + "; ".join(
            f"{names[i]} {o.latency * 1e3:.3f} ms after {o.elapsed:.0f}s and {o.trials} trials"
            + (f" (done{': ' + o.stopped_by if o.stopped_by else ''})" if o.finished else "")
            for i, o in outcomes.items()) + (f"; suspended {', '.join(waiting)}" if waiting else ""), flush=True)

    fleet = cluster.tune_many(args.models, cluster=args.cluster, store=args.store, policy=policy,
                              round_seconds=round_seconds, settings=settings, output=args.output,
                              on_round=print_round, resume=resume)
    print(f"{fleet.rounds} rounds, {fleet.suspensions} suspensions, {fleet.resumptions} resumptions")
    for run, result in zip(fleet.runs, fleet.results, strict=True):
        if result is not None:
            print(f"run {run:<4} {result.model:20s} tuned {result.tuned_latency * 1e3:.3f} ms, {result.trials} "
                  f"trials, artifact {result.artifact}")
    return 0


def _cmd_run(args) -> int:
    import numpy as np

    from tunewise.delivery import compile as compiler

    repeat = _whole("--repeat", args.repeat)
    model = compiler.load(args.artifact)
    if "inputs" not in model.metadata:
        raise InputError(f"{os.path.join(args.artifact, compiler.METADATA)} describes no inputs for tunewise run to "
                         "make: call tunewise.load() from Python with your own inputs, or rebuild the artifact")
    generator = np.random.default_rng(0)
    inputs = [generator.standard_normal(spec["shape"]).astype(spec["dtype"])
              if np.dtype(spec["dtype"]).kind == "f" else np.zeros(spec["shape"], dtype=spec["dtype"])
              for spec in model.metadata["inputs"]]
    outputs = model(*inputs)
    latency = model.time(*inputs, repeat=repeat)
    print(f"{model.metadata.get('model', args.artifact)}: median {latency.median * 1e3:.3f} ms over "
          f"{latency.repeats} repeats (min {latency.minimum * 1e3:.3f} ms); outputs "
          + ", ".join(str(tuple(o.shape)) for o in outputs))
    return 0


def _cmd_streams(args) -> int:
    from tunewise import runtime, zoo
    from tunewise.importing import frontend

    if args.model in zoo.MODELS or not os.path.exists(args.model):
        model, inputs = zoo.get(args.model)
        plan = runtime.plan_model(model, inputs, merge=args.merge)
    elif args.model.endswith(".pt2"):
        plan = runtime.plan_exported(frontend.read_exported_program(args.model), merge=args.merge)
    else:
        raise InputError(f"streams plans PyTorch models: a zoo name or a .pt2 file, not {args.model}")
    print(plan.describe())
    return 0


def _cmd_tasks(args) -> int:
    from tunewise import target as targets
    from tunewise import zoo
    from tunewise.importing import frontend
    from tunewise.lowering import tasks
    from tunewise.tuning import measure, tvm_env

    if args.list:
        for name, entry in zoo.MODELS.items():
            print(f"{name:16s} input {'x'.join(map(str, entry.input_shape))} ({entry.input_kind})")
        return 0
    if args.model is None:
        raise InputError("name a model, or --list the zoo's models (see tunewise tasks --help)")

    target = targets.resolve(args.target)
    if not args.no_measure:
        targets.check_runnable(target)
        targets.check_cores(target)
    precision.check(args.precision, target)
    tvm_env.prepare(target.kind.name)
    imported = frontend.load(args.model, input_shapes=frontend.parse_input_shapes(args.input_shape))
    measurer = None if args.no_measure else measure.Measurer(target)
    try:
        model = tasks.extract(imported, target, level=args.graph_level, precision=args.precision, measurer=measurer)
    finally:
        if measurer is not None:
            measurer.close()
    selection = None
    if not args.no_groups:
        from tunewise import sharing

        selection = sharing.select_tasks(model.tasks, [sharing.task_signature(m, target) for m in model.task_mods])
    print(f"{'task':48s} {'weight':>6s} {'MFLOP':>10s} {'default ms':>11s}"
          + ("" if selection is None else f" {'group':>5s}  representative"))
    for k, t in enumerate(model.tasks):
        line = f"{t.name[:48]:48s} {t.weight:6d} {t.flops / 1e6:10.2f} {t.default_latency * 1e3:11.3f}"
        if selection is not None:
            source = selection.source[k]
            line += f" {selection.group[k]:5d}  " + ("yes" if source is None else f"no: gets task {source}'s")
        print(line)
    groups = "" if selection is None else (f"; {sum(s is None for s in selection.source)} representatives "
                                           "under --share selective (tasks numbered from 0)")
    print(f"{len(model.tasks)} tasks; untuned estimate {model.untuned_latency() * 1e3:.3f} ms{groups}")
    return 0


def _open_store(args):
    from tunewise import stores

    return stores.create(args.store, read_only=True)


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
    artifacts = store.get_artifacts(run)
    if artifacts and artifacts[-1].metadata.get("pretrained_tasks"):
        print(report.pretrained_line(artifacts[-1].metadata["pretrained_tasks"], len(store.get_tasks(run))))
    return 0


def _cmd_report(args) -> int:
    from tunewise import report
    from tunewise.delivery import destinations

    runs = [_whole("RUN", run) for run in args.runs]
    report.check_suffix(args.output)
    destinations.check_file(args.output, "report")
    store = _open_store(args)
    summaries = [report.summarize(store, run) for run in runs]
    print(f"wrote {report.write(summaries, args.output)}")
    return 0


def _slower_than_while_tuning(since_check: dict | None) -> str:
    """What the summary says where ``since_check`` (:attr:`tunewise.delivery.finish.Finished.since_check`) finds
    the model a check read while tuning timed in a slow stretch after tuning
    (:func:`tunewise.tuning.model_checks.in_slow_stretch`): the machine runs slower than it did, and so do the
    models timed after tuning; nothing otherwise."""
    if since_check is None or not model_checks.in_slow_stretch(since_check["timed_s"], since_check["read_s"]):
        return ""
    read, timed, count = since_check["read_s"], since_check["timed_s"], since_check["timings"]
    return (f"the model checked after {since_check['trials']} trials timed {timed * 1e3:.3f} ms here against "
            f"{read * 1e3:.3f} ms while tuning ({timed / read:.2f}x"
            + ("" if count == 1 else f", the nearest of {count} timings") + "): the machine runs slower now, and so "
            "do the models timed above")


def _cmd_records(args) -> int:
    from tunewise import stores
    from tunewise.tuning import tvm_env

    if args.records_command in ("build", "merge"):
        return _write_base(args)
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
        print(f"imported {count} records from {args.directory} as run {run}" if run is not None else
              f"nothing to import: every record in {args.directory} is already in the store")
    return 0


def _write_base(args) -> int:
    """``tunewise records build`` and ``merge``: write a record base, and say what it holds."""
    from tunewise.delivery import destinations
    from tunewise.tuning import tvm_env

    destinations.check_file(args.output, "record base")  # before a build that may read a large store
    if args.records_command == "build":
        runs = None if args.runs is None else [_whole("RUNS", run) for run in args.runs.split(",")]
        store = _open_store(args)
        tvm_env.prepare()
        base = sharing.build_base(store, runs, isa=args.isa)
    else:
        base = sharing.RecordBase.merged([sharing.RecordBase.read(path) for path in args.bases])
    if not base.workloads:
        cpu = f"instruction-set class {args.isa}" if getattr(args, "isa", None) else "an instruction-set class"
        raise InputError("no record to write: " + (f"the runs hold no measured record of a CPU of {cpu}"
                                                   if args.records_command == "build" else "the bases are empty"))
    base.write(args.output)
    counts = ", ".join(f"{len(base.of_class(isa))} {isa}" for isa in base.classes())
    records = sum(len(w.records) for w in base.workloads)
    print(f"wrote {records} records of {len(base.workloads)} workloads ({counts}) to {args.output} "
          f"({os.path.getsize(args.output) / 1024:.1f} KiB)")
    return 0


_COMMANDS = {"tune": _cmd_tune, "tune-many": _cmd_tune_many, "run": _cmd_run, "tasks": _cmd_tasks,
             "runs": _cmd_runs, "show": _cmd_show, "report": _cmd_report, "records": _cmd_records,
             "streams": _cmd_streams}


def _interrupted(err: KeyboardInterrupt, command: str | None) -> int:
    """Say what a stop (Ctrl-C, SIGTERM) of ``command`` left and how to continue; the exit code."""
    from tunewise.job import interrupts, workflow

    stop = err if isinstance(err, interrupts.Interrupted) else interrupts.Interrupted()
    if stop.said is not None:
        print(f"tunewise: {stop.describe()}", file=sys.stderr)
    elif command != "tune":
        print("tunewise: interrupted", file=sys.stderr)
    elif stop.run is None:
        print("tunewise: interrupted before any trial was measured; nothing to resume", file=sys.stderr)
    else:
        print(f"tunewise: {stop.describe()}: continue with {workflow.resume_command(stop.run, stop.store_url)}",
              file=sys.stderr)
    return stop.exit_code


def _without_passwords(text: str, argv: list[str]) -> str:
    """``text`` with the password of any store URL among the arguments hidden."""
    from tunewise.stores import hide_secrets

    for arg in argv:
        text = hide_secrets(text, arg)
    return text


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = None
    try:
        args = _parser().parse_args(argv)
        with logs.routed(args.command, verbose=args.verbose or None):
            from tunewise.job import interrupts

            if args.command == "tune-many":
                with interrupts.raised():
                    return _cmd_tune_many(args)
            if args.command != "tune":
                return _COMMANDS[args.command](args)
            with interrupts.handled():
                return _cmd_tune(args)
    except TunewiseError as err:
        print(f"tunewise: error: {_without_passwords(str(err), argv)}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt as err:
        return _interrupted(err, args and args.command)
    except BrokenPipeError:  # the reader went away (`tunewise show 1 | head`): nothing more to say
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # so the exit's flush of stdout has somewhere to go
        return 0
    except Exception as err:
        if os.environ.get("TUNEWISE_DEBUG"):
            raise
        first = message_line(err) if str(err).strip() else ""
        print(f"tunewise: internal error: {type(err).__name__}: {_without_passwords(first, argv)} "
              "(TUNEWISE_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 1


def run() -> None:
    """The ``tunewise`` program: :func:`main`, then exit; TVM imported first, without PyTorch
    (:func:`tunewise.tuning.tvm_env.import_tvm`), and the worker processes' zygote forked from this process then
    (:func:`tunewise.tuning.workers.fork_zygote`: no worker imports TVM again). The interpreter's last garbage
    collection, over the millions of objects TVM and PyTorch leave, takes one to two seconds and frees nothing
    the exit would not, so those objects are frozen out of it."""
    from tunewise.job import interrupts
    from tunewise.tuning import tvm_env

    tvm_env.import_tvm()
    from tunewise.tuning import workers  # imports TVM: after import_tvm

    workers.fork_zygote()
    try:
        code = main()
    except KeyboardInterrupt:  # a further Ctrl-C while the command was saying how it stopped
        code = interrupts.Interrupted().exit_code
    interrupts.ignore_from_now()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()

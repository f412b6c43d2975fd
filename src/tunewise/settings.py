"""The settings of a tuning run: one frozen object, one set of defaults, one JSON form in the store.

:class:`RunSettings` is what ``tunewise tune`` (its options), :func:`tunewise.tune` (its keywords) and
:func:`tunewise.job.prepare.prepare_run` (the bench scripts) start a run with, and what the store keeps for
:func:`tunewise.resume`. Its field defaults are the defaults of all of them.

Runs stored with fewer keys are read by :meth:`RunSettings.from_json` with the value each such run was tuned with
(:data:`ADDED_KEYS`): ``share`` ``"off"`` (runs stored before schedule sharing existed tuned every task alone),
``warm_start`` false (no run started from other runs' records before warm starts existed), ``evaluator``
``"fixed"`` and ``cost_model`` ``"xgb"`` (what tunewise ran for settings without them), ``runner`` ``"local"`` (the
only runner there was), no stop rule and no model checks (``goal``, ``energy_budget``, ``diminishing``,
``check_every``, ``give_up`` ``None``), the ``"auto"`` energy meter and no candidate filter, and the finish every
run had before its finish was a setting (``references`` true, ``timing_rounds`` :data:`tunewise.delivery.timing.ROUNDS`,
``time_untuned`` false), ``records_base`` ``"off"`` (no run read a record base before record bases
existed), and no pretrained cost model (``pretrained`` false). A ``check_every`` stored as ``None`` is the rule
such runs were tuned with: checks only
with a goal or ``diminishing``. A ``share`` stored as true or false (the form before sharing had modes) reads as
``"same-anchor"`` or ``"off"``, what those runs were tuned with. Every other key has been stored since runs had
settings, so settings without one are not a tuning run's, and are refused.

>>> settings = RunSettings(source="tiny-mlp", budget=Budget(max_trials=32))
>>> RunSettings.from_json(settings.to_json()) == settings
True
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from tunewise import candidate_runners, cost_models, energy, evaluators, filters, schedulers, sharing
from tunewise.budget import Budget
from tunewise.delivery import timing
from tunewise.errors import InputError
from tunewise.goals import Goal
from tunewise.lowering import graph
from tunewise.tuning.checks import DEFAULT_EVERY, EPOCH, NEVER
from tunewise.tuning.measure import MeasureConfig

ADDED_KEYS: Mapping[str, object] = {"share": "off", "warm_start": False, "evaluator": "fixed", "cost_model": "xgb",
                                    "runner": "local", "goal": None, "energy_budget": None, "diminishing": None,
                                    "check_every": None, "energy_meter": "auto", "candidate_filter": None,
                                    "give_up": None, "references": True, "timing_rounds": timing.ROUNDS,
                                    "time_untuned": False, "records_base": sharing.OFF, "pretrained": False}
"""Keys a stored run may lack, each with the value the runs stored without it were tuned with."""


@dataclass(frozen=True)
class RunSettings:
    """How a run tunes. Every field is checked on construction (:class:`~tunewise.errors.InputError`).

    ``source`` is a zoo name or an absolute model-file path (``None``: a Python model object, passed again to
    resume); ``scheduler`` a :mod:`tunewise.schedulers` name (``None``: a scheduler object); ``input_shapes``
    maps ONNX input names to shapes; ``level`` is the graph level (:data:`tunewise.lowering.graph.LEVELS`; ``None``: the
    target's, :func:`tunewise.lowering.graph.default_level`, which a stored run keeps); ``evaluator``, ``cost_model``
    and ``runner`` are names for :func:`tunewise.evaluators.create`, :func:`tunewise.cost_models.create` and
    :func:`tunewise.candidate_runners.create`; ``share`` is how tasks share
    schedules (:data:`tunewise.sharing.MODES`: ``"off"``, ``"same-anchor"``, ``"selective"``), and ``warm_start``
    lets a new task start from the best records of the most similar workloads of other runs in the store
    (:mod:`tunewise.sharing`); ``records_base`` is the record base a new task also starts from where the store
    has no record of its workload: ``"bundled"`` (the package's, for the target's ISA class, when it ships
    one), ``"off"``, or a base file's path (kept absolute; ``tunewise records build``); ``output`` is the
    artifact folder (``None``: ``tunewise-out/MODEL``).

    Stop rules (:mod:`tunewise.stoppers`), for any scheduler: ``goal`` (:class:`tunewise.goals.Goal` text:
    ``"12ms"``, ``"0.9x-ort"``) ends the run once the measured model latency reaches it; ``energy_budget``
    (joules) once the run has used that much energy (metered by ``energy_meter``, a
    :func:`tunewise.energy.create` name); ``diminishing`` (Trimmer's ``phi``, e.g. -0.25) once the model
    improves that much more slowly per second than over the check interval before; ``give_up`` (a probability
    in ``(0, 1]``, with ``goal`` only) once the forecast (:mod:`tunewise.forecast`) says the goal will not be
    reached within the budget with at least that probability. ``check_every`` is the
    tuning time (seconds) between whole-model checks (:mod:`tunewise.tuning.checks`), ``"epoch"`` (after each
    epoch, :data:`tunewise.tuning.checks.EPOCH`) or ``"never"`` (:data:`tunewise.tuning.checks.NEVER`); ``None``, a
    stored
    run's form, checks every :data:`tunewise.tuning.checks.DEFAULT_EVERY` seconds with a goal or ``diminishing``, else
    never.
    ``candidate_filter`` names a :mod:`tunewise.filters` filter (``"cold"``: Trimmer's) that skips proposals
    not worth measuring (``None``: none).

    The finish, once tuning ends (:func:`tunewise.delivery.finish.finish`): ``references`` times PyTorch eager and
    onnxruntime beside the tuned model (on a GPU: PyTorch eager, its CUDA graph and ``tunewise.runtime.aot``),
    ``timing_rounds`` is how many rounds the models are timed in (:mod:`tunewise.delivery.timing`; fewer finish sooner,
    with rougher latencies), and ``time_untuned`` compiles the untuned model and times it beside the tuned one.

    ``pretrained`` starts the ``"xgb"`` cost model from the pretrained model shipped for the target's ISA class
    (:func:`tunewise.cost_models.pretrained_for`), where one is shipped: it ranks each task's candidates from
    its first slot and keeps learning from the run's measurements. Other cost models, and targets without a
    shipped model, tune as without it.
    """

    source: str | None = None
    scheduler: str | None = schedulers.DEFAULT
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    budget: Budget = Budget(max_trials=200)
    trials_per_slot: int = 16
    level: str | None = None
    seed: int = 0
    evaluator: str = evaluators.DEFAULT
    cost_model: str = "xgb"
    share: str = "same-anchor"
    warm_start: bool = True
    output: str | None = None
    measure: MeasureConfig = MeasureConfig()
    runner: str = candidate_runners.DEFAULT
    goal: str | None = None
    energy_budget: float | None = None
    diminishing: float | None = None
    check_every: float | str | None = DEFAULT_EVERY
    energy_meter: str = "auto"
    candidate_filter: str | None = None
    give_up: float | None = None
    references: bool = True
    timing_rounds: int = timing.ROUNDS
    time_untuned: bool = False
    records_base: str = sharing.BUNDLED
    pretrained: bool = True

    def __post_init__(self):
        object.__setattr__(self, "input_shapes", {k: tuple(v) for k, v in self.input_shapes.items()})
        if not isinstance(self.records_base, str) or not self.records_base:
            raise InputError(f"records base must be {sharing.BUNDLED!r}, {sharing.OFF!r} or a file's path, "
                             f"got {self.records_base!r}")
        if self.records_base not in (sharing.BUNDLED, sharing.OFF):
            if not os.path.isfile(self.records_base):
                raise InputError(f"record base {self.records_base} is not a file (give {sharing.BUNDLED!r}, "
                                 f"{sharing.OFF!r} or the path of a base that tunewise records build wrote)")
            object.__setattr__(self, "records_base", os.path.abspath(self.records_base))
        if not isinstance(self.budget, Budget):
            raise InputError(f"budget must be a tunewise Budget, got {self.budget!r}")
        if not isinstance(self.measure, MeasureConfig):
            raise InputError(f"measure must be a tunewise MeasureConfig, got {self.measure!r}")
        if not _whole(self.trials_per_slot) or self.trials_per_slot <= 0:
            raise InputError(f"trials per slot must be positive, got {self.trials_per_slot}")
        if not _whole(self.timing_rounds) or self.timing_rounds < 1:
            raise InputError(f"timing rounds must be a whole number of at least 1, got {self.timing_rounds!r}")
        for name in ("references", "time_untuned", "pretrained"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name.replace('_', ' ')} must be true or false, got {getattr(self, name)!r}")
        if not _whole(self.seed) or self.seed < 0:
            raise InputError(f"seed must be a whole number of at least 0, got {self.seed!r}")
        if self.share not in sharing.MODES:
            raise InputError(f"unknown sharing mode {self.share!r}; choose one of: {', '.join(sharing.MODES)}")
        if not isinstance(self.warm_start, bool):
            raise InputError(f"warm start must be true or false, got {self.warm_start!r}")
        if self.level is not None and self.level not in graph.LEVELS:
            raise InputError(f"unknown graph level {self.level!r}; choose one of: {', '.join(graph.LEVELS)}")
        if self.goal is not None:
            Goal.parse(self.goal)
        if self.energy_budget is not None and not _positive(self.energy_budget):
            raise InputError(f"energy budget must be a positive number, got {self.energy_budget!r}")
        if self.check_every not in (None, EPOCH, NEVER) and not _positive(self.check_every):
            raise InputError(f"model-check interval must be a positive number, {EPOCH!r} or {NEVER!r}, "
                             f"got {self.check_every!r}")
        if self.check_every == NEVER and (self.goal is not None or self.diminishing is not None):
            raise InputError("a latency goal and diminishing returns stop on whole-model checks: they cannot "
                             f"run with model checks {NEVER!r}")
        if self.give_up is not None:
            if not _probability(self.give_up):
                raise InputError(f"give-up probability must be a number in (0, 1], got {self.give_up!r}")
            if self.goal is None:
                raise InputError("giving up needs a latency goal to give up on: set a goal (--goal) too")
        if self.diminishing is not None and not _real(self.diminishing):
            raise InputError(f"diminishing-returns threshold must be a number, got {self.diminishing!r}")
        for kind, name, valid in (("scheduler", self.scheduler, schedulers.names()),
                                  ("evaluator", self.evaluator, evaluators.names()),
                                  ("cost model", self.cost_model, cost_models.names()),
                                  ("candidate filter", self.candidate_filter, filters.names())):
            if name not in valid and not (kind in ("scheduler", "candidate filter") and name is None):
                raise InputError(f"unknown {kind} {name!r}; valid names: {', '.join(valid)}")
        if not energy.is_valid(self.energy_meter):
            raise InputError(f"unknown energy meter {self.energy_meter!r}; valid names: {', '.join(energy.names())}, "
                             "or several joined by +")
        if not candidate_runners.is_valid(self.runner):
            raise InputError(f"unknown runner {self.runner!r}; valid names: {', '.join(candidate_runners.names())}")

    @property
    def check_interval(self) -> float | str | None:
        """Seconds of tuning time between whole-model checks, or ``"epoch"``; ``None``: no checks."""
        if self.check_every is None:
            return DEFAULT_EVERY if self.goal is not None or self.diminishing is not None else None
        return None if self.check_every == NEVER else self.check_every

    def with_limits(self, budget: Budget | Mapping) -> RunSettings:
        """These settings with the limits ``budget`` sets (a :class:`~tunewise.budget.Budget`, or a mapping of
        some of its fields; ``None`` values set nothing) replacing the budget's, its other limits kept."""
        changes = dataclasses.asdict(budget) if isinstance(budget, Budget) else dict(budget)
        unknown = set(changes) - {f.name for f in dataclasses.fields(Budget)}
        if unknown:
            raise InputError(f"unknown budget limits: {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, budget=dataclasses.replace(
            self.budget, **{k: v for k, v in changes.items() if v is not None}))

    def artifact_folder(self, model: str) -> str:
        """Where the artifact of model ``model`` goes: ``output``, else ``tunewise-out/MODEL`` (absolute)."""
        return self.output or os.path.abspath(os.path.join("tunewise-out", model))

    def to_json(self) -> dict:
        """The JSON object the store keeps (budget and measure as objects, shapes as lists)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data.update(input_shapes={k: list(v) for k, v in self.input_shapes.items()},
                    budget=dataclasses.asdict(self.budget), measure=dataclasses.asdict(self.measure))
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> RunSettings:
        """The settings :meth:`to_json` gave, or a run stored without some of :data:`ADDED_KEYS` (each gets the
        value those runs were tuned with). Raises :class:`~tunewise.errors.InputError` on settings that lack
        another key, hold a key these settings do not have, or a bad value."""
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [k for k in names if k not in data and k not in ADDED_KEYS]
        if missing:
            raise InputError(f"these are not a tuning run's settings: they lack {', '.join(missing)}")
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise InputError(f"the run's settings hold keys this version of tunewise does not know: "
                             f"{', '.join(unknown)}")
        values = {**ADDED_KEYS, **data}
        if isinstance(values["share"], bool):  # the form of runs stored before sharing had modes
            values["share"] = "same-anchor" if values["share"] else "off"
        for key, kind in (("budget", Budget), ("measure", MeasureConfig)):
            try:
                values[key] = kind(**values[key])
            except TypeError as err:
                raise InputError(f"bad {key} in the run's settings: {err}") from None
        return cls(**values)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _real(value) -> bool:
    """Whether ``value`` is a finite number (a bool is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value) -> bool:
    return _real(value) and value > 0


def _probability(value) -> bool:
    return _real(value) and 0 < value <= 1

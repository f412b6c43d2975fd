"""The settings of a tuning run: one frozen object, one set of defaults, one JSON form in the store.

:class:`RunSettings` is what ``tunewise tune`` (its options), :func:`tunewise.tune` (its keywords) and
:func:`tunewise.job.prepare.prepare_run` (the bench scripts) start a run with, and what the store keeps for
:func:`tunewise.resume`; its field defaults are the defaults of all of them. A stored run that lacks some of
:data:`ADDED_KEYS` is read with the value it was tuned with (a ``share`` stored as true or false reads as
``"same-anchor"`` or ``"off"``; a ``check_every`` stored as ``None`` checks only with a goal or ``diminishing``);
settings that lack any other key are not a tuning run's, and are refused.

>>> settings = RunSettings(source="tiny-mlp", budget=Budget(max_trials=32))
>>> RunSettings.from_json(settings.to_json()) == settings
True
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from tunewise import candidate_runners, cost_models, energy, evaluators, filters, schedulers, sharing
from tunewise._numbers import is_positive, is_real, is_whole
from tunewise.budget import Budget
from tunewise.delivery import timing
from tunewise.errors import InputError
from tunewise.goals import Goal
from tunewise.lowering import graph
from tunewise.lowering import precision as precisions
from tunewise.tuning.measure import MeasureConfig
from tunewise.tuning.model_checks import DEFAULT_EVERY, EPOCH, NEVER

ADDED_KEYS: Mapping[str, object] = {"share": "off", "warm_start": False, "evaluator": "fixed", "cost_model": "xgb",
                                    "runner": "local", "goal": None, "energy_budget": None, "diminishing": None,
                                    "check_every": None, "energy_meter": "auto", "candidate_filter": None,
                                    "give_up": None, "references": True, "timing_rounds": timing.ROUNDS,
                                    "time_untuned": False, "records_base": sharing.OFF, "pretrained": False,
                                    "precision": precisions.DEFAULT}
"""Keys a stored run may lack, each with the value the runs stored without it were tuned with."""


@dataclass(frozen=True)
class RunSettings:
    """How a run tunes: every field is checked on construction (:class:`~tunewise.errors.InputError`), and
    the comment beside it says what it holds. Names are those of the factories
    (:func:`tunewise.evaluators.create`, :func:`tunewise.cost_models.create`,
    :func:`tunewise.candidate_runners.create`, :func:`tunewise.filters.create`, :func:`tunewise.energy.create`).
    The stop rules (:mod:`tunewise.stoppers`: ``goal``, ``energy_budget``, ``diminishing``, ``give_up``) work
    with any scheduler; the finish (``references``, ``timing_rounds``, ``time_untuned``) is what
    :func:`tunewise.delivery.finish.finish` does once tuning ends. ``goal`` is given as
    :class:`tunewise.goals.Goal` text (``"12ms"``, ``"0.9x-ort"``) and held parsed, once.
    """

    source: str | None = None  # zoo name or absolute model-file path (None: a Python model, passed again to resume)
    scheduler: str | None = schedulers.DEFAULT  # a tunewise.schedulers name (None: a scheduler object)
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # ONNX input name -> shape
    budget: Budget = Budget(max_trials=200)
    trials_per_slot: int = 16
    level: str | None = None  # graph level, lowering.graph.LEVELS (None: the target's; a stored run keeps it)
    precision: str = precisions.DEFAULT  # what the model computes in: lowering.precision.PRECISIONS
    seed: int = 0
    evaluator: str = evaluators.DEFAULT
    cost_model: str = "xgb"
    share: str = "same-anchor"  # how tasks share schedules: a tunewise.sharing.MODES name
    warm_start: bool = True  # a new task starts from the best records of similar workloads of other runs
    output: str | None = None  # the artifact folder (None: tunewise-out/MODEL)
    measure: MeasureConfig = MeasureConfig()
    runner: str = candidate_runners.DEFAULT
    goal: Goal | None = None  # stop once the measured model latency reaches it
    energy_budget: float | None = None  # joules: stop once the run used that much (metered by energy_meter)
    diminishing: float | None = None  # Trimmer's phi (e.g. -0.25): stop once the model improves that much slower
    check_every: float | str | None = DEFAULT_EVERY  # seconds between whole-model checks, "epoch" or "never"
    energy_meter: str = "auto"
    candidate_filter: str | None = None  # skips proposals not worth measuring ("cold": Trimmer's; None: none)
    give_up: float | None = None  # with a goal: stop once the forecast says it is missed with this probability
    references: bool = True  # time PyTorch eager and onnxruntime (on a GPU: eager, its CUDA graph, aot) beside
    timing_rounds: int = timing.ROUNDS  # rounds the models are timed in (fewer: sooner, rougher)
    time_untuned: bool = False  # compile the untuned model and time it beside the tuned one
    records_base: str = sharing.BUNDLED  # a new task's records where the store has none: "bundled", "off", a path
    pretrained: bool = True  # start "xgb" from the model shipped for the target's ISA class, where there is one

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
        if not is_whole(self.trials_per_slot) or self.trials_per_slot <= 0:
            raise InputError(f"trials per slot must be positive, got {self.trials_per_slot}")
        if not is_whole(self.timing_rounds) or self.timing_rounds < 1:
            raise InputError(f"timing rounds must be a whole number of at least 1, got {self.timing_rounds!r}")
        for name in ("references", "time_untuned", "pretrained"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name.replace('_', ' ')} must be true or false, got {getattr(self, name)!r}")
        if not is_whole(self.seed) or self.seed < 0:
            raise InputError(f"seed must be a whole number of at least 0, got {self.seed!r}")
        if self.share not in sharing.MODES:
            raise InputError(f"unknown sharing mode {self.share!r}; choose one of: {', '.join(sharing.MODES)}")
        if not isinstance(self.warm_start, bool):
            raise InputError(f"warm start must be true or false, got {self.warm_start!r}")
        if self.precision not in precisions.PRECISIONS:
            raise InputError(f"unknown precision {self.precision!r}; choose one of: {', '.join(precisions.PRECISIONS)}")
        if self.level is not None and self.level not in graph.LEVELS:
            raise InputError(f"unknown graph level {self.level!r}; choose one of: {', '.join(graph.LEVELS)}")
        if self.goal is not None and not isinstance(self.goal, Goal):
            object.__setattr__(self, "goal", Goal.parse(self.goal))
        if self.energy_budget is not None and not is_positive(self.energy_budget):
            raise InputError(f"energy budget must be a positive number, got {self.energy_budget!r}")
        if self.check_every not in (None, EPOCH, NEVER) and not is_positive(self.check_every):
            raise InputError(f"model-check interval must be a positive number, {EPOCH!r} or {NEVER!r}, "
                             f"got {self.check_every!r}")
        if self.check_every == NEVER and (self.goal is not None or self.diminishing is not None):
            raise InputError("a latency goal and diminishing returns stop on whole-model checks: they cannot "
                             f"run with model checks {NEVER!r}")
        if self.give_up is not None:
            if not is_real(self.give_up) or not 0 < self.give_up <= 1:
                raise InputError(f"give-up probability must be a number in (0, 1], got {self.give_up!r}")
            if self.goal is None:
                raise InputError("giving up needs a latency goal to give up on: set a goal (--goal) too")
        if self.diminishing is not None and not is_real(self.diminishing):
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
                    goal=None if self.goal is None else self.goal.text,
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

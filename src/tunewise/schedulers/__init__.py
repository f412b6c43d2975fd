"""Task schedulers: which task gets the next tuning slot.

Every scheduler follows the contract of :class:`TaskScheduler`; :func:`create` builds one from its name.
:data:`DEFAULT` is ``gated-gradient``: MetaSchedule's gradient rule among the tried tasks, and a task's first
slot only where it is expected to pay (evidence: bench/studies/schedulers/findings.md).

>>> scheduler = create("gradient", seed=0)
>>> create(scheduler) is scheduler
True
"""

from __future__ import annotations

from tunewise import _factory
from tunewise.schedulers._base import TaskScheduler
from tunewise.schedulers._dynatune import DynaTune, DynaTuneEpsilonGreedy, DynaTuneSoftmax
from tunewise.schedulers._expected_gain import ExpectedGain
from tunewise.schedulers._flops import Flops
from tunewise.schedulers._gated_gradient import GatedGradient
from tunewise.schedulers._gradient import Gradient
from tunewise.schedulers._prior import heaviest_by_flops
from tunewise.schedulers._random import Random
from tunewise.schedulers._round_robin import RoundRobin
from tunewise.schedulers._sequential import Sequential
from tunewise.schedulers._survey import Survey

__all__ = [
    "DEFAULT",
    "DynaTune",
    "DynaTuneEpsilonGreedy",
    "DynaTuneSoftmax",
    "ExpectedGain",
    "Flops",
    "GatedGradient",
    "Gradient",
    "Random",
    "RoundRobin",
    "Sequential",
    "Survey",
    "TaskScheduler",
    "create",
    "create_seeded",
    "heaviest_by_flops",
    "names",
]

DEFAULT = "gated-gradient"

_REGISTRY: dict[str, type[TaskScheduler]] = {
    "sequential": Sequential,
    "round-robin": RoundRobin,
    "random": Random,
    "flops": Flops,
    "gradient": Gradient,
    "gated-gradient": GatedGradient,
    "dynatune": DynaTune,
    "dynatune-egreedy": DynaTuneEpsilonGreedy,
    "dynatune-softmax": DynaTuneSoftmax,
    "expected-gain": ExpectedGain,
    "survey": Survey,
}


def names() -> list[str]:
    """The names :func:`create` accepts."""
    return list(_REGISTRY)


def create(name: str | TaskScheduler, **kwargs: object) -> TaskScheduler:
    """The scheduler called ``name``, built with ``kwargs``; an instance is returned unchanged.

    Raises :class:`~tunewise.errors.InputError` on an unknown name, an argument the scheduler does not take
    (the message lists the valid ones), or a bad value.
    """
    registry = {key: (lambda cls=cls: cls) for key, cls in _REGISTRY.items()}
    return _factory.create("scheduler", registry, name, kwargs, TaskScheduler)


def create_seeded(name: str | TaskScheduler, seed: int, **kwargs: object) -> TaskScheduler:
    """:func:`create`, passing ``seed`` to the schedulers that take one (the deterministic ones do not)."""
    if isinstance(name, str) and name in _REGISTRY and "seed" in _factory.arguments(_REGISTRY[name]):
        kwargs["seed"] = seed
    return create(name, **kwargs)

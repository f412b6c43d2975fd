"""Task schedulers: which task gets the next tuning slot.

Every scheduler follows the contract of :class:`TaskScheduler`; :func:`create` builds one from its name.

>>> scheduler = create("gradient", seed=0)
>>> create(scheduler) is scheduler
True
"""

from __future__ import annotations

import inspect

from tunewise.errors import InputError
from tunewise.schedulers._base import TaskScheduler
from tunewise.schedulers._dynatune import DynaTune, DynaTuneEpsilonGreedy, DynaTuneSoftmax
from tunewise.schedulers._flops import Flops
from tunewise.schedulers._gradient import Gradient
from tunewise.schedulers._random import Random
from tunewise.schedulers._round_robin import RoundRobin
from tunewise.schedulers._sequential import Sequential

__all__ = [
    "DynaTune",
    "DynaTuneEpsilonGreedy",
    "DynaTuneSoftmax",
    "Flops",
    "Gradient",
    "Random",
    "RoundRobin",
    "Sequential",
    "TaskScheduler",
    "create",
    "create_seeded",
    "names",
]

_REGISTRY: dict[str, type[TaskScheduler]] = {
    "sequential": Sequential,
    "round-robin": RoundRobin,
    "random": Random,
    "flops": Flops,
    "gradient": Gradient,
    "dynatune": DynaTune,
    "dynatune-egreedy": DynaTuneEpsilonGreedy,
    "dynatune-softmax": DynaTuneSoftmax,
}


def names() -> list[str]:
    """The names :func:`create` accepts."""
    return list(_REGISTRY)


def create(name: str | TaskScheduler, **kwargs: object) -> TaskScheduler:
    """The scheduler called ``name``, built with ``kwargs``; an instance is returned unchanged.

    Raises :class:`~tunewise.errors.InputError` on an unknown name, an argument the scheduler does not take
    (the message lists the valid ones), or a bad value.
    """
    if isinstance(name, TaskScheduler):
        if kwargs:
            raise InputError(f"arguments {sorted(kwargs)} given with a scheduler instance; pass a name")
        return name
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InputError(f"unknown scheduler {name!r}; valid names: {', '.join(_REGISTRY)}")
    valid = _arguments(cls)
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        takes = ", ".join(valid) if valid else "no arguments"
        raise InputError(f"scheduler {name!r} got unknown arguments {unknown}; it takes: {takes}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise InputError(f"scheduler {name!r}: {err}") from err


def create_seeded(name: str | TaskScheduler, seed: int, **kwargs: object) -> TaskScheduler:
    """:func:`create`, passing ``seed`` to the schedulers that take one (the deterministic ones do not)."""
    if isinstance(name, str) and name in _REGISTRY and "seed" in _arguments(_REGISTRY[name]):
        kwargs["seed"] = seed
    return create(name, **kwargs)


def _arguments(cls: type) -> list[str]:
    """The keyword arguments ``cls`` takes, following ``**kwargs`` up to the base class that uses them."""
    names: list[str] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = list(inspect.signature(vars(klass)["__init__"]).parameters.values())[1:]
        names += [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name not in names]
        if all(p.kind is not p.VAR_KEYWORD for p in params):
            break
    return names

"""Energy meters: the joules a run uses, for energy budgets and for reporting.

Every meter follows the contract of :class:`EnergyMeter`; :func:`create` builds one from its name:
``"rapl"`` (CPU packages, :class:`Rapl`), ``"nvml"`` (NVIDIA GPUs, :class:`Nvml`), ``"estimate"`` (CPU time
times a power per core, :class:`CpuTimeEstimate`), or ``"auto"``: the first of those three that can be read
on this machine.

>>> meter = create("estimate")
>>> reading = meter.read()
>>> reading.joules >= 0, reading.estimated
(True, True)
"""

from __future__ import annotations

import contextlib

from tunewise import _factory
from tunewise.energy._base import EnergyMeter, MeterUnavailable, Reading
from tunewise.energy._estimate import WATTS_PER_CORE, CpuTimeEstimate
from tunewise.energy._nvml import Nvml
from tunewise.energy._rapl import Rapl
from tunewise.errors import InputError

__all__ = ["WATTS_PER_CORE", "CpuTimeEstimate", "EnergyMeter", "MeterUnavailable", "Nvml", "Rapl", "Reading",
           "create", "names"]

_REGISTRY: dict[str, type[EnergyMeter]] = {"rapl": Rapl, "nvml": Nvml, "estimate": CpuTimeEstimate}


def names() -> list[str]:
    """The names :func:`create` accepts."""
    return ["auto", *_REGISTRY]


def create(name: str | EnergyMeter = "auto", **kwargs: object) -> EnergyMeter:
    """The meter called ``name``, built with ``kwargs``; an instance is returned unchanged. ``"auto"`` takes
    the arguments of every backend and passes each backend those it takes.

    Raises :class:`~tunewise.errors.InputError` on an unknown name, an argument the meter does not take (the
    message lists the valid ones) or a bad value, and :class:`MeterUnavailable` when the named backend cannot
    be read here.
    """
    if name != "auto":
        if isinstance(name, str) and name not in _REGISTRY:
            raise InputError(f"unknown energy meter {name!r}; valid names: {', '.join(names())}")
        registry = {key: (lambda cls=cls: cls) for key, cls in _REGISTRY.items()}
        return _factory.create("energy meter", registry, name, kwargs, EnergyMeter)
    taken = {key: _factory.arguments(cls) for key, cls in _REGISTRY.items()}
    unknown = sorted(set(kwargs) - {arg for args in taken.values() for arg in args})
    if unknown:
        valid = ", ".join(arg for args in taken.values() for arg in args)
        raise InputError(f"energy meter 'auto' got unknown arguments {unknown}; it takes: {valid}")
    for key in ("rapl", "nvml"):
        with contextlib.suppress(MeterUnavailable):
            return create(key, **{k: v for k, v in kwargs.items() if k in taken[key]})
    return create("estimate", **{k: v for k, v in kwargs.items() if k in taken["estimate"]})

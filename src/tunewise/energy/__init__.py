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
from tunewise.energy._combined import SEPARATOR, Combined
from tunewise.energy._estimate import WATTS_PER_CORE, CpuTimeEstimate
from tunewise.energy._nvml import Nvml
from tunewise.energy._rapl import Rapl
from tunewise.errors import InputError

__all__ = ["LABELS", "WATTS_PER_CORE", "Combined", "CpuTimeEstimate", "EnergyMeter", "MeterUnavailable", "Nvml",
           "Rapl", "Reading", "create", "describe", "for_device", "is_valid", "names"]

_REGISTRY: dict[str, type[EnergyMeter]] = {"rapl": Rapl, "nvml": Nvml, "estimate": CpuTimeEstimate}


LABELS = {"rapl": "CPU packages, RAPL", "nvml": "GPU, NVML", "estimate": "CPU, estimated from CPU time"}
"""What each backend meters, and how, in the words summaries use."""


def describe(name: str) -> str:
    """What the meter called ``name`` meters, and how: ``"GPU, NVML + CPU, estimated from CPU time"``."""
    return " + ".join(LABELS.get(part, part) for part in name.split(SEPARATOR))


def is_valid(name: str) -> bool:
    """Whether ``name`` names a meter: one of :func:`names`, or several backends joined by ``+``."""
    return isinstance(name, str) and (name in names() or all(part in _REGISTRY for part in name.split(SEPARATOR)))


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
    if isinstance(name, str) and SEPARATOR in name:
        return Combined(meters=[create(part, **kwargs) for part in name.split(SEPARATOR)])
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


def for_device(name: str | EnergyMeter, gpu: bool) -> EnergyMeter:
    """The meter called ``name`` for a run on a GPU (``gpu``) or a CPU. ``"auto"`` meters the CPU by RAPL, else
    by the estimate, never by NVML (which meters a GPU the run does not use); on a GPU, it adds the GPU by
    NVML (:class:`Combined`), the CPU alone where NVML cannot be read. Any other name is :func:`create`'s."""
    if name != "auto":
        return create(name)
    try:
        host = create("rapl")
    except MeterUnavailable:
        host = create("estimate")
    if not gpu:
        return host
    try:
        return Combined(meters=[create("nvml"), host])
    except MeterUnavailable:
        return host

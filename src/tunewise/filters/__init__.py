"""Candidate filters: which proposed candidates are not worth measuring.

Every filter follows the contract of :class:`CandidateFilter`; :func:`create` builds one from its name
(``"cold"``: Trimmer's cold-candidate filter, :class:`ColdFilter`).

>>> cold = create("cold", k=5, seed=0)
>>> create(cold) is cold
True
"""

from __future__ import annotations

from tunewise import _factory
from tunewise.filters._base import CandidateFilter, Measured
from tunewise.filters._cold import ColdFilter, NetTraining, cold_flags, trace_tokens

__all__ = ["CandidateFilter", "ColdFilter", "Measured", "NetTraining", "cold_flags", "create", "names", "trace_tokens"]

_REGISTRY: dict[str, type[CandidateFilter]] = {"cold": ColdFilter}


def names() -> list[str]:
    """The names :func:`create` accepts."""
    return list(_REGISTRY)


def create(name: str | CandidateFilter, **kwargs: object) -> CandidateFilter:
    """The filter called ``name``, built with ``kwargs``; an instance is returned unchanged. Raises
    :class:`~tunewise.errors.InputError` on an unknown name or argument, or a bad value."""
    registry = {key: (lambda cls=cls: cls) for key, cls in _REGISTRY.items()}
    return _factory.create("candidate filter", registry, name, kwargs, CandidateFilter)

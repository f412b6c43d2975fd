"""Population policies: which models of a fleet tune in the next round, and which wait.

A fleet tunes several models, each as its own run, on fewer measurement slots than models. Before every
round its driver shows a :class:`PopulationPolicy` one frozen :class:`ModelView` per model and runs the
models it returns (:class:`Round`); the others are suspended, with nothing lost, until the policy chooses
them again. :func:`create` builds a policy from its name.

>>> create("suspension")
Suspension()
"""

from __future__ import annotations

from tunewise import _factory
from tunewise.populations._base import ModelView, PopulationPolicy, Round
from tunewise.populations._fair import FairShare
from tunewise.populations._suspension import Suspension

__all__ = ["FairShare", "ModelView", "PopulationPolicy", "Round", "Suspension", "create", "names"]

_REGISTRY: dict[str, type[PopulationPolicy]] = {"fair": FairShare, "suspension": Suspension}


def names() -> list[str]:
    """The names :func:`create` accepts."""
    return list(_REGISTRY)


def create(name: str | PopulationPolicy, **kwargs: object) -> PopulationPolicy:
    """The population policy called ``name``, built with ``kwargs``; an instance is returned unchanged.

    Raises :class:`~tunewise.errors.InputError` on an unknown name or argument.
    """
    registry = {key: (lambda cls=cls: cls) for key, cls in _REGISTRY.items()}
    return _factory.create("population policy", registry, name, kwargs, PopulationPolicy)

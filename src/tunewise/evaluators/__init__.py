"""Evaluators: how each built candidate is timed (MetaSchedule's runner ``f_run_evaluator`` hook).

Every evaluator follows the contract of :class:`Evaluator`; :func:`create` builds one from its name.
``"fixed"`` is MetaSchedule's own evaluator; ``"adaptive"`` (:data:`DEFAULT`) is AdaTune's micro-batch
measurement with early stopping (:class:`Adaptive`, :class:`StoppingRule`; evidence:
bench/studies/adaptive_measurement/findings.md).

>>> evaluator = create("adaptive", epsilon=0.05)
>>> create(evaluator) is evaluator
True
"""

from __future__ import annotations

from tunewise import _factory
from tunewise.evaluators._adaptive import Adaptive
from tunewise.evaluators._base import Evaluator
from tunewise.evaluators._fixed import Fixed
from tunewise.evaluators._stopping import Outcome, StoppingRule

__all__ = ["DEFAULT", "Adaptive", "Evaluator", "Fixed", "Outcome", "StoppingRule", "create", "names"]

DEFAULT = "adaptive"

_REGISTRY = {"fixed": lambda: Fixed, "adaptive": lambda: Adaptive}


def names() -> list[str]:
    """The names :func:`create` accepts."""
    return list(_REGISTRY)


def create(name: str | Evaluator, **kwargs: object) -> Evaluator:
    """The evaluator called ``name``, built with ``kwargs``; an instance is returned unchanged.

    Raises :class:`~tunewise.errors.InputError` on an unknown name, an argument the evaluator does not take
    (the message lists the valid ones), or a bad value.
    """
    return _factory.create("evaluator", _REGISTRY, name, kwargs, Evaluator)

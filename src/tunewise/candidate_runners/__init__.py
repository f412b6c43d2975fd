"""Candidate runners: where a built candidate runs and is timed (MetaSchedule's ``Runner``).

Every runner follows the contract of :class:`CandidateRunner`; :func:`create` builds one from its name, and
:attr:`tunewise.settings.RunSettings.runner` names the run's. ``"local"`` (:data:`DEFAULT`, :class:`Local`)
runs candidates in a worker process on this machine. A runner for a remote device (MetaSchedule's
``RPCRunner`` behind a tracker) implements :class:`CandidateRunner` and is registered here; the tuning loop and
the measurer do not change. How a candidate is timed once it runs is the evaluator's business
(:mod:`tunewise.runners`, MetaSchedule's ``f_run_evaluator``), which every runner calls.

>>> create("rpc", target=None, config=None)
Traceback (most recent call last):
...
tunewise.errors.InputError: unknown runner 'rpc'; valid names: local
"""

from __future__ import annotations

from tunewise import _factory
from tunewise.candidate_runners._base import CandidateRunner
from tunewise.candidate_runners._local import Local

__all__ = ["DEFAULT", "CandidateRunner", "Local", "create", "names"]

DEFAULT = "local"

_REGISTRY = {"local": lambda: Local}


def names() -> list[str]:
    """The names :func:`create` accepts."""
    return list(_REGISTRY)


def create(name: str | CandidateRunner, **kwargs: object) -> CandidateRunner:
    """The runner called ``name``, built with ``kwargs`` (``target``, ``config`` and its own); an instance is
    returned unchanged.

    Raises :class:`~tunewise.errors.InputError` on an unknown name, an argument the runner does not take (the
    message lists the valid ones), or a bad value.
    """
    return _factory.create("runner", _REGISTRY, name, kwargs, CandidateRunner)


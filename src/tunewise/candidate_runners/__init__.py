"""Candidate runners: where a built candidate runs and is timed (MetaSchedule's ``Runner``).

Every runner follows the contract of :class:`CandidateRunner`; :func:`create` builds one from its name, and
:attr:`tunewise.settings.RunSettings.runner` names the run's. ``"local"`` (:data:`DEFAULT`, :class:`Local`)
runs candidates in a worker process on this machine; ``"rpc://HOST:PORT/KEY"`` (:class:`RPC`) on devices
registered with a TVM RPC tracker. The tuning loop and the measurer do not change with the runner. How a
candidate is timed once it runs is the evaluator's business (:mod:`tunewise.evaluators`, MetaSchedule's
``f_run_evaluator``), which every runner calls.

>>> create("ssh", target=None, config=None)
Traceback (most recent call last):
...
tunewise.errors.InputError: unknown runner 'ssh'; valid names: local, rpc://HOST:PORT/KEY
"""

from __future__ import annotations

from tunewise import _factory
from tunewise.candidate_runners._arguments import alloc_arguments
from tunewise.candidate_runners._base import CandidateRunner
from tunewise.candidate_runners._local import Local
from tunewise.candidate_runners._rpc import PREFIX, RPC, parse
from tunewise.errors import InputError

__all__ = ["DEFAULT", "RPC", "CandidateRunner", "Local", "alloc_arguments", "create", "is_valid", "names"]

DEFAULT = "local"

_REGISTRY = {"local": lambda: Local, "rpc": lambda: RPC}


def names() -> list[str]:
    """The names :func:`create` accepts (the RPC runner's as its address form)."""
    return ["local", f"{PREFIX}HOST:PORT/KEY"]


def is_valid(name: str) -> bool:
    """Whether ``name`` names a runner: ``"local"`` or a well-formed ``rpc://HOST:PORT/KEY``."""
    if name == "local":
        return True
    if isinstance(name, str) and name.startswith(PREFIX):
        parse(name)
        return True
    return False


def create(name: str | CandidateRunner, **kwargs: object) -> CandidateRunner:
    """The runner called ``name`` (``"local"``, or ``"rpc://HOST:PORT/KEY"``: an :class:`RPC` runner of that
    tracker and device key), built with ``kwargs`` (``target``, ``config`` and its own); an instance is
    returned unchanged.

    Raises :class:`~tunewise.errors.InputError` on an unknown name, an argument the runner does not take (the
    message lists the valid ones), a bad value, or an RPC tracker that cannot be reached.
    """
    if isinstance(name, str) and name.startswith(PREFIX):
        host, port, key = parse(name)
        name, kwargs = "rpc", {**kwargs, "host": host, "port": port, "key": key}
    elif isinstance(name, str) and name != "local":
        raise InputError(f"unknown runner {name!r}; valid names: {', '.join(names())}")
    return _factory.create("runner", _REGISTRY, name, kwargs, CandidateRunner)


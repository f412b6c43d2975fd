"""Cost models: what ranks the candidates MetaSchedule's evolutionary search proposes.

A cost model is a MetaSchedule ``CostModel`` shared by every task of a session, with MetaSchedule's contract:
``update(context, candidates, results)`` after each measured batch, ``predict(context, candidates)`` one
score per candidate (higher is better), ``save``/``load``. It takes a ``seed`` and draws every random
number from its own generator. :func:`create` builds one from its name: ``"xgb"``, MetaSchedule's
``XGBModel`` (:class:`XGB`), started from the pretrained model for the target's ISA class when given one as
``prior`` (:func:`pretrained_for`, a :class:`Prior`); ``"rfei"``, AdaTune's random forest with expected
improvement (:class:`RFEI`, on the TVM-free :class:`ForestEI`). TVM-backed classes are imported on first use.

>>> sorted(names())
['rfei', 'xgb']
"""

from __future__ import annotations

import importlib

from tunewise import _factory
from tunewise.cost_models._features import aggregate
from tunewise.cost_models._forest import ForestEI, exploration_share
from tunewise.cost_models._pretrained import Prior
from tunewise.cost_models._pretrained import for_target as pretrained_for
from tunewise.cost_models._pretrained import load as load_pretrained

__all__ = ["RFEI", "XGB", "ForestEI", "Prior", "aggregate", "create", "exploration_share", "load_pretrained", "names",
           "pretrained_for"]

_LAZY = {"RFEI": "tunewise.cost_models._rfei", "XGB": "tunewise.cost_models._xgb"}
_REGISTRY = {"xgb": lambda: _lazy("XGB"), "rfei": lambda: _lazy("RFEI")}


def names() -> list[str]:
    """The names :func:`create` accepts."""
    return list(_REGISTRY)


def create(name, **kwargs: object):
    """The cost model called ``name``, built with ``kwargs``; a MetaSchedule ``CostModel`` is returned unchanged.

    Both models take ``seed`` and ``num_tuning_cores``. Raises :class:`~tunewise.errors.InputError` on an
    unknown name, an argument the model does not take (the message lists the valid ones), or a bad value.
    """
    from tvm.s_tir.meta_schedule.cost_model import CostModel

    return _factory.create("cost model", _REGISTRY, name, kwargs, CostModel)


def _lazy(name: str):
    return getattr(importlib.import_module(_LAZY[name]), name)


def __getattr__(name: str):
    if name in _LAZY:
        return _lazy(name)
    raise AttributeError(f"module 'tunewise.cost_models' has no attribute {name!r}")

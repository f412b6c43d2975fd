"""Pretrained cost models: an XGBoost booster trained on other runs' records, one per ISA class, shipped as package
data (``knowledge/cost-model-ISA.json.gz``) and read when a run starts.

A file holds MetaSchedule's ``XGBModel`` booster (per-store features, ``PackSum`` objective, labels the
throughput relative to the best of the candidate's workload, as that model trains) with what it was trained on.
:class:`~tunewise.cost_models.XGB` given one as its ``prior`` ranks by it from the first candidate, then by
the mean of its ranks and those of a booster trained on the run's own measurements. ``bench/pretrain.py``
trains the files on the dataset of ``bench/dataset.py``.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
from dataclasses import dataclass, field

import numpy as np

from tunewise.errors import InputError

FORMAT = "tunewise-pretrained-xgb"
VERSION = 1
FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "knowledge")
EXTRACTOR = "per-store-feature"  # the features the boosters read: MetaSchedule's PerStoreFeature, its defaults


@dataclass(frozen=True)
class Prior:
    """A pretrained booster (``xgboost.Booster``) for the targets of ISA class ``isa_class``, with the
    ``trained`` facts its file records (dataset, counts, seed, versions) and the file it was read from."""

    booster: object
    isa_class: str
    width: int  # features per store
    trained: dict = field(default_factory=dict)
    path: str | None = None

    def predict(self, per_store: list[np.ndarray]) -> np.ndarray:
        """One score per candidate from its per-store feature rows (higher is faster)."""
        return predict(self.booster, per_store)


def path_for(isa_class: str, folder: str | None = None) -> str:
    """The file of the prior for ISA class ``isa_class`` in ``folder`` (default: :data:`FOLDER`, the shipped ones)."""
    return os.path.join(FOLDER if folder is None else folder, f"cost-model-{isa_class}.json.gz")


def for_target(target, folder: str | None = None) -> Prior | None:
    """The prior for ``target``'s ISA class (:func:`tunewise.target.isa_class`) in ``folder`` (default: the
    shipped ones), ``None`` when there is no file for it (or it has none: a GPU). A file that does not load
    raises :class:`~tunewise.errors.InputError`."""
    from tunewise.target import isa_class

    isa = isa_class(target)
    if isa is None or not os.path.exists(path_for(isa, folder)):
        return None
    return load(path_for(isa, folder))


def load(path: str) -> Prior:
    """The prior in file ``path``; :class:`~tunewise.errors.InputError` (one line) when it is not a readable
    file of this format and version."""
    import xgboost as xgb

    try:
        with gzip.open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ValueError(f"not a {FORMAT} file of version {VERSION}")
        booster = xgb.Booster(model_file=bytearray(base64.b64decode(data["booster"])))
        if booster.num_features() != data["width"]:
            raise ValueError(f"its booster reads {booster.num_features()} features, not {data['width']}")
        return Prior(booster, data["isa_class"], data["width"], data.get("trained", {}), path)
    except (OSError, EOFError, ValueError, KeyError, TypeError, xgb.core.XGBoostError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"pretrained cost model {path} cannot be read ({first}); retrain it with bench/pretrain.py "
                         "or tune without it (--no-pretrained)") from None


def save(prior: Prior, path: str) -> str:
    """Write ``prior`` to ``path`` (the same bytes for the same booster and facts: no timestamp); ``path``."""
    raw = bytes(prior.booster.save_raw("ubj"))
    data = {"format": FORMAT, "version": VERSION, "isa_class": prior.isa_class, "extractor": EXTRACTOR,
            "width": prior.width, "trained": prior.trained, "booster": base64.b64encode(raw).decode("ascii")}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as f:
        f.write(json.dumps(data, sort_keys=True).encode("utf-8"))
    return path


def relative_throughput(costs: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each candidate's throughput relative to the fastest of its group (its workload): ``min cost / cost``
    within the group, in ``(0, 1]``, as MetaSchedule's ``XGBModel`` labels its data.

    >>> relative_throughput(np.array([2.0, 1.0, 4.0, 8.0]), np.array([0, 0, 1, 1])).tolist()
    [0.5, 1.0, 1.0, 0.5]
    """
    costs, groups = np.asarray(costs, dtype=float), np.asarray(groups)
    best = {g: costs[groups == g].min() for g in np.unique(groups)}
    return np.array([best[g] / c for g, c in zip(groups, costs, strict=True)])


def boost(per_store: list[np.ndarray], labels: np.ndarray, *, seed: int, rounds: int, config=None,
          prior=None, nthread: int | None = None):
    """An ``xgboost.Booster`` fitted as MetaSchedule's ``XGBModel`` fits one (its ``PackSum`` square error,
    weighted by the label, and its ``XGBConfig``, seeded by ``seed``) for ``rounds`` rounds, starting from the
    booster ``prior`` (a copy: ``prior`` is unchanged) when given."""
    import xgboost as xgb
    from tvm.s_tir.meta_schedule.cost_model.xgb_model import PackSum, XGBConfig

    packed = PackSum(xs=list(per_store), ys=np.asarray(labels, dtype="float32"))
    params = (config or XGBConfig())._replace(seed=seed, nthread=nthread).to_dict()
    return xgb.train(params, packed.dmatrix, num_boost_round=rounds,
                     obj=lambda predictions, _: packed.obj_square_error(predictions),
                     xgb_model=None if prior is None else prior.copy())


def predict(booster, per_store: list[np.ndarray]) -> np.ndarray:
    """One score per candidate: the booster's predictions for its stores, summed (``PackSum``)."""
    from tvm.s_tir.meta_schedule.cost_model.xgb_model import PackSum

    packed = PackSum(xs=list(per_store), ys=None)
    return np.bincount(packed.ids, weights=booster.predict(packed.dmatrix), minlength=len(per_store))

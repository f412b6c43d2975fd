"""Record bases: the best few records of many workloads, in one small file, kept apart by ISA class.

A record base holds, for each workload (a TIR module, under the store's structural hash), its :data:`TOP`
best records that measured a latency, each with the target it was measured on and its ``mcpu``, under that
target's instruction-set class (:func:`tunewise.target.isa_class`): a record is used only on targets of its
class. The file is deterministic gzip-compressed JSON (same base, same bytes)::

    {"format": "tunewise-record-base", "version": 1, "tunewise": "...", "tvm": "...",
     "workloads": [{"isa": "avx2", "shash": "...", "mod": "<TVM JSON>",
                    "records": [{"record": "<JSON>", "run_secs": [...], "target": "...", "mcpu": "..."}]}]}

:func:`build_base` makes a base from a store's runs, :meth:`RecordBase.merged` joins bases,
:meth:`RecordBase.read` validates a file. Reading needs no TVM: modules and records stay JSON text until a
task asks for them (:class:`tunewise.sharing.Planner`).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tunewise._numbers import is_number
from tunewise.delivery import destinations
from tunewise.errors import InputError

FORMAT, VERSION = "tunewise-record-base", 1
"""The ``format`` and ``version`` a record base file carries; other versions are refused."""

TOP = 3
"""The most records a base keeps of one workload in one class: its fastest."""


@dataclass(frozen=True)
class BaseRecord:
    """One record of a base: MetaSchedule's JSON text of the tuning ``record``, its measured ``run_secs``, the
    JSON text of the ``target`` it was measured on and that target's ``mcpu`` (``None``: none set)."""

    record: str
    run_secs: tuple[float, ...]
    target: str
    mcpu: str | None = None

    @property
    def latency(self) -> float:
        return math.fsum(self.run_secs) / len(self.run_secs)


@dataclass(frozen=True)
class BaseWorkload:
    """A workload of a base in one ISA class: ``shash`` (:func:`tunewise.stores._database.module_hash`), the
    module's TVM JSON ``mod`` and its ``records``, fastest first."""

    isa: str
    shash: str
    mod: str
    records: tuple[BaseRecord, ...]


class RecordBase:
    """A record base: ``workloads`` kept at most :data:`TOP` records each, failed and duplicate records (the
    same trace) left out, the fastest kept; workloads with the same class, hash and module text are one.
    ``tunewise``/``tvm`` are the versions of the writer (default: these)."""

    def __init__(self, workloads: Iterable[BaseWorkload], *, tunewise: str | None = None, tvm: str | None = None):
        self.tunewise = tunewise or _tunewise_version()
        self.tvm = tvm or _tvm_version()
        joined: dict[tuple[str, str, str], list[BaseRecord]] = {}
        for w in workloads:
            joined.setdefault((w.isa, w.shash, w.mod), []).extend(w.records)
        kept = []
        for (isa, shash, mod), records in sorted(joined.items()):
            best: dict[str, BaseRecord] = {}
            for r in sorted(records, key=lambda r: (r.latency, r.record, r.target)):
                if r.run_secs and math.isfinite(r.latency):
                    best.setdefault(_trace_key(r.record), r)
            if best:
                kept.append(BaseWorkload(isa, shash, mod, tuple(list(best.values())[:TOP])))
        self.workloads: tuple[BaseWorkload, ...] = tuple(kept)

    @classmethod
    def _as_written(cls, workloads: Sequence[BaseWorkload], *, tunewise: str, tvm: str) -> RecordBase:
        """A base of ``workloads`` as a file holds them (its writer kept the best records, in order)."""
        base = cls.__new__(cls)
        base.tunewise, base.tvm, base.workloads = tunewise, tvm, tuple(workloads)
        return base

    def of_class(self, isa: str | None) -> tuple[BaseWorkload, ...]:
        """The workloads of ISA class ``isa`` (none for ``None``)."""
        return tuple(w for w in self.workloads if w.isa == isa)

    def classes(self) -> list[str]:
        """The ISA classes the base has records of, sorted."""
        return sorted({w.isa for w in self.workloads})

    @classmethod
    def merged(cls, bases: Sequence[RecordBase]) -> RecordBase:
        """One base of the workloads of ``bases``: the best records of each workload in each class win.
        Bases written with other TVM versions are refused (their workloads hash otherwise)."""
        versions = sorted({b.tvm for b in bases})
        if len(versions) > 1:
            raise InputError(f"cannot merge record bases of TVM {' and '.join(versions)}: their workloads hash "
                             "differently; rebuild them with one TVM")
        return cls([w for b in bases for w in b.workloads], tvm=versions[0] if versions else None)

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "tunewise": self.tunewise, "tvm": self.tvm,
                "workloads": [{"isa": w.isa, "shash": w.shash, "mod": w.mod,
                               "records": [{"record": r.record, "run_secs": list(r.run_secs), "target": r.target,
                                            "mcpu": r.mcpu} for r in w.records]} for w in self.workloads]}

    def write(self, path: str) -> None:
        """Write the base to ``path`` (gzip JSON; the same base gives the same bytes)."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()
        buffer = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as f:
            f.write(text)
        with open(destinations.check_file(path, "record base"), "wb") as f:
            f.write(buffer.getvalue())

    @classmethod
    def read(cls, path: str) -> RecordBase:
        """The base in file ``path``; :class:`~tunewise.errors.InputError` (one line) when it is missing, not a
        gzip JSON record base, truncated, of another format version, or malformed."""
        try:
            with gzip.open(path, "rb") as f:
                data = json.loads(f.read())
        except FileNotFoundError:
            raise InputError(f"record base {path} does not exist") from None
        except IsADirectoryError:
            raise InputError(f"record base {path} is a folder, not a file") from None
        except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError) as err:
            raise InputError(f"{path} is not a readable record base (gzip JSON): {_line(err)}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(f"{path} is not a tunewise record base (no \"format\": \"{FORMAT}\")")
        if data.get("version") != VERSION:
            raise InputError(f"{path} is a record base of format version {data.get('version')!r}; this tunewise "
                             f"reads version {VERSION}")
        try:
            workloads = [BaseWorkload(_text(w["isa"]), _text(w["shash"]), _text(w["mod"]), tuple(
                BaseRecord(_text(r["record"]), tuple(_seconds(r["run_secs"])), _text(r["target"]),
                           None if r.get("mcpu") is None else _text(r["mcpu"])) for r in w["records"]))
                for w in data["workloads"]]
            return cls._as_written(workloads, tunewise=_text(data["tunewise"]), tvm=_text(data["tvm"]))
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise InputError(f"{path} is a malformed record base: {type(err).__name__} {_line(err)}") from None


BUNDLED, OFF = "bundled", "off"
"""The ``records_base`` settings besides a file's path: the base the package ships for the target's class, or
none."""


def bundled_path(isa: str) -> str:
    """Where the package keeps its base of ISA class ``isa`` (the file may not exist: then it ships none)."""
    from importlib import resources

    return str(resources.files("tunewise") / "knowledge" / f"records-{isa}.json.gz")


class BaseIndex:
    """The workloads of one ISA class of a record base file, read on first use (:meth:`load`), looked up by
    structural hash; ``label`` names the base in messages (``"bundled"``, or the file's path)."""

    def __init__(self, path: str, isa: str, label: str):
        self.path, self.isa, self.label = path, isa, label
        self._workloads: tuple[BaseWorkload, ...] | None = None
        self._by_hash: dict[str, list[int]] = {}
        self._signatures: list | None = None

    def load(self) -> tuple[BaseWorkload, ...]:
        """The class's workloads (the file is read and checked once: :meth:`RecordBase.read`)."""
        if self._workloads is None:
            self._workloads = RecordBase.read(self.path).of_class(self.isa)
            for i, w in enumerate(self._workloads):
                self._by_hash.setdefault(w.shash, []).append(i)
        return self._workloads

    def same(self, mod) -> list[BaseWorkload]:
        """The base's workloads structurally equal to the TIR module ``mod`` (TVM parses only those of its
        hash)."""
        import tvm
        from tvm_ffi import structural_equal

        from tunewise.stores._database import module_hash

        workloads = self.load()
        return [workloads[i] for i in self._by_hash.get(module_hash(mod), ())
                if structural_equal(tvm.ir.load_json(workloads[i].mod), mod)]

    def signatures(self) -> list:
        """``(position, signature of its best record)`` of every workload (:func:`warm_sources`' candidates)."""
        from tunewise.sharing._similarity import record_signature

        if self._signatures is None:
            self._signatures = []
            for i, w in enumerate(self.load()):
                try:
                    self._signatures.append((i, record_signature(w.records[0].record)))
                except (ValueError, IndexError, TypeError, KeyError):  # a record that is not a trace: left out
                    continue
        return self._signatures


def open_base(setting: str, target) -> BaseIndex | None:
    """The record base a run reads for ``target`` (a TVM target): ``setting`` :data:`BUNDLED` (the package's
    base of the target's ISA class; none when it ships none), :data:`OFF`, or a base file's path (read and
    checked now: :class:`~tunewise.errors.InputError` when it is not a record base). ``None`` when there is
    nothing to read: off, no base, a target without an ISA class, or a base without records of its class."""
    from tunewise import target as targets

    if setting == OFF:
        return None
    isa = targets.isa_class(target)
    if setting == BUNDLED:
        path = None if isa is None else bundled_path(isa)
        return None if path is None or not os.path.isfile(path) else BaseIndex(path, isa, BUNDLED)
    index = BaseIndex(setting, isa or "", setting)
    return index if index.load() and isa is not None else None


def build_base(store, runs: Sequence[int] | None = None, *, isa: str | None = None) -> RecordBase:
    """A base of the best records of ``store``'s finished and suspended runs (``runs``: those of them only;
    each must be one), of targets with an ISA class (``isa``: that class only), kept apart by class. Records
    of imported runs are left out: a base holds what tunewise measured."""
    import tvm

    from tunewise import stores
    from tunewise import target as targets

    usable = (stores.FINISHED, stores.SUSPENDED)
    chosen = [r for r in store.get_runs() if r.status in usable]
    if runs is not None:
        by_id = {r.id: r for r in store.get_runs()}
        for run in runs:
            status = by_id[run].status if run in by_id else None
            if status not in usable:
                raise InputError(f"run {run} is " + ("not in the store" if status is None else
                                                     f"{status}, not finished or suspended"))
        chosen = [r for r in chosen if r.id in set(runs)]
    classes: dict[str, str | None] = {}
    found: dict[tuple[str, int], dict[str, BaseRecord]] = {}  # (class, workload) -> trace -> its best record
    for run in chosen:
        for trial in store.get_trials(run.id):
            if trial.error is not None or not math.isfinite(trial.latency) or trial.target is None:
                continue
            if trial.target not in classes:
                classes[trial.target] = targets.isa_class(tvm.target.Target(json.loads(trial.target)))
            kind = classes[trial.target]
            if kind is None or (isa is not None and kind != isa):
                continue
            record = BaseRecord(trial.record, tuple(trial.run_secs), trial.target, json.loads(trial.target).get("mcpu"))
            kept = found.setdefault((kind, trial.workload), {})
            key = _trace_key(trial.record)
            if key not in kept or record.latency < kept[key].latency:
                kept[key] = record
        for kept in found.values():  # only the best few of each workload are held while the next run is read
            for key in sorted(kept, key=lambda k: kept[k].latency)[TOP:]:
                del kept[key]
    workloads = []
    for (kind, workload), kept in found.items():
        shash, mod = store.get_workload(workload)
        workloads.append(BaseWorkload(kind, shash, mod, tuple(kept.values())))
    return RecordBase(workloads)


def _trace_key(record: str) -> str:
    """What makes two records the same schedule: the trace (the record JSON's first item), booleans as
    integers (MetaSchedule's JSON does not keep the two apart)."""

    def plain(value):
        if isinstance(value, list):
            return [plain(x) for x in value]
        return int(value) if isinstance(value, bool) else value

    return json.dumps(plain(json.loads(record)[0]), separators=(",", ":"))


def _text(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _seconds(values) -> list[float]:
    if not isinstance(values, list) or not values or not all(
            is_number(v) and v > 0 for v in values):
        raise ValueError(f"run seconds must be a list of positive numbers, got {str(values)[:60]}")
    return [float(v) for v in values]


def _line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _tunewise_version() -> str:
    import tunewise

    return tunewise.__version__


def _tvm_version() -> str:
    from importlib import metadata

    return metadata.version("apache-tvm")

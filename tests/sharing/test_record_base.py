"""Record bases: built from a store's runs, merged, read back, and read by a new store's warm start."""

import dataclasses
import gzip
import json
import math
import os
import re
import sqlite3

import pytest

from tunewise import cli, sharing, stores
from tunewise.errors import InputError
from tunewise.sharing import BaseRecord, BaseWorkload, RecordBase


@pytest.fixture(scope="module")
def based(tuned_store, tmp_path_factory):
    """``(store, base path)``: a copy of the tuned tiny-mlp store with its runs finished, and the record base
    ``tunewise records build`` writes from it."""
    original, _, _ = tuned_store
    folder = tmp_path_factory.mktemp("based")
    store = _copy(original, folder / "tunewise.db")
    for run in store.get_runs():
        store.set_status(run.id, stores.FINISHED)
    path = str(folder / "records.json.gz")
    assert cli.main(["records", "build", "--store", store.url, "-o", path]) == 0
    return store, path


@pytest.fixture(scope="module")
def classes(host_target):
    """``(this host's ISA class, another class and an llvm target of it)``: the tuned store's records are of the
    first."""
    import tvm

    from tunewise.target import isa_class

    here = isa_class(host_target)
    other, mcpu = ("avx512", "skylake-avx512") if here != "avx512" else ("avx2", "znver2")
    return here, other, tvm.target.Target({"kind": "llvm", "mcpu": mcpu})


def _copy(store, path):
    """A copy of the SQLite ``store`` at ``path`` (what its write-ahead log holds too), opened."""
    source, copy = sqlite3.connect(store.url.removeprefix("sqlite:///")), sqlite3.connect(path)
    source.backup(copy)
    source.close(), copy.close()
    return stores.create(f"sqlite:///{path}")


def _tune(model, measurer, store, base, trials=4, warm_start=False, per_slot=2):
    from tunewise import schedulers
    from tunewise.callbacks import SlotLog
    from tunewise.tuning import session

    run = store.create_run(model.name, str(model.target), "round-robin", {})
    log = SlotLog()
    loop = session.Session(model, schedulers.create("round-robin"), session.Budget(max_trials=trials), measurer,
                           store, run, session.SessionParts(trials_per_slot=per_slot, callbacks=[log],
                                                            warm_start=warm_start,
                                                            records_base=base))
    loop.run()
    return loop, log.events


def _record(n: int, seconds: float) -> BaseRecord:
    """A record whose trace is told apart by ``n`` (merging reads traces and seconds only)."""
    trace = [[["GetSBlock", [], [f"block{n}", "main"], ["b0"]]], []]
    return BaseRecord(json.dumps([trace, [seconds]]), (seconds,), '{"kind":"llvm","mcpu":"znver2"}', "znver2")


def test_a_build_keeps_the_best_three_records_of_each_workload_deterministically_and_small(based, classes,
                                                                                            host_target, tmp_path):
    store, path = based
    base = RecordBase.read(path)
    workloads = {w for r in store.get_runs() for w in (t.workload for t in store.get_tasks(r.id))}
    assert len(base.workloads) == len(workloads) == 2 and base.classes() == [classes[0]]
    mcpu = str(host_target.attrs["mcpu"])
    for w in base.workloads:
        (stored,) = [i for i in workloads if store.get_workload(i) == (w.shash, w.mod)]
        best = {}
        for t in store.top_trials(stored, 20):  # two runs may have measured one schedule: it counts once
            best.setdefault(json.dumps(json.loads(t.record)[0]), t.record)
        assert [r.record for r in w.records] == list(best.values())[:sharing.TOP]  # the fastest three, in order
        assert all(r.mcpu == mcpu and json.loads(r.target)["mcpu"] == mcpu for r in w.records)
    data = json.loads(gzip.open(path).read())
    assert (data["format"], data["version"], data["tvm"]) == ("tunewise-record-base", 1, base.tvm)
    again = str(tmp_path / "again.json.gz")
    base.write(again)
    assert open(again, "rb").read() == open(path, "rb").read()
    assert len(open(path, "rb").read()) < 6 * 1024 * len(base.workloads)  # a few KB a workload


def test_merge_keeps_the_best_records_of_each_workload_and_drops_duplicates(based, classes, tmp_path):
    _, path = based
    here, there, _ = classes
    base = RecordBase.read(path)
    assert RecordBase.merged([base, base]).to_json() == base.to_json()  # the same records once
    one = BaseWorkload(here, "00000000000000ab", "{}", (_record(1, 3e-6), _record(2, 5e-6)))
    other = BaseWorkload(here, "00000000000000ab", "{}", (_record(2, 1e-6), _record(3, 4e-6), _record(4, 9e-6)))
    elsewhere = dataclasses.replace(other, isa=there)
    a, b = str(tmp_path / "a.json.gz"), str(tmp_path / "b.json.gz")
    RecordBase([one]).write(a)
    RecordBase([other, elsewhere]).write(b)
    merged = tmp_path / "merged.json.gz"
    assert cli.main(["records", "merge", a, b, path, "-o", str(merged)]) == 0
    result = RecordBase.read(str(merged))
    (joined,) = [w for w in result.of_class(here) if w.shash == one.shash]
    # trace 2 measured faster in b wins over its slower measurement in a; trace 4 is the fourth: left out
    assert [r.record for r in joined.records] == [_record(2, 1e-6).record, _record(1, 3e-6).record,
                                                  _record(3, 4e-6).record]
    assert len(result.of_class(there)) == 1  # kept apart by class
    assert len(result.of_class(here)) == 1 + len(base.workloads)


@pytest.mark.parametrize("content,expected", [
    (b"garbage", "is not a readable record base (gzip JSON): Not a gzipped file"),
    (None, "is not a readable record base (gzip JSON): Compressed file ended before the end-of-stream"),
    (gzip.compress(b'{"format": "tunewise-record-base", "version": 99}'), "is a record base of format version 99"),
    (gzip.compress(b'{"format": "tunewise-record-base", "version": 1, "tunewise": "0.1.0", "tvm": "0.27",'
                   b' "workloads": [{"isa": "avx2"}]}'), "is a malformed record base: KeyError"),
    (gzip.compress(b"[1, 2]"), "is not a tunewise record base"),
], ids=["garbage", "truncated", "version", "malformed", "not-a-base"])
def test_a_bad_base_file_is_one_line_and_exit_2(based, tmp_path, capsys, content, expected):
    _, path = based
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(open(path, "rb").read()[:300] if content is None else content)
    with pytest.raises(InputError, match=re.escape(expected)):
        RecordBase.read(str(bad))
    for argv in (["records", "merge", str(bad), "-o", str(tmp_path / "out.json.gz")],
                 ["tune", "tiny-mlp", "--records-base", str(bad), "--store", f"sqlite:///{tmp_path}/s.db"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert expected.split(":")[0] in err and "\n" not in err and "Traceback" not in err


def test_a_base_is_read_only_for_targets_of_its_own_isa_class(based, classes, host_target, tmp_path):
    import tvm

    _, path = based
    here, there, there_target = classes
    assert sharing.open_base(sharing.OFF, host_target) is None
    index = sharing.open_base(path, host_target)
    assert index.isa == here and len(index.load()) == 2
    assert sharing.open_base(path, there_target) is None
    assert sharing.open_base(path, tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})) is None
    elsewhere = str(tmp_path / "elsewhere.json.gz")
    RecordBase([dataclasses.replace(w, isa=there) for w in RecordBase.read(path).workloads]).write(elsewhere)
    assert sharing.open_base(elsewhere, host_target) is None  # another class's records stay out
    shipped = sharing.bundled_path(here)
    assert (sharing.open_base(sharing.BUNDLED, host_target) is None) == (not os.path.isfile(shipped))


@pytest.mark.tvm
def test_a_new_store_starts_each_task_from_the_base_records_of_its_workload(based, tiny_mlp, measurer, tmp_path):
    from tunewise import report

    _, path = based
    base = RecordBase.read(path)
    fresh = stores.create(f"sqlite:///{tmp_path}/fresh.db")
    loop, events = _tune(tiny_mlp, measurer, fresh, sharing.open_base(path, tiny_mlp.target))
    trials = fresh.get_trials(loop.run_id)
    firsts = {}
    for e in events:
        firsts.setdefault(e.task, e)
    assert sorted(firsts) == [0, 1] and all(e.shared == e.trials == 2 for e in firsts.values())
    for k, mod in enumerate(tiny_mlp.task_mods):
        (workload,) = [w for w in base.workloads if w.mod == fresh.get_workload(loop.database.workload_id(mod))[1]]
        given = [t for t in trials if t.task == k and t.slot == firsts[k].slot]
        assert all(t.origin == stores.FROM_BASE for t in given)
        # the base's two fastest schedules, applied as they are, and measured here: not the base's latencies
        assert [json.loads(t.record)[0] for t in given] == [json.loads(r.record)[0] for r in workload.records[:2]]
        assert all(math.isfinite(t.latency) and t.run_secs != r.run_secs
                   for t, r in zip(given, workload.records, strict=False))
    summary = report.summarize(fresh, loop.run_id)
    assert summary.base_tasks == 2 and loop.shared == 0  # base trials are not counted as shared between tasks
    assert "2 of 2 tasks started from a record base's records" in "\n".join(report.run_table(summary))


@pytest.mark.tvm
def test_a_task_the_base_knows_starts_from_its_records_alone_however_large_the_slot(based, tiny_mlp, measurer,
                                                                                    tmp_path):
    _, path = based
    base = RecordBase.read(path)
    fresh = stores.create(f"sqlite:///{tmp_path}/fresh.db")
    loop, events = _tune(tiny_mlp, measurer, fresh, sharing.open_base(path, tiny_mlp.target), trials=6,
                         warm_start=True, per_slot=8)
    first = {}
    for e in events:
        first.setdefault(e.task, e)
    for k, mod in enumerate(tiny_mlp.task_mods):
        (workload,) = [w for w in base.workloads if w.mod == fresh.get_workload(loop.database.workload_id(mod))[1]]
        given = [t for t in fresh.get_trials(loop.run_id) if t.task == k and t.slot == first[k].slot]
        # no fitted schedule of a similar workload beside the base's own records of this one
        assert len(given) == len(workload.records) <= 3 and all(t.origin == stores.FROM_BASE for t in given)


@pytest.mark.tvm
def test_the_users_own_records_of_a_workload_win_over_the_base(based, tiny_mlp, measurer, tmp_path):
    store, path = based
    mine = _copy(store, tmp_path / "mine.db")
    loop, events = _tune(tiny_mlp, measurer, mine, sharing.open_base(path, tiny_mlp.target), trials=2)
    # the store holds records of both tasks' workloads: the search seeds from those, the base is not read
    assert events and not loop.planner.from_base
    assert all(t.origin is None for t in mine.get_trials(loop.run_id))


@pytest.fixture(scope="module")
def wider(host_target, measurer):
    """A one-task model: a dense layer with bias and ReLU like tiny-mlp's first, of another width."""
    import torch

    from tunewise.importing import frontend
    from tunewise.lowering import tasks

    torch.manual_seed(0)
    layer = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU()).eval()
    imported = frontend.load(layer, example_inputs=(torch.randn(1, 64),))
    return dataclasses.replace(tasks.extract(imported, host_target, measurer=measurer), name="wider")


@pytest.mark.tvm
def test_a_task_the_base_lacks_starts_from_its_most_similar_workloads_and_the_users_come_first(based, wider,
                                                                                               measurer, tmp_path):
    store, path = based
    base = sharing.open_base(path, wider.target)
    fresh = stores.create(f"sqlite:///{tmp_path}/fresh.db")
    loop, events = _tune(wider, measurer, fresh, base, trials=2)
    first = [t for t in fresh.get_trials(loop.run_id) if t.slot == events[0].slot]
    # the base's tiny-mlp layers, fitted to this width (the fittings of two may coincide), measured here
    assert first and len(first) == events[0].shared and all(t.origin == stores.FROM_BASE for t in first)
    assert any(math.isfinite(t.latency) for t in first)
    # a store that tuned those layers itself gives its own records first; the base only adds what they did not
    mine = _copy(store, tmp_path / "mine.db")
    loop, events = _tune(wider, measurer, mine, base, trials=2, warm_start=True)
    origins = [t.origin for t in mine.get_trials(loop.run_id) if t.slot == events[0].slot]
    assert len(origins) == events[0].shared and origins[0] is None
    assert origins == sorted(origins, key=lambda origin: origin is not None)  # the user's, then the base's


@pytest.mark.parametrize("options,expected", [
    (["--isa", "avx512"], "no record to write: the runs hold no measured record of a CPU of instruction-set class "
                          "avx512"),
    (["--runs", "99"], "run 99 is not in the store"),
    (["--runs", "x"], "bad RUNS 'x'"),
])
def test_a_build_with_nothing_to_write_is_one_line_and_exit_2(based, tmp_path, capsys, options, expected):
    store, _ = based
    out = tmp_path / "base.json.gz"
    assert cli.main(["records", "build", "--store", store.url, *options, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"tunewise: error: {expected}") and "\n" not in err and not out.exists()

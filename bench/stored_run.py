"""A finished run of a store, opened again by the bench scripts that compile its model with its records, and the
kernel calls of a compiled model and their time in a loop."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from tunewise import stores
from tunewise import target as targets
from tunewise.errors import InputError
from tunewise.job import prepare
from tunewise.settings import RunSettings
from tunewise.tuning import tvm_env


@dataclass(frozen=True)
class StoredRun:
    """The run's ``target``, its ``model`` prepared again (each task's default latency the one the run
    measured), and its store's records as a MetaSchedule ``database``."""

    target: object
    model: object
    database: stores.StoreDatabase


def run_settings(stored, model: str | None, level: str | None) -> RunSettings:
    """The run's settings with ``model`` and ``level`` (when given) as its source and graph level. A run stored
    without tuning settings (bench scripts made such runs before they stored theirs) needs both, and its
    seed is taken as 0."""
    try:
        settings = RunSettings.from_json(stored)
    except InputError as err:
        if model is None or level is None:
            raise SystemExit(f"{err}: name the run's --model and --level") from None
        settings = RunSettings()
    return dataclasses.replace(settings, source=model or settings.source, level=level or settings.level)


def open_run(url: str, run: int, model: str | None = None, level: str | None = None) -> StoredRun:
    """Run ``run`` of the store at ``url``, its model from ``model`` at graph level ``level`` where given
    (:func:`run_settings`)."""
    store = stores.create(url, must_exist=True)
    spec = store.get_run(run)
    settings = run_settings(spec.settings, model, level)
    target = targets.resolve(spec.target)
    tvm_env.prepare(target.kind.name)
    prepared = prepare.load_model(settings.source, settings, target=target)
    prepared = prepared.with_default_latencies(s.default_latency for s in store.get_tasks(run))
    return StoredRun(target, prepared, stores.StoreDatabase(store, target=target))


def kernel_calls(vm, arrays) -> list[tuple[str, object, list]]:
    """Every kernel call one model call makes, in order: (name, function, the model's tensors it got)."""
    import tvm

    calls = []

    def instrument(func, name, before_run, ret_value, *args):
        if not before_run and not name.startswith("vm.builtin.") and args and all(
                isinstance(a, tvm.runtime.Tensor) for a in args):
            calls.append((name, func, list(args)))
        return 0

    vm.set_instrument(instrument)
    try:
        vm["main"](*arrays)
    finally:
        vm.set_instrument(None)
    return calls


def looped(func, args, calls: int) -> float:
    """Seconds a call of ``func(*args)``, called ``calls`` times back to back after one untimed call."""
    func(*args)
    start = time.perf_counter()
    for _ in range(calls):
        func(*args)
    return (time.perf_counter() - start) / calls

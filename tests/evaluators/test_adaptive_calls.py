"""How many ``time_evaluator`` calls (each with its own untimed warm-up run) the adaptive evaluator makes.

A stand-in module whose every run takes a set time records the calls; the measurements themselves are tested
for real in ``test_evaluators``.
"""

from __future__ import annotations

import types

import pytest

from tunewise import evaluators


class _Module:
    """Runs take ``latency`` seconds; records ``(number, repeat)`` of every ``time_evaluator`` call."""

    entry_name = "main"

    def __init__(self, latency: float):
        self.latency, self.calls, self.preprocs = latency, [], []

    def time_evaluator(self, name, device, *, number, repeat, f_preproc):
        self.calls.append((number, repeat))
        self.preprocs.append(f_preproc)
        return lambda *args: types.SimpleNamespace(mean=self.latency, results=(self.latency,) * repeat)


class _Warming(_Module):
    """Each repeat of a call runs a little slower than the one before: ``latency * (1 + k / 1000)`` for the
    ``k``-th."""

    def time_evaluator(self, name, device, *, number, repeat, f_preproc):
        super().time_evaluator(name, device, number=number, repeat=repeat, f_preproc=f_preproc)
        return lambda *args: types.SimpleNamespace(results=tuple(self.latency * (1 + k / 1000) for k in range(repeat)))


_DEVICE = types.SimpleNamespace(sync=lambda: None)
_CONFIG = types.SimpleNamespace(enable_cpu_cache_flush=False)
_COLD = types.SimpleNamespace(enable_cpu_cache_flush=True)


@pytest.mark.parametrize("latency, reference, calls, samples", [
    (50e-3, 5e-3, [(1, 1)], 1),            # 10x slower than the best: the probe alone decides
    (50e-3, 40e-3, [(1, 1), (1, 2)], 3),   # one run per micro-batch: the probe is the first of three
    (1e-3, 1e-3, [(1, 1), (20, 3)], 3),    # 20 runs per micro-batch: three of them from a single call
])
def test_each_call_pays_one_warm_up_and_brings_every_micro_batch_it_can(latency, reference, calls, samples):
    module = _Module(latency)
    evaluator = evaluators.create("adaptive").with_reference(reference)  # batch_ms 20, min_batches 3
    assert len(evaluator(module, _DEVICE, _CONFIG, [()])) == samples
    assert module.calls == calls



def test_cold_every_run_is_a_flushed_repeat_of_its_own_and_a_micro_batch_the_mean_of_its_runs():
    module = _Warming(1e-3)
    samples = evaluators.create("adaptive").with_reference(1e-3)(module, _DEVICE, _COLD, [()])
    # the probe (1 ms) gives 20 runs per micro-batch; the three micro-batches come from one call of 60 repeats
    assert module.calls == [(1, 1), (1, 60)]
    assert module.preprocs == ["cache_flush_cpu_non_first_arg"] * 2
    assert samples == pytest.approx([1e-3 * (1 + (20 * i + 9.5) / 1000) for i in range(3)])


def test_warm_runs_are_not_flushed():
    module = _Module(1e-3)
    evaluators.create("adaptive").with_reference(1e-3)(module, _DEVICE, _CONFIG, [()])
    assert module.preprocs == ["", ""]

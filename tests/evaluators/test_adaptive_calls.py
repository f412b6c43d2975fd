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
        self.latency, self.calls = latency, []

    def time_evaluator(self, name, device, *, number, repeat, f_preproc):
        self.calls.append((number, repeat))
        return lambda *args: types.SimpleNamespace(mean=self.latency, results=(self.latency,) * repeat)


_DEVICE = types.SimpleNamespace(sync=lambda: None)
_CONFIG = types.SimpleNamespace(enable_cpu_cache_flush=False)


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


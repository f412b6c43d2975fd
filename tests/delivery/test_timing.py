"""Latencies timed in fresh processes: compiled models alternating, the references beside them."""

import logging

import pytest
import torch

from tunewise import zoo
from tunewise.delivery import compile as compiler
from tunewise.delivery import timing


def test_a_slowdown_is_worded_as_a_slowdown():
    assert timing.relation(0.6, 1.0, "untuned") == "1.7x faster than untuned"
    assert timing.relation(1.0, 0.6, "untuned") == "1.7x slower than untuned"
    assert timing.relation(2.0, 1.0) == "2.0x slower"


def test_slow_models_get_fewer_rounds_within_the_time_limit():
    assert timing.rounds_for(0.001) == timing.ROUNDS  # rounds of 100 ms
    assert timing.rounds_for(3.0) == 5  # 5 rounds of 3 s for each of two models: 30 s
    assert timing.rounds_for(60.0) == timing.MIN_ROUNDS
    assert timing.rounds_for(0.001, asked=3) == 3 and timing.rounds_for(60.0, asked=1) == 1  # fewer asked
    assert timing.describe(5).startswith("in fresh processes, median of 5 rounds")
    assert timing.describe(5).endswith("the references in a process of their own, in turn with them")
    assert "references" not in timing.describe(5, references=False)  # none were timed
    assert "alternating" not in timing.describe(5)  # the tuned model alone
    assert "; untuned and tuned alternating" in timing.describe(5, models=("untuned", "tuned"))


def test_a_reference_round_leaves_its_first_call_out_as_a_compiled_models_does():
    import time

    calls = []

    def call():  # slow the first time, as a call after the other process's round finds its caches cold
        time.sleep(0.3 if not calls else 0.01)
        calls.append(1)

    seconds = timing._round_time(call)
    assert 0.01 <= seconds < 0.03  # the 0.3 s first call is not in the mean
    assert seconds * (len(calls) - 1) >= timing.ROUND_MS / 1e3  # the calls after it fill a round


@pytest.mark.tvm
@pytest.mark.timing
def test_untuned_and_tuned_are_timed_in_one_fresh_process(tiny_mlp):
    import tvm

    model = compiler.CompiledModel(compiler.build(tiny_mlp), tiny_mlp.target)
    threads = tvm.runtime.num_threads()
    (first, second), rounds = timing.time_models([model, model], tiny_mlp.inputs)
    assert 0 < first < 0.01 and 0 < second < 0.01 and rounds == timing.ROUNDS
    assert 0.5 < first / second < 2  # the same model, timed the same way
    assert tvm.runtime.num_threads() == threads


@pytest.mark.tvm
@pytest.mark.timing
def test_the_references_take_turns_with_the_compiled_models_round_by_round(tiny_mlp):
    model = compiler.CompiledModel(compiler.build(tiny_mlp), tiny_mlp.target)
    side = timing.time_side_by_side([model, model], tiny_mlp.inputs, 3, references=timing.References("tiny-mlp"))
    assert side.rounds == 3 and all(0 < latency < 0.01 for latency in side.latencies)
    assert set(side.references) == set(timing.cpu_references()) and all(0 < t < 1 for t in side.references.values())
    for ratios, latency in zip(side.ratios, side.latencies, strict=True):
        assert set(ratios) == set(timing.cpu_references())
        for name, ratio in ratios.items():  # per round, close to the ratio of the medians
            assert 0.5 < ratio / (latency / side.references[name]) < 2
    assert 0.5 < side.ratios[0]["onnxruntime"] / side.ratios[1]["onnxruntime"] < 2  # the same model twice


@pytest.mark.tvm
def test_references_that_fail_leave_the_compiled_models_timed(tiny_mlp, tmp_path):
    model = compiler.CompiledModel(compiler.build(tiny_mlp), tiny_mlp.target)
    missing = timing.References(str(tmp_path / "missing.onnx"))  # onnxruntime cannot load it there
    said: list[str] = []
    handler, logger = logging.Handler(), logging.getLogger("tunewise.delivery.timing")
    handler.emit = lambda record: said.append(record.getMessage())
    logger.addHandler(handler)
    level, _ = logger.level, logger.setLevel(logging.INFO)
    try:
        side = timing.time_side_by_side([model], tiny_mlp.inputs, 3, references=missing)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert side.rounds == 3 and 0 < side.latencies[0] < 0.01 and side.ratios == [{}]
    assert side.references == dict.fromkeys(timing.cpu_references())
    assert any(m.startswith("the references were not timed: their process failed (exit code 1)") for m in said), said


def _as_files(model, inputs, folder) -> tuple[str, str]:
    """``model`` saved as ``folder/model.pt2`` (its torch.export program) and ``folder/model.onnx``."""
    pt2, onnx = str(folder / "model.pt2"), str(folder / "model.onnx")
    torch.export.save(torch.export.export(model, inputs), pt2)
    torch.onnx.export(model, inputs, onnx, dynamo=False)
    return pt2, onnx


# latencies in seconds: below one even while the other tests of this pass share the cores


def test_references_of_files_modules_and_zoo_models_with_torch_compile_apart(tmp_path):
    model, inputs = zoo.get("tiny-gpt")
    ids = [inputs[0].numpy()]
    pt2, onnx = _as_files(model, inputs, tmp_path)

    timed = timing.reference_latencies(pt2, ids)  # the program, eagerly and exported to ONNX
    assert set(timed) == set(timing.cpu_references())  # no torch.compile asked for: the references alone
    assert all(0 < latency < 1 for latency in timed.values())
    timed = timing.reference_latencies(onnx, ids, torch_compile=True)  # no PyTorch model to run or compile
    assert timed["torch_eager"] is None is timed["torch_compile"] is timed["torch_compile_seconds"]
    assert 0 < timed["onnxruntime"] < 1
    eager, ort = timing.time_references(model, ids, example_inputs=inputs)  # a module of the Python API
    assert 0 < eager < 1 and 0 < ort < 1
    # a zoo model, torch.compile timed beside the references, its compilation apart
    _, mlp_inputs = zoo.get("tiny-mlp")
    timed = timing.reference_latencies("tiny-mlp", [mlp_inputs[0].numpy()], torch_compile=True)
    assert set(timed) == {*timing.cpu_references(), "torch_compile", "torch_compile_seconds"}
    assert all(0 < timed[name] < 1 for name in ("torch_eager", "onnxruntime", "torch_compile"))
    assert timed["torch_compile_seconds"] > timed["torch_compile"]  # the first call compiles


def test_openvino_is_a_reference_exactly_where_it_is_installed():
    import importlib.util

    installed = importlib.util.find_spec("openvino") is not None
    assert (set(timing.OPENVINO_REFERENCES) <= set(timing.cpu_references())) == installed
    if not installed:
        pytest.skip("openvino is not installed (pip install 'tunewise[openvino]')")
    _, inputs = zoo.get("tiny-mlp")
    timed = timing.reference_latencies("tiny-mlp", [inputs[0].numpy()])
    assert all(0 < timed[name] < 1 for name in timing.OPENVINO_REFERENCES)

"""Tuning for an NVIDIA GPU end to end: on a machine with one (``gpu`` tests, which ``scripts/gpu-check`` runs),
and what a machine without one answers when asked for it."""

import json
import math
import os
import subprocess
import sys

import pytest

from tunewise import target


def _tunewise(*args, cwd=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "tunewise.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


@pytest.mark.tvm
def test_a_gpu_models_tasks_are_listed_from_a_complete_json_target_on_any_machine(gpu_description, tmp_path):
    spec = json.dumps(target.cuda_config(gpu_description))
    listed = _tunewise("tasks", "tiny-cnn", "--target", spec, "--no-measure", "--no-groups", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "conv2d" in listed.stdout and "tasks; untuned estimate" in listed.stdout


@pytest.mark.skipif(target.cuda_description() is not None, reason="a GPU machine runs GPU artifacts")
def test_a_gpu_artifact_on_a_machine_without_a_gpu_is_one_line(tmp_path, gpu_description):
    from tunewise.delivery import artifact

    folder = tmp_path / "artifact"
    folder.mkdir()
    (folder / artifact.LIBRARY).write_bytes(b"\x7fELF not a library")
    (folder / artifact.METADATA).write_text(json.dumps({
        "target": target.cuda_config(gpu_description), artifact.CHECKSUM: artifact.sha256(folder / artifact.LIBRARY),
        "inputs": [{"shape": [1, 3, 16, 16], "dtype": "float32"}]}))
    ran = _tunewise("run", str(folder), cwd=tmp_path)
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1, ran.stderr
    assert "needs a cuda device" in ran.stderr


@pytest.mark.gpu
@pytest.mark.tvm
def test_a_model_tunes_compiles_verifies_and_runs_on_the_gpu(tmp_path):
    """tiny-cnn tuned for GPU 0 from ``--target cuda``: candidates measured there, the compiled model checked
    against PyTorch and timed beside PyTorch eager, its CUDA graph and Nimble's engine, energy metered."""
    tuned = _tunewise("tune", "tiny-cnn", "--target", "cuda", "--trials", "48", "--trials-per-slot", "8",
                      "--time-untuned", "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    for line in ("PyTorch eager", "CUDA graph (1 stream)", "tunewise.runtime.aot", "outputs          match"):
        assert line in tuned.stdout, tuned.stdout
    with open(tmp_path / "out" / "metadata.json") as f:
        metadata = json.load(f)
    assert metadata["target"]["kind"] == "cuda" and metadata["device"]["compute_version"]
    assert metadata["trials"] == 48 and metadata["failures"] < 48
    for key in ("latency_s", "untuned_latency_s", "torch_eager_latency_s", "cuda_graph_latency_s"):
        assert 0 < metadata[key] < 1, key
    ran = _tunewise("run", str(tmp_path / "out"), "--repeat", "20", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr


@pytest.mark.gpu
@pytest.mark.tvm
def test_default_gpu_schedules_time_every_task_of_resnet18(tmp_path):
    """Every task of ResNet-18 runs under its default GPU schedule, measured in the builder pool and on
    the GPU."""
    from tunewise.importing import frontend
    from tunewise.lowering import tasks
    from tunewise.tuning import measure, tvm_env

    gpu = target.resolve("cuda")
    tvm_env.prepare("cuda")
    measurer = measure.Measurer(gpu)
    try:
        model = tasks.extract(frontend.load("resnet18"), gpu, measurer=measurer)
    finally:
        measurer.close()
    latencies = [t.default_latency for t in model.tasks]
    assert all(0 < latency < 0.1 for latency in latencies), latencies
    assert math.isfinite(model.untuned_latency())


@pytest.mark.gpu
def test_the_gpu_references_are_timed_in_float32():
    import numpy as np

    from tunewise import zoo
    from tunewise.delivery import timing

    _, inputs = zoo.get("tiny-cnn")
    timed = timing.time_gpu_references("tiny-cnn", [x.numpy() for x in inputs])
    assert set(timed) == set(timing.GPU_REFERENCES)
    assert all(latency is not None and 0 < latency < 0.1 for latency in timed.values()), timed
    assert np.isfinite(list(timed.values())).all()

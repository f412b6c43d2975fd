"""Shared fixtures: real TVM on tiny models, built once per test session."""

import pytest


@pytest.fixture(scope="session")
def host_target():
    from tunewise import target, tvm_env

    tvm_env.prepare("llvm")
    return target.resolve(None)


@pytest.fixture(scope="session")
def measurer(host_target):
    from tunewise import measure

    m = measure.Measurer(host_target, measure.MeasureConfig(number=2, min_repeat_ms=10))
    yield m
    m.close()


@pytest.fixture(scope="session")
def tiny_mlp(host_target, measurer):
    """tiny-mlp extracted with default latencies measured: two dense tasks."""
    from tunewise import frontend, tasks

    return tasks.extract(frontend.load("tiny-mlp"), host_target, measurer=measurer)

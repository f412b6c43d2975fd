"""Candidate runners: the factory, and the local runner measuring a real tiny task."""

import pytest

from tunewise import candidate_runners, evaluators
from tunewise.errors import InputError
from tunewise.lowering import tasks
from tunewise.tuning import measure
from tunewise.tuning.build import build_candidate, export_candidate


def test_an_unknown_runner_is_one_line():
    with pytest.raises(InputError) as err:
        candidate_runners.create("rpc", target=None, config=None)
    assert str(err.value) == "unknown runner 'rpc'; valid names: local, rpc://HOST:PORT/KEY"


def test_an_argument_the_runner_does_not_take_is_named():
    with pytest.raises(InputError, match=r"runner 'local' got unknown arguments \['tracker'\]; it takes: target"):
        candidate_runners.create("local", target=None, config=None, tracker="host:9190")


@pytest.mark.tvm
def test_the_local_runner_measures_a_tiny_task(tiny_mlp, host_target):
    mod = tiny_mlp.task_mods[0]
    artifact = export_candidate(build_candidate(mod, host_target))
    runner = candidate_runners.create("local", target=host_target,
                                      config=measure.MeasureConfig(number=2, min_repeat_ms=10))
    try:
        result = runner.run(artifact, tasks.args_info(mod), evaluators.create("fixed"))
    finally:
        runner.close()
    assert result.error_msg is None
    assert len(result.run_secs) == 1 and 0 < float(result.run_secs[0]) < 1


class Counting(candidate_runners.CandidateRunner):
    """A runner of one's own: the local runner, counting the candidates it is given."""

    def __init__(self, *, target, config):
        self.local = candidate_runners.Local(target=target, config=config)
        self.runs = 0

    def run(self, artifact, args_info, evaluator):
        self.runs += 1
        return self.local.run(artifact, args_info, evaluator)

    def close(self):
        self.local.close()


@pytest.mark.tvm
def test_the_measurer_measures_through_a_runner_it_is_given(tiny_mlp, host_target):
    config = measure.MeasureConfig(number=2, min_repeat_ms=10)
    runner = Counting(target=host_target, config=config)
    measurer = measure.Measurer(host_target, config, evaluator="fixed", runner=runner)
    try:
        results = measurer.measure([(m, tasks.args_info(m)) for m in tiny_mlp.task_mods])
    finally:
        measurer.close()
    assert runner.runs == 2 and all(r.error is None and r.latency > 0 for r in results)


@pytest.mark.tvm
def test_a_candidate_that_fails_leaves_the_next_one_a_fresh_worker(tiny_mlp, host_target, tmp_path):
    """A failed run replaces the worker (on a GPU, a failed kernel can leave the process's CUDA context
    unusable); a successful one keeps it."""
    import os

    artifact = export_candidate(build_candidate(tiny_mlp.task_mods[0], host_target))
    args_info = tasks.args_info(tiny_mlp.task_mods[0])
    runner = candidate_runners.create("local", target=host_target, config=measure.MeasureConfig())

    def worker_pid():
        result = runner.run(artifact, args_info, lambda *_: [float(os.getpid())])
        assert result.error_msg is None, result.error_msg
        return int(float(result.run_secs[0]))

    try:
        first = worker_pid()
        assert worker_pid() == first
        failed = runner.run(str(tmp_path / "missing.so"), args_info, evaluators.create("fixed"))
        assert failed.error_msg and "missing.so" in failed.error_msg
        assert worker_pid() not in (first, 0)
    finally:
        runner.close()

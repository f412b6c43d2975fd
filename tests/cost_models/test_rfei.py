"""The MetaSchedule cost models on real candidates of a tiny-mlp task: RFEI's scores, exploration, state."""

from __future__ import annotations

import numpy as np
import pytest

from tunewise import cost_models

pytestmark = pytest.mark.tvm


@pytest.fixture(scope="module")
def space(tiny_mlp):
    """A tuning context of tiny-mlp's first task and its design spaces as measure candidates."""
    from tvm.s_tir import meta_schedule as ms

    context = ms.TuneContext(tiny_mlp.task_mods[0], target=tiny_mlp.target, space_generator="post-order-apply",
                             task_name="dense", rand_state=0, num_threads=1)
    candidates = [ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(s.mod["main"]))
                  for s in context.generate_design_space()]
    assert len(candidates) >= 3
    return context, candidates


def results(*latencies):
    from tvm.s_tir import meta_schedule as ms

    return [ms.runner.RunnerResult([x, x], None) if x else ms.runner.RunnerResult(None, "run: failed")
            for x in latencies]


def test_random_scores_from_its_own_generator_until_warm(space):
    context, candidates = space
    state = np.random.get_state()[1].copy()
    a, b = (cost_models.create(name, seed=5) for name in ("rfei", "rfei"))
    first = a.predict(context, candidates)
    np.testing.assert_array_equal(first, b.predict(context, candidates))
    assert first.dtype == np.float64 and np.all((0 <= first) & (first < 1)) and a.forest_ is None
    xgb = cost_models.create("xgb", seed=5)
    np.testing.assert_array_equal(xgb.predict(context, candidates), cost_models.create("xgb", seed=5).predict(
        context, candidates))
    assert xgb.config.seed == 5
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # the global RNG is untouched


def test_expected_improvement_scores_after_warm_up(space, tmp_path):
    context, candidates = space
    model = cost_models.create("rfei", warmup=3, max_exploration=0.0, seed=0)
    model.update(context, candidates[:3], results(2e-3, 1e-3, None))
    assert model.forest_ is not None and model.forest_.forest_.n_features_in_ == 3 * 164
    scores = model.predict(context, candidates)
    from scipy import stats

    from tunewise.cost_models._rfei import _features_of

    # the belief: scikit-learn's forest prediction and the spread of its trees; the best measured normalised
    # throughput is 1 (the task has a valid measurement)
    features = _features_of(model.extractor, context, candidates)
    forest = model.forest_.forest_
    mean = forest.predict(features)
    std = np.std([tree.predict(features) for tree in forest.estimators_], axis=0)
    assert np.all(std > 0) and np.all(mean < 1)  # EI is positive, and not the plain gain
    # E[max(0, Y - 1)] for Y ~ N(mean, std^2): std * (z Phi(z) + phi(z)) with z = (mean - 1) / std ...
    z = (mean - 1.0) / std
    np.testing.assert_allclose(scores, std * (z * stats.norm.cdf(z) + stats.norm.pdf(z)), rtol=1e-9)
    # ... and a Monte Carlo estimate of it (2e6 draws: relative error well under 1 %)
    draws = np.random.default_rng(0).normal(mean, std, size=(2_000_000, len(mean)))
    np.testing.assert_allclose(scores, np.maximum(draws - 1.0, 0.0).mean(axis=0), rtol=0.02)
    assert model.exploration_ == 0.0
    # save and load: the same state and the same scores
    model.save(str(tmp_path / "rfei.pkl"))
    loaded = cost_models.create("rfei", warmup=3, max_exploration=0.0, seed=0)
    loaded.load(str(tmp_path / "rfei.pkl"))
    np.testing.assert_array_equal(loaded.predict(context, candidates), scores)


def test_exploration_shuffles_a_share_of_the_scores(space, tmp_path):
    context, candidates = space
    explorer = cost_models.create("rfei", warmup=3, max_exploration=1.0, seed=0)
    explorer.update(context, candidates[:3], results(2e-3, 1e-3, 1.5e-3))
    explorer.save(str(tmp_path / "state.pkl"))
    plain = cost_models.create("rfei", warmup=3, max_exploration=0.0, seed=0)
    plain.load(str(tmp_path / "state.pkl"))
    population = candidates * 40  # the search scores populations of hundreds
    reference = plain.predict(context, population)
    for _ in range(3):
        scores = explorer.predict(context, population)
        np.testing.assert_allclose(np.sort(scores), np.sort(reference))  # the same scores, some reordered
        moved = np.mean(~np.isclose(scores, reference))
        assert 0 < explorer.exploration_ <= 1 and 0 < moved <= explorer.exploration_ + 0.1

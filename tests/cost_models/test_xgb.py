"""MetaSchedule's XGBoost cost model as tunewise runs it: seeded, and trained only once its scores are used."""

import numpy as np
import pytest

pytestmark = pytest.mark.tvm


def _candidates(model, count: int):
    """``count`` candidates of ``model``'s first task drawn from its design space, and the search's context."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise import cost_models
    from tunewise.tuning.search import TaskSearch

    search = TaskSearch(model.task_mods[0], model.tasks[0].name, model.target, seed=0, num_threads=1, batch=count)
    proposed = search.sample(count, ms.database.MemoryDatabase(), cost_models.create("xgb", seed=0))
    return search._measuring, [candidate for candidate, _ in proposed]


def test_the_booster_is_trained_at_the_update_that_reaches_the_warm_up_and_scores_from_then_on(tiny_mlp):
    from tvm.s_tir import meta_schedule as ms

    from tunewise import cost_models

    context, candidates = _candidates(tiny_mlp, 8)
    assert len(candidates) >= 6
    model = cost_models.create("xgb", seed=0, num_warmup_samples=2 * len(candidates) - 1)
    again = cost_models.create("xgb", seed=0, num_warmup_samples=2 * len(candidates) - 1)
    results = [ms.runner.RunnerResult([1e-6 * (i + 1)], None) for i in range(len(candidates))]
    model.update(context, candidates, results)
    assert model.booster is None  # its scores are still draws of its own generator: nothing trained
    drawn = model.predict(context, candidates)
    assert np.array_equal(drawn, again.predict(context, candidates))  # seeded
    model.update(context, candidates, results)  # the warm-up is reached
    assert model.booster is not None
    scores = model.predict(context, candidates)
    assert np.array_equal(scores, model.predict(context, candidates))  # the booster's, not draws
    assert scores[0] > scores[-1]  # the fastest measured scores highest


def test_candidates_without_feature_rows_each_get_one_score_in_their_place():
    """An AMX product's kernels hold their stores inside the intrinsic's calls: some have no feature rows at all,
    and each candidate still gets its own score, the same for all those without rows (one row of zeros)."""
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    from tunewise import cost_models
    from tunewise.lowering import amx, spaces

    a = te.placeholder((128, 192, 2), "bfloat16", name="A")
    b = te.placeholder((12, 192, 32, 2), "bfloat16", name="B")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b, amx.product(a, b)])})
    target = tvm.target.Target({"kind": "llvm", "mcpu": "sapphirerapids", "num-cores": 2})
    context = ms.TuneContext(mod, target=target, space_generator=spaces.generator(mod, target), rand_state=0,
                             search_strategy="replay-trace")
    context.pre_tuning(8, 8, context.generate_design_space(), None, None)
    candidates = context.generate_measure_candidates()
    rows = [len(x.numpy()) for x in ms.feature_extractor.PerStoreFeature().extract_from(context, candidates)]
    assert 0 in rows and max(rows) > 0  # candidates with and without rows
    model = cost_models.create("xgb", seed=0, num_warmup_samples=1)
    model.update(context, candidates, [ms.runner.RunnerResult([1e-6 * (i + 1)], None) for i in range(len(rows))])
    scores = model.predict(context, candidates)
    assert len(scores) == len(candidates) and np.isfinite(scores).all()
    assert len({scores[i] for i, n in enumerate(rows) if n == 0}) == 1

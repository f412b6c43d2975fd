"""Moving a schedule to a task of another shape: replay the trace, fitting each tile to the new loop extents.

:func:`transfer_across` replays a trace tuned for one task on the module of another task with the same
sketch (:mod:`tunewise.sharing._similarity`). Every decision is kept except those of ``SamplePerfectTile``
whose factors do not multiply to the new loop's extent: those become the nearest valid factorisation of
the extent (:func:`nearest_factors`). The schedule is then post-processed as MetaSchedule post-processes
its own candidates (parallelisation, vectorisation, unrolling, layout rewrites); a trace that does not
replay, or a post-processor that rejects the result, gives ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tunewise.sharing._similarity import divisors


def nearest_factors(extent: int, factors: Sequence[int], max_innermost: int = 0) -> tuple[int, ...]:
    """The factorisation of ``extent`` into ``len(factors)`` ordered parts nearest to ``factors`` (the sum
    over the parts of ``|log new - log old|``; ties: the first in lexicographic order), its last part at most
    ``max_innermost`` when that is positive. ``factors`` itself when it is one."""
    parts = len(factors)
    limit = max_innermost if max_innermost > 0 else extent
    if math.prod(factors) == extent and factors[-1] <= limit:
        return tuple(factors)
    best: tuple[float, tuple[int, ...]] | None = None

    def search(rest: int, chosen: tuple[int, ...], distance: float) -> None:
        nonlocal best
        if best is not None and distance > best[0]:
            return
        if len(chosen) == parts - 1:
            if rest <= limit:
                total = distance + abs(math.log(rest) - math.log(factors[-1]))
                if best is None or (total, chosen + (rest,)) < best:
                    best = (total, chosen + (rest,))
            return
        old = factors[len(chosen)]
        for d in sorted(divisors(rest)):
            search(rest // d, chosen + (d,), distance + abs(math.log(d) - math.log(old)))

    search(extent, (), 0.0)
    return best[1] if best is not None else (extent, *[1] * (parts - 1))


def transfer_across(trace, mod, target, postprocs=None):
    """A schedule of ``mod`` made from ``trace`` (tuned for a task of another shape, same sketch), tile
    decisions fitted to ``mod``'s loops and post-processed by ``postprocs`` (default: those of MetaSchedule's
    space generator for ``target``); ``None`` when it does not apply."""
    import tvm

    sch = tvm.s_tir.Schedule(mod)

    def fitted(instruction, inputs, attrs, decision):
        if instruction.kind.name != "SamplePerfectTile" or decision is None:
            return decision
        extent = sch.get(inputs[0]).extent
        if not isinstance(extent, tvm.tirx.IntImm):
            return None  # a dynamic extent: sampled afresh
        return list(nearest_factors(int(extent), [int(x) for x in decision], int(attrs[1])))

    try:
        trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=fitted)
        sch.enter_postproc()
        for postproc in postprocessors(mod, target) if postprocs is None else postprocs:
            if not postproc.apply(sch):
                return None
    except Exception:  # TVM raises InternalError, ValueError, ScheduleError... when the trace does not apply
        return None
    return sch


def postprocessors(mod, target) -> list:
    """The post-processors MetaSchedule's space generator applies to the candidates of ``mod`` on ``target``."""
    from tvm.s_tir import meta_schedule as ms

    context = ms.TuneContext(mod, target=target, space_generator="post-order-apply", task_name="transfer",
                             num_threads=1)
    return list(context.space_generator.postprocs)

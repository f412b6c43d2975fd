"""Moving a schedule to a task of another shape: replay the trace, fitting each tile to the new loop extents.

:func:`transfer_across` replays a trace tuned for one task on the module of another task with the same
sketch (:mod:`tunewise.sharing._similarity`). The elementwise blocks the trace only inlines are the source
task's own (its bias, its ReLU), so they are replaced by those the other task's design space inlines, before
the rest of the trace. Every decision is kept except those of ``SamplePerfectTile`` whose factors do not
multiply to the new loop's extent: those become the nearest valid factorisation of the extent
(:func:`nearest_factors`). The schedule is then post-processed as MetaSchedule post-processes its own
candidates (parallelisation, vectorisation, unrolling, layout rewrites); a trace that does not replay, or a
post-processor that rejects the result, gives ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tunewise.lowering import spaces
from tunewise.sharing._similarity import divisors, inlined_blocks


@dataclass(frozen=True)
class Destination:
    """What :func:`transfer_across` needs of the task a schedule moves to, read once from its design space
    (:func:`destination`): MetaSchedule's ``postprocs`` for it, and the ``inlining`` that starts its design
    space (the instructions that fetch and inline its elementwise blocks)."""

    postprocs: tuple
    inlining: tuple


def destination(mod, target) -> Destination:
    """The :class:`Destination` of a task module ``mod`` on ``target``."""
    from tvm.s_tir import meta_schedule as ms

    context = ms.TuneContext(mod, target=target, space_generator=spaces.generator(mod, target), task_name="transfer",
                             num_threads=1)
    sketches = context.generate_design_space()
    instructions = list(sketches[0].trace.insts) if sketches else []
    return Destination(tuple(context.space_generator.postprocs),
                       tuple(instructions[i] for i in _inlined(instructions)))


def _inlined(instructions) -> list[int]:
    """:func:`~tunewise.sharing._similarity.inlined_blocks` of TVM instructions (random variables told apart
    by their handles)."""

    def handles(values) -> list[int]:
        found = []
        for x in values:
            if isinstance(x, (list, tuple)) or type(x).__name__ == "Array":
                found += handles(x)
            elif hasattr(x, "__chandle__"):
                found.append(x.__chandle__())
        return found

    end = next((i for i, inst in enumerate(instructions) if inst.kind.name == "EnterPostproc"), len(instructions))
    return inlined_blocks([(inst.kind.name, handles(inst.inputs), handles(inst.outputs))
                           for inst in instructions[:end]])


def _with_inlining(trace, inlining: Sequence):
    """``trace`` with the blocks it only inlines replaced by ``inlining`` (another task's: a
    :attr:`Destination.inlining`), first."""
    from tvm.s_tir import Trace

    dropped = set(_inlined(list(trace.insts)))
    kept = [inst for i, inst in enumerate(trace.insts) if i not in dropped]
    return Trace([*inlining, *kept], {inst: trace.decisions[inst] for inst in kept if inst in trace.decisions})


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


def transfer_across(trace, mod, target, to: Destination | None = None):
    """A schedule of ``mod`` made from ``trace`` (tuned for a task of another shape, same sketch), with
    ``mod``'s own inlining and tile decisions fitted to its loops, post-processed; ``to`` is ``mod``'s
    :func:`destination` on ``target`` (read here when not given). ``None`` when it does not apply."""
    import tvm

    to = destination(mod, target) if to is None else to
    sch = tvm.s_tir.Schedule(mod)

    def fitted(instruction, inputs, attrs, decision):
        if instruction.kind.name != "SamplePerfectTile" or decision is None:
            return decision
        extent = sch.get(inputs[0]).extent
        if not isinstance(extent, tvm.tirx.IntImm):
            return None  # a dynamic extent: sampled afresh
        return list(nearest_factors(int(extent), [int(x) for x in decision], int(attrs[1])))

    try:
        _with_inlining(trace, to.inlining).apply_to_schedule(sch, remove_postproc=True, decision_provider=fitted)
        sch.enter_postproc()
        for postproc in to.postprocs:
            if not postproc.apply(sch):
                return None
    except Exception:  # TVM raises InternalError, ValueError, ScheduleError... when the trace does not apply
        return None
    return sch

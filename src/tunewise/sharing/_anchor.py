"""Same-anchor sharing: tasks that run the same main computation with different fused epilogues.

Fusion makes one task per distinct chain of operators, so one convolution shape applied in several places
yields several tasks that differ only in what is fused after it (a bias, a residual add, a ReLU). The shared
computation is the task's *anchor block* (MetaSchedule's term: the block with a reduction and the most FLOPs;
:func:`anchor_key` gives its structural hash). A schedule tuned for one member moves to another by
MetaSchedule's ``schedule_using_anchor_trace`` (:func:`transfer`). The session measures the group's best
schedules on a member before searching it (:class:`Offers`): each is a real trial of the member, committed
under its own workload, so its evolutionary search then starts from it.
"""

from __future__ import annotations

import math

from tunewise.sharing._transfer import Destination, destination

_PREPROC = "meta_schedule.layout_rewrite_preproc"  # the annotation of a weight layout rewrite's block


def anchor_key(mod) -> str:
    """Structural hash (hex) of ``mod``'s anchor block, free buffers mapped; ``""`` when it has none (a
    reshape, a copy...), as such tasks have nothing worth sharing."""
    from tvm.s_tir.analysis import find_anchor_sblock
    from tvm_ffi import structural_hash

    block = find_anchor_sblock(mod)
    return "" if block is None else f"{structural_hash(block, map_free_vars=True) & (2**64 - 1):016x}"


def groups(anchors) -> tuple[tuple[int, ...], ...]:
    """For each task (``anchors``: its :func:`anchor_key`), the other tasks with the same non-empty key."""
    members: dict[str, list[int]] = {}
    for k, key in enumerate(anchors):
        if key:
            members.setdefault(key, []).append(k)
    return tuple(tuple(j for j in members.get(key, ()) if j != k) for k, key in enumerate(anchors))


def transfer(trace, mod, target, to: Destination | None = None):
    """A schedule of ``mod`` made from ``trace``, a trace tuned for a module with the same anchor block;
    ``None`` when it does not apply. ``to`` is ``mod``'s :func:`~tunewise.sharing.destination` on ``target``
    (read here when not given).

    MetaSchedule's anchor transfer replays the weight layout rewrites of the trace (its ``RewriteLayout``
    post-processing, on a module with layout-free weights) on the anchor block alone, so ``mod``'s other
    weights (the bias its epilogue adds) would keep their layout, and a schedule moved to a mate and back would
    not be the one it was. Those rewrites are left out of the replay (:func:`_without_layout_rewrites`), and
    ``mod``'s own ``RewriteLayout`` lays out every weight it reads, as it does for the candidates its search
    measures.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.trace_apply import schedule_using_anchor_trace

    to = destination(mod, target) if to is None else to
    sch = tvm.s_tir.Schedule(mod)
    try:
        schedule_using_anchor_trace(sch, _without_layout_rewrites(trace), target)
        for postproc in to.postprocs:
            if isinstance(postproc, ms.postproc.RewriteLayout) and not postproc.apply(sch):
                return None
    except Exception:  # TVM raises InternalError, ValueError... when the trace does not apply
        return None
    return sch


def _without_layout_rewrites(trace):
    """``trace`` without the weight layout rewrites of its post-processing (MetaSchedule's ``RewriteLayout``:
    a ``CacheRead`` whose block is annotated ``meta_schedule.layout_rewrite_preproc``, that annotation, and
    a ``TransformLayout``); ``trace`` itself when it has none."""
    from tvm.s_tir import Trace

    instructions = list(trace.insts)
    start = next((i for i, inst in enumerate(instructions) if inst.kind.name == "EnterPostproc"), len(instructions))

    def preproc(inst) -> bool:
        return inst.kind.name == "Annotate" and str(inst.attrs[0]) == _PREPROC

    blocks = {inst.inputs[0].__chandle__() for inst in instructions[start:] if preproc(inst)}
    dropped = {i for i, inst in enumerate(instructions[start:], start)
               if inst.kind.name == "TransformLayout" or preproc(inst)
               or (inst.kind.name == "CacheRead" and inst.outputs[0].__chandle__() in blocks)}
    if not dropped:
        return trace
    kept = [inst for i, inst in enumerate(instructions) if i not in dropped]
    return Trace(kept, {inst: trace.decisions[inst] for inst in kept if inst in trace.decisions})


class Offers:
    """Which of its group-mates' best records each task should be given, and which it has been given.

    ``top`` bounds how many records of each mate are looked at. A record is offered to a task when it is
    faster than the task's best so far and the task has not been offered it before: offers are made once,
    whatever their outcome, so a schedule that does not transfer well is not measured again.
    """

    def __init__(self, anchors, *, top: int = 2):
        self.groups = groups(anchors)
        self.top = top
        self._given: list[set[str]] = [set() for _ in self.groups]

    def shares(self, k: int) -> bool:
        """Whether task ``k`` has group-mates at all."""
        return bool(self.groups[k])

    def pending(self, k: int, best: float, records_of) -> list[tuple[str, object]]:
        """The offers due to task ``k`` (best so far ``best``), fastest first: ``(candidate hash, record)``.

        ``records_of(j, n)`` returns task ``j``'s ``n`` best records as ``(candidate hash, latency, record)``.
        """
        due = {}
        for j in self.groups[k]:
            for candidate, latency, record in records_of(j, self.top):
                if math.isfinite(latency) and latency < best and candidate not in self._given[k]:
                    due[candidate] = (latency, record)
        return [(candidate, record) for candidate, (_, record) in sorted(due.items(), key=lambda kv: kv[1][0])]

    def given(self, k: int, candidate: str) -> None:
        """Record that task ``k`` was offered the record measured as ``candidate``."""
        self._given[k].add(candidate)

"""How alike two tasks' design spaces are, whatever their shapes (the TVM RFC "Selective tuning").

A :class:`Signature` describes a design space by two things read off a MetaSchedule trace:

- its *sketch*: a short hash of the trace's instructions before post-processing, without decisions, constant
  inputs, unused look-ups and the fused elementwise blocks the trace only inlines (:func:`inlined_blocks`), its
  random variables renamed in order; traces of one design space share a sketch whatever they sampled, and
  tasks share one only when the same kind of computation is tiled the same way;
- its *tile knobs*: for each ``SamplePerfectTile``, the extent of the loop it splits and its number of parts.

:func:`task_signature` reads the design spaces MetaSchedule generates for a task; :func:`record_signature` one
stored record's trace (no TVM needed). :func:`similarity` is 0 for signatures without a common sketch or with
other tile knobs, else the product over the knobs of the Jaccard overlap of the divisors of their extents:
two 64-long loops give 1, a 64-long and a 56-long loop give 4/11.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass

from tunewise.lowering import spaces

_RANDOM_VARIABLE = re.compile(r"^[blv]\d+$")  # how a trace's JSON names blocks, loops and sampled values


@dataclass(frozen=True)
class Signature:
    """The design space(s) of a task or of one record: ``sketches`` (hashes, see the module docstring) and
    ``tiles``, ``(loop extent, parts)`` of each perfect-tile knob in trace order."""

    sketches: frozenset[str]
    tiles: tuple[tuple[int, int], ...]


def trace_signature(trace_json) -> Signature:
    """The :class:`Signature` of one trace in MetaSchedule's JSON form (``[instructions, decisions]``)."""
    instructions, decisions = trace_json
    decided = {index: decision for index, decision in decisions}
    kinds = [i[0] for i in instructions]
    end = kinds.index("EnterPostproc") if "EnterPostproc" in kinds else len(instructions)
    inlined = set(inlined_blocks([(kind, _variables(inputs), outputs) for kind, inputs, _, outputs
                                  in instructions[:end]]))
    used: set[str] = set()
    kept = []
    for index in reversed(range(end)):
        kind, inputs, attrs, outputs = instructions[index]
        if index in inlined:
            continue  # an elementwise block inlined, and its inlining
        if kind.startswith("Get") and not used.intersection(outputs):
            continue  # a look-up nothing uses
        kept.append(index)
        used.update(_variables(inputs))
    names: dict[str, str] = {}

    def renamed(x):
        if isinstance(x, list):
            return [renamed(y) for y in x]
        if isinstance(x, str) and _RANDOM_VARIABLE.match(x):
            return names.setdefault(x, f"{x[0]}{len(names)}")
        return None  # a constant

    shape, tiles = [], []
    for index in reversed(kept):
        kind, inputs, attrs, outputs = instructions[index]
        shape.append([kind, renamed(inputs), attrs, renamed(outputs)])
        if kind == "SamplePerfectTile" and index in decided:
            tiles.append((math.prod(decided[index]), len(decided[index])))
    sketch = hashlib.sha1(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]
    return Signature(frozenset([sketch]), tuple(tiles))


INLINES = ("ComputeInline", "ReverseComputeInline")
"""The instructions that inline a block into its consumer or its producer."""


def inlined_blocks(instructions) -> list[int]:
    """The positions of the instructions that fetch a block only to inline it, and of those inlinings, among
    ``instructions`` (``(kind, inputs, outputs)`` each: a trace before post-processing, its inputs and outputs
    anything that compares equal for one random variable): a ``GetSBlock`` whose block every later
    instruction that takes it inlines (:data:`INLINES`; at least one does)."""
    uses: dict = {}
    for index, (_, inputs, _) in enumerate(instructions):
        for variable in inputs:
            uses.setdefault(variable, []).append(index)
    found = []
    for index, (kind, _, outputs) in enumerate(instructions):
        if kind != "GetSBlock" or len(outputs) != 1:
            continue
        taking = uses.get(outputs[0], [])
        if taking and all(instructions[i][0] in INLINES for i in taking):
            found += [index, *taking]
    return sorted(found)


def _variables(values) -> list[str]:
    """The random variables among ``values`` (an instruction's inputs, lists nested)."""
    found = []
    for x in values:
        if isinstance(x, list):
            found += _variables(x)
        elif isinstance(x, str) and _RANDOM_VARIABLE.match(x):
            found.append(x)
    return found


def record_signature(record: str) -> Signature:
    """The :class:`Signature` of a stored record (MetaSchedule's JSON text of a tuning record)."""
    return trace_signature(json.loads(record)[0])


def task_signature(mod, target) -> Signature:
    """The :class:`Signature` of a task module's design spaces for ``target`` (MetaSchedule's
    post-order-apply space generator): every sketch, and the tile knobs of the first."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise.stores._database import record_json

    context = ms.TuneContext(mod, target=target, space_generator=spaces.generator(mod, target), task_name="signature",
                             num_threads=1)
    signatures = []
    for space in context.generate_design_space():
        record = ms.database.TuningRecord(space.trace, ms.database.Workload(mod), None, target, None)
        signatures.append(record_signature(record_json(record)))
    if not signatures:
        return Signature(frozenset(), ())
    return Signature(frozenset().union(*(s.sketches for s in signatures)), signatures[0].tiles)


def divisors(n: int) -> frozenset[int]:
    """The positive divisors of ``n`` (``n`` >= 1)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return frozenset(small + [n // d for d in small])


def similarity(a: Signature, b: Signature) -> float:
    """0 when ``a`` and ``b`` share no sketch or differ in their tile knobs' number or parts; else the product
    over the knobs of the Jaccard overlap of the divisors of their loop extents (1 for equal shapes)."""
    if not a.sketches & b.sketches or len(a.tiles) != len(b.tiles):
        return 0.0
    value = 1.0
    for (extent_a, parts_a), (extent_b, parts_b) in zip(a.tiles, b.tiles, strict=True):
        if parts_a != parts_b:
            return 0.0
        da, db = divisors(extent_a), divisors(extent_b)
        value *= len(da & db) / len(da | db)
    return value

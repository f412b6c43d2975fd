"""bfloat16 matrix products on Intel AMX tiles, as a TVM tensor intrinsic.

One call of an intrinsic :func:`amx_bf16_intrinsic` names computes a 32 x 32 float32 block ``C += A @ B``, both
operands bfloat16 in pairs along the depth ``k``: ``A2[m, k // 2, k % 2]`` (a row-major ``A`` reshaped) and
``B2[k // 2, n, k % 2]`` (AMX's layout). Plain indices let MetaSchedule's auto-tensorization map a task onto it.
The block stays in four accumulator tiles while ``depth`` is consumed 32 at a time, four ``TDPBF16PS`` a step.

It reaches LLVM as AMX's own calls (``ldtilecfg``, ``tileloadd64``, ``tdpbf16ps``, ``tilestored64``) on tile
numbers and pointers, which TVM's bfloat16 legalisation leaves intact. Each call configures the eight tiles,
loads its accumulators and stores them back: calls compose in any order, on any thread, but not inside a
vectorized loop. :func:`product` is the product in those layouts as a TE computation,
:func:`panels` lays a constant weight out for it, :func:`to_panels` an activation.

Linux lets a process use AMX's tile data only once it asks (``arch_prctl(ARCH_REQ_XCOMP_PERM)``):
:func:`tiles_granted` asks, through :func:`tunewise.target.check_runnable` and in the measuring workers' zygote.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import sys

import numpy as np
from tvm.script import tirx as T

from ..errors import TargetError

STEP = 32
"""The bfloat16 depth one ``TDPBF16PS`` consumes; an intrinsic's ``depth`` is a multiple of it."""
BLOCK = 32
"""The rows and columns of an intrinsic's block: a product's rows and columns are multiples of it."""
MAX_DEPTH = 384
"""The deepest intrinsic a search tiles with (bench/studies/bfloat16/findings.md: 64 trials reach 1777-2050
GFLOP/s on a 2-core Xeon, as fast as oneDNN's bfloat16); :func:`register_intrinsics` registers every depth."""

_SYS_ARCH_PRCTL = 158  # x86-64
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18


@functools.cache
def tiles_granted() -> bool:
    """Whether Linux lets this process use AMX's tile data: asked once a process, never raising (a CPU or
    kernel without AMX refuses; so does any system but Linux on x86-64)."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0


def enable_amx() -> None:
    """:func:`tiles_granted`, or :class:`TargetError` when it is refused, so that a kernel using the intrinsic
    fails with a message, not with ``SIGILL``."""
    if not tiles_granted():
        raise TargetError("this CPU or Linux kernel does not grant AMX tile data: bfloat16 on AMX needs a CPU "
                          "with amx-bf16 and Linux 5.16 or later")


def product(a, b):
    """The TE computation ``C = A @ B`` (float32 ``C``, ``(*batch, M, N)``) of ``a`` (bfloat16 ``A`` in pairs,
    ``(*batch, M, K // 2, 2)``) and ``b`` (bfloat16 ``B`` in 32-column panels of pairs, ``(*batch, N // 32, K // 2,
    32, 2)``, :func:`panels`, or without the batch dimensions: one ``B`` for every ``A``), each term a product of
    the bfloat16 values in float32: what the intrinsic computes, block by block."""
    from tvm import te

    *batch, rows, half, _ = a.shape
    shared = len(b.shape) == 4
    ko, ki = te.reduce_axis((0, half), "ko"), te.reduce_axis((0, 2), "ki")

    def value(*index):
        *outer, i, j = index
        panel = b[j // BLOCK, ko, j % BLOCK, ki] if shared else b[(*outer, j // BLOCK, ko, j % BLOCK, ki)]
        return te.sum(a[(*outer, i, ko, ki)].astype("float32") * panel.astype("float32"), axis=[ko, ki])

    return te.compute((*batch, rows, b.shape[-4] * BLOCK), value, name="C")


def to_panels(x):
    """The TE computation of float32 ``x`` (``(*batch, K, N)``, ``K`` and ``N`` multiples of 32) rounded to bfloat16
    in :func:`panels`' layout, ``(*batch, N // 32, K // 2, 32, 2)``: the right operand of a product of two
    activations, laid out as the product runs."""
    from tvm import te

    *batch, depth, columns = x.shape

    def value(*index):
        *outer, panel, half, column, pair = index
        return x[(*outer, half * 2 + pair, panel * BLOCK + column)].astype("bfloat16")

    return te.compute((*batch, columns // BLOCK, depth // 2, BLOCK, 2), value, name="panels")


def panels(weight: np.ndarray) -> np.ndarray:
    """A ``(K, N)`` float32 matrix, ``K`` and ``N`` multiples of 32, rounded to bfloat16 (to nearest, ties to
    even) and laid out as :func:`product` reads ``B``: ``[n // 32, k // 2, n % 32, k % 2]``."""
    import ml_dtypes

    depth, columns = weight.shape
    if depth % STEP or columns % BLOCK:
        raise ValueError(f"a weight in panels has a multiple of {STEP} rows and of {BLOCK} columns, not {weight.shape}")
    rounded = np.asarray(weight, np.float32).astype(ml_dtypes.bfloat16)
    return np.ascontiguousarray(rounded.reshape(depth // 2, 2, columns // BLOCK, BLOCK).transpose(2, 0, 3, 1))


def _functions(depth: int):
    """The description and the AMX implementation of a 32 x 32 x ``depth`` block."""
    half = depth // 2

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (32, half, 2), "bfloat16", offset_factor=1, strides=[T.int32(), 2, 1])
        B = T.match_buffer(b, (half, 32, 2), "bfloat16", offset_factor=1, strides=[T.int32(), 2, 1])
        C = T.match_buffer(c, (32, 32), "float32", offset_factor=1, strides=[T.int32(), 1])
        with T.sblock("root"):
            T.reads(C[0:32, 0:32], A[0:32, 0:half, 0:2], B[0:half, 0:32, 0:2])
            T.writes(C[0:32, 0:32])
            for i, j, ko, ki in T.grid(32, 32, half, 2):
                with T.sblock("update"):
                    vi, vj, vko, vki = T.axis.remap("SSRR", [i, j, ko, ki])
                    C[vi, vj] = C[vi, vj] + T.cast(A[vi, vko, vki], "float32") * T.cast(
                        B[vko, vj, vki], "float32")

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb, sc = T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, (32, half, 2), "bfloat16", offset_factor=1, strides=[sa, 2, 1])
        B = T.match_buffer(b, (half, 32, 2), "bfloat16", offset_factor=1, strides=[sb, 2, 1])
        C = T.match_buffer(c, (32, 32), "float32", offset_factor=1, strides=[sc, 1])
        with T.sblock("root"):
            T.reads(C[0:32, 0:32], A[0:32, 0:half, 0:2], B[0:half, 0:32, 0:2])
            T.writes(C[0:32, 0:32])
            # LDTILECFG's 64 bytes as 16 words: palette 1 (word 0); 64 bytes a row for tiles 0-7 (words 4-7);
            # 16 rows for tiles 0-7 (words 12 and 13); the rest zero. Tiles 0-3 hold C's four 16 x 16 quarters
            # (row-major), 4-5 A's two row halves, 6-7 B's two column halves.
            config = T.alloc_buffer((16,), "int32", scope="local")
            for w in T.unroll(16):
                config[w] = T.Select(4 <= w and w < 8, 64 | 64 << 16,
                                     T.Select(12 <= w and w < 14, 16 | 16 << 8 | 16 << 16 | 16 << 24,
                                              T.Select(w == 0, 1, 0)))
            T.evaluate(T.call_llvm_intrin("void", "llvm.x86.ldtilecfg", config.access_ptr("r")))
            for q in T.unroll(4):
                T.evaluate(T.call_llvm_intrin("void", "llvm.x86.tileloadd64", T.Cast("int8", q),
                                              T.address_of(C[q // 2 * 16, q % 2 * 16]), T.int64(sc * 4)))
            for s in T.serial(depth // 32):
                for h in T.unroll(2):
                    T.evaluate(T.call_llvm_intrin("void", "llvm.x86.tileloadd64", T.Cast("int8", 4 + h),
                                                  T.address_of(A[h * 16, s * 16, 0]), T.int64(sa * 2)))
                    T.evaluate(T.call_llvm_intrin("void", "llvm.x86.tileloadd64", T.Cast("int8", 6 + h),
                                                  T.address_of(B[s * 16, h * 16, 0]), T.int64(sb * 2)))
                for q in T.unroll(4):
                    T.evaluate(T.call_llvm_intrin("void", "llvm.x86.tdpbf16ps", T.Cast("int8", q),
                                                  T.Cast("int8", 4 + q // 2), T.Cast("int8", 6 + q % 2)))
            for q in T.unroll(4):
                T.evaluate(T.call_llvm_intrin("void", "llvm.x86.tilestored64", T.Cast("int8", q),
                                              T.address_of(C[q // 2 * 16, q % 2 * 16]), T.int64(sc * 4)))

    return desc, impl


@functools.cache
def amx_bf16_intrinsic(depth: int) -> str:
    """The name of the intrinsic for a 32 x 32 x ``depth`` block (``sch.tensorize(loop, name)``), registered
    with TVM on the first call (once a process for each depth, a multiple of :data:`STEP`)."""
    from tvm.s_tir import TensorIntrin

    if depth <= 0 or depth % STEP:
        raise ValueError(f"an AMX block's depth is a positive multiple of {STEP}, not {depth}")
    name = f"tunewise_amx_bf16_32x32x{depth}"
    TensorIntrin.register(name, *_functions(depth))
    return name


def register_intrinsics() -> None:
    """Register the intrinsic of every depth a search may tile with (multiples of :data:`STEP` up to
    :data:`MAX_DEPTH`), so that any record of an AMX product applies in this process, whatever searched it."""
    for depth in range(STEP, MAX_DEPTH + 1, STEP):
        amx_bf16_intrinsic(depth)

"""bfloat16 matrix products on Intel AMX tiles, as a TVM tensor intrinsic.

One call of an intrinsic :func:`amx_bf16_intrinsic` names computes a 32 x 32 float32 block ``C += A @ B``, both
operands bfloat16 in pairs along the depth ``k``: ``A2[m, k // 2, k % 2]`` (a row-major ``A`` reshaped) and
``B2[k // 2, n, k % 2]`` (AMX's layout). Plain indices let MetaSchedule's auto-tensorization map a task onto it.
The block stays in four accumulator tiles while ``depth`` is consumed 32 at a time, four ``TDPBF16PS`` a step.

The intrinsic reaches LLVM as AMX's own calls (``ldtilecfg``, ``tileloadd64``, ``tdpbf16ps``, ``tilestored64``),
whose operands are tile numbers and pointers. No bfloat16 value passes through TIR's arithmetic, so TVM's
bfloat16 legalisation (bfloat16 arithmetic to float32, storage to ``uint16``) leaves it intact. Each call
configures the eight tiles, loads its accumulators and stores them back: calls compose in any order, on any
thread, but not inside a vectorized loop.

Linux lets a process use AMX's tile data only after it asks (``arch_prctl(ARCH_REQ_XCOMP_PERM)``);
:func:`enable_amx` asks, once a process, and every process that runs such a kernel (a runner's too) calls it first.
"""

from __future__ import annotations

import ctypes
import functools

from tvm.script import tirx as T

from ..errors import TargetError

STEP = 32
"""The bfloat16 depth one ``TDPBF16PS`` consumes; an intrinsic's ``depth`` is a multiple of it."""

_SYS_ARCH_PRCTL = 158  # x86-64
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18


@functools.cache
def enable_amx() -> None:
    """Ask Linux for AMX's tile data in this process; :class:`TargetError` when it refuses (a CPU or kernel
    without AMX), so that a kernel using the intrinsic fails with a message, not with ``SIGILL``."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) != 0:
        raise TargetError("this CPU or Linux kernel does not grant AMX tile data "
                          f"(arch_prctl errno {ctypes.get_errno()}): bfloat16 on AMX needs a CPU with amx-bf16 "
                          "and Linux 5.16 or later")


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

"""``exp``, ``sigmoid``, ``tanh``, ``log`` and ``erf`` in plain TIR arithmetic, which LLVM vectorises.

LLVM lowers TIR's ``exp``, ``log``, ``tanh`` and ``erf`` (and ``sigmoid``, which TVM writes with ``exp``) to one
scalar libm call per element, even in a vectorised loop. :func:`vectorisable_transcendentals` rewrites every such
call of a PrimFunc, on float32 and float16 (computed in float32): ``exp`` and ``log`` by range reduction and a
polynomial (Cephes' ``expf``, ``logf``), ``erf`` by Eigen's rational function, ``sigmoid`` and ``tanh`` by one
rational function of tunewise's, as cheap as a copy from memory. ``exp``, ``sigmoid``, ``tanh`` and ``erf`` hold no
``Select``, so that MetaSchedule's ``AutoInline`` fuses them into the kernels producing their inputs.

Accuracy in float32 (``tests/lowering/test_transcendentals.py``): ``exp`` and ``log`` within 1 ulp at the true
value, ``erf`` 7, denormal results included; ``sigmoid`` within 2.5e-7 of the truth everywhere (4 ulps of 1),
``tanh`` 5e-7 (8 ulps of 1) and within 4 ulps for ``|x| < 0.5``. NaN stays NaN; ``exp`` overflows to inf and
underflows through the denormals to 0; ``sigmoid`` is exactly 0 and 1, ``tanh`` and ``erf`` exactly -1 and 1, beyond
±17.5, ±8.75 and ±4; ``tanh(-0) = -0``; ``log(0) = -inf``, ``log(inf) = inf``, ``log`` of a negative number is NaN.
"""

from __future__ import annotations

REWRITTEN = ("tirx.exp", "tirx.sigmoid", "tirx.tanh", "tirx.log", "tirx.erf")
_DTYPES = ("float32", "float16")

# Cephes expf: exp(r) = 1 + r + r^2 * P(r) on |r| <= ln(2)/2, after x = n ln2 + r with ln2 in two parts
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_LOG2E = 1.44269504088896341
# exp's argument clamped: above the first it is inf, below the second 0 (it rounds to 0 below -103.97)
_EXP_MAX, _EXP_MIN = 88.75, -104.0
# Cephes logf: log(1 + f) = f - f^2 / 2 + f^3 * P(f) on sqrt(1/2) - 1 <= f < sqrt(2) - 1
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
          -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
# sigmoid(x) - 1/2 = x P(x^2) / Q(x^2) on [-17.5, 17.5], fitted by tunewise (Lawson's weighted least squares,
# P(0) = 1/4, sigmoid's slope at 0), within 2.4e-9 in float64 of the target ``(sigmoid(x) - 1/2)(1 + 2^-21
# (x / 17.5)^8)``: above +-1/2 at the edges by 1e-7, so that the clamped result reaches exactly 0 and 1 there
_SIGMOID_P = (-5.576107227e-18, 1.348299083e-14, -2.023037120e-11, 4.403201359e-08, 4.867298048e-05,
              8.183700033e-03, 0.25)
_SIGMOID_Q = (4.003780305e-06, 1.533706905e-03, 1.160681248e-01, 1.0)
_SIGMOID_EDGE = 17.5
# Eigen's float erf (TOPI's fast_erf): x P(x^2) / Q(x^2) on [-4, 4], where erf rounds to +-1 outside
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
          -1.42647390514189e-02)
_ERF_EDGE = 4.0


def _f(value: float):
    import tvm

    return tvm.tirx.const(value, "float32")


def _i(value: int):
    import tvm

    return tvm.tirx.const(value, "int32")


def _bits(pattern: int):
    """The float32 whose bits are ``pattern`` (inf and NaN without a non-finite constant in the IR)."""
    import tvm

    return tvm.tirx.reinterpret("float32", _i(pattern))


def _clamp(x, low: float, high: float):
    """``x`` clamped to [low, high], NaN kept: TVM emits ``min(a, b)`` as ``a < b ? a : b``, which is ``b`` where
    either is NaN, so ``x`` goes second."""
    from tvm import tirx

    return tirx.max(_f(low), tirx.min(_f(high), x))


def _horner(coefficients, x):
    result = _f(coefficients[0])
    for c in coefficients[1:]:
        result = result * x + _f(c)
    return result


def _power_of_two(n):
    """2^n as a float32 for an int32 ``n`` in [-126, 127]."""
    from tvm import tirx

    return tirx.reinterpret("float32", tirx.shift_left(n + _i(127), _i(23)))


def exp(x):
    """``exp`` of a float32 expression."""
    from tvm import tirx

    clamped = _clamp(x, _EXP_MIN, _EXP_MAX)
    n = tirx.floor(clamped * _f(_LOG2E) + _f(0.5))
    r = clamped - n * _f(_LN2_HI) - n * _f(_LN2_LO)
    y = _horner(_EXP_P, r) * (r * r) + r + _f(1.0)
    k = n.astype("int32")
    half = tirx.shift_right(k, _i(1))
    # 2^k in two factors, each a normal float for k in [-150, 128]: one rounding into the denormals, inf above
    return y * _power_of_two(half) * _power_of_two(k - half)


def _half_tanh(x, scale: float, edge: float):
    """``sigmoid(scale x) - 1/2`` of a float32 expression, clamped to ``|x| <= edge``."""
    clamped = _clamp(x, -edge, edge) * _f(scale)
    z = clamped * clamped
    return clamped * _horner(_SIGMOID_P, z) / _horner(_SIGMOID_Q, z)


def sigmoid(x):
    """``1 / (1 + exp(-x))`` of a float32 expression."""
    return _clamp(_f(0.5) + _half_tanh(x, 1.0, _SIGMOID_EDGE), 0.0, 1.0)


def tanh(x):
    """``tanh`` of a float32 expression, as ``2 sigmoid(2x) - 1``."""
    return _clamp(_f(2.0) * _half_tanh(x, 2.0, _SIGMOID_EDGE / 2), -1.0, 1.0)


def log(x):
    """``log`` of a float32 expression."""
    from tvm import tirx

    denormal = x < _f(2.0 ** -126)
    scaled = tirx.Select(denormal, x * _f(2.0 ** 23), x)
    bits = tirx.reinterpret("int32", scaled)
    # scaled = m 2^e with m in [0.5, 1), then m in [sqrt(1/2), sqrt(2)) and f = m - 1
    e = tirx.shift_right(bits, _i(23)) - tirx.Select(denormal, _i(126 + 23), _i(126))
    m = tirx.reinterpret("float32", tirx.bitwise_or(tirx.bitwise_and(bits, _i(0x007FFFFF)), _i(0x3F000000)))
    below = m < _f(0.707106781186547524)
    f = tirx.Select(below, m + m, m) - _f(1.0)
    fe = (e - tirx.Select(below, _i(1), _i(0))).astype("float32")
    z = f * f
    y = f * z * _horner(_LOG_P, f) + fe * _f(_LN2_LO) - _f(0.5) * z
    result = f + y + fe * _f(_LN2_HI)
    infinity = _bits(0x7F800000)
    special = tirx.Select(x == _f(0.0), -infinity, tirx.Select(x == infinity, x, _bits(0x7FC00000)))
    return tirx.Select(tirx.all(x > _f(0.0), x < infinity), result, special)


def erf(x):
    """``erf`` of a float32 expression."""
    clamped = _clamp(x, -_ERF_EDGE, _ERF_EDGE)
    z = clamped * clamped
    # the ratio first: a denormal x is then rounded once, by its product with about 2 / sqrt(pi)
    return clamped * (_horner(_ERF_P, z) / _horner(_ERF_Q, z))


_FORMULAS = {"tirx.exp": exp, "tirx.sigmoid": sigmoid, "tirx.tanh": tanh, "tirx.log": log, "tirx.erf": erf}


def rewrite(call):
    """``call`` (a TIR call) in plain arithmetic where it calls one of :data:`REWRITTEN` on float32 or float16;
    any other call as it is."""
    import tvm

    dtype = str(call.ty)
    if not isinstance(call.op, tvm.ir.Op) or call.op.name not in _FORMULAS or dtype not in _DTYPES:
        return call
    x = call.args[0]
    if dtype == "float32":
        return _FORMULAS[call.op.name](x)
    return _FORMULAS[call.op.name](x.astype("float32")).astype(dtype)


def vectorisable_transcendentals():
    """A PrimFunc pass replacing each call of :data:`REWRITTEN` on float32 or float16 by :func:`rewrite`'s
    arithmetic; other functions and calls stay as they are."""
    import tvm
    import tvm_ffi

    def transform(func, _mod, _ctx):
        body = tvm_ffi.structural_map(func.body, (tvm.ir.expr.Call, rewrite))
        return func if body.same_as(func.body) else func.with_body(body)

    return tvm.tirx.transform.prim_func_pass(transform, opt_level=0, name="VectorisableTranscendentals")

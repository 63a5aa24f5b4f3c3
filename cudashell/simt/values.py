"""C arithmetic on lanes: numpy arrays (or uniform numpy scalars) of the C type's dtype, with the GPU's answers
where C leaves it open or numpy differs: truncating division, shifts clamped at the width (PTX's rule),
float-to-int conversion that saturates (cvt.rzi), and fused multiply-add rounded once."""

from __future__ import annotations

import numpy as np

from .ctype import Array, Pointer, Scalar, Struct

I64 = np.dtype(np.int64)


def dtype_of(t) -> np.dtype:
    if isinstance(t, Scalar):
        return np.dtype(np.uint8) if t.name == "bool" else t.dtype
    if isinstance(t, Pointer):
        return I64
    raise TypeError(t)


def convert(v, src, dst):
    """A value of C type src as C type dst."""
    if src == dst or isinstance(dst, (Struct, Array)) or isinstance(src, (Struct, Array)):
        return v
    if isinstance(dst, Pointer) or isinstance(src, Pointer):
        if isinstance(dst, Scalar) and dst.name == "bool":
            return np.asarray(v) != 0
        return np.asarray(v).astype(np.int64) if not isinstance(dst, Scalar) else np.asarray(v).astype(dst.dtype)
    if not isinstance(dst, Scalar):
        return v
    if dst.name == "bool":
        return np.asarray(v) != 0
    v = np.asarray(v)
    if dst.is_float or not src.is_float:
        return v.astype(dst.dtype, copy=False)
    return _float_to_int(v, dst.dtype)


def _float_to_int(v, dt: np.dtype):
    info = np.iinfo(dt)
    t = np.trunc(v.astype(np.float64))
    out = np.where(np.isnan(t), 0, t)
    lo_hit, hi_hit = out <= info.min, out >= float(info.max)
    safe = np.where(lo_hit | hi_hit, 0, out)
    r = safe.astype(np.int64).astype(dt) if dt.itemsize < 8 or dt.kind == "i" else _u64(safe)
    r = np.where(lo_hit, dt.type(info.min), r)
    r = np.where(hi_hit, dt.type(info.max), r)
    return r.astype(dt)


def _u64(x):
    big = x >= 2.0 ** 63
    return np.where(big, (x - 2.0 ** 63).astype(np.int64).astype(np.uint64) + np.uint64(1 << 63),
                    np.where(big, 0, x).astype(np.int64).astype(np.uint64))


def truthy(v):
    return np.asarray(v) != 0


def divide(a, b, t: Scalar):
    if t.is_float:
        return (np.asarray(a) / np.asarray(b)).astype(t.dtype, copy=False)
    a, b = np.asarray(a), np.asarray(b)
    zero = b == 0
    bb = np.where(zero, 1, b).astype(t.dtype, copy=False)
    if t.is_signed:
        if t.size < 8:
            q = np.trunc(a.astype(np.float64) / bb.astype(np.float64)).astype(np.int64)
            q = q.astype(t.dtype, copy=False)
        else:
            q = a // bb
            fix = (a % bb != 0) & ((a < 0) != (bb < 0))
            q = np.where(fix, q + 1, q).astype(t.dtype, copy=False)
        return np.where(zero, t.dtype.type(-1), q).astype(t.dtype, copy=False)
    return np.where(zero, np.iinfo(t.dtype).max, a // bb).astype(t.dtype, copy=False)


def remainder(a, b, t: Scalar):
    if t.is_float:
        return np.fmod(a, b).astype(t.dtype, copy=False)
    a, b = np.asarray(a), np.asarray(b)
    q = divide(a, b, t)
    r = (a - q * np.where(b == 0, 0, b)).astype(t.dtype, copy=False)
    return np.where(b == 0, a, r).astype(t.dtype, copy=False)


def shift(a, b, t: Scalar, left: bool):
    a = np.asarray(a)
    b = np.asarray(b).astype(np.int64)
    width = t.size * 8
    over = (b >= width) | (b < 0)
    bb = np.where(over, 0, b).astype(t.dtype, copy=False)
    if left:
        r = np.left_shift(a, bb)
        return np.where(over, t.dtype.type(0), r).astype(t.dtype, copy=False)
    r = np.right_shift(a, bb)
    fill = np.where(a < 0, t.dtype.type(-1), t.dtype.type(0)) if t.is_signed else t.dtype.type(0)
    return np.where(over, fill, r).astype(t.dtype, copy=False)


def fma(a, b, c, dt: np.dtype):
    """a·b + c rounded once, as the GPU's fma.rn."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if dt == np.float32:
        p = np.multiply(a, b, dtype=np.float64)  # exact: 24 + 24 bits
        s = np.add(p, c, dtype=np.float64)
        r = np.asarray(s.astype(np.float32))
        # double rounding: s exactly halfway between two floats, but the exact sum is not (rare: fixed where it is)
        half = np.flatnonzero((s.view(np.int64) & ((1 << 29) - 1)) == (1 << 28))
        if len(half):
            pp, cc, ss = (np.broadcast_to(x, s.shape).reshape(-1)[half] for x in (p, c.astype(np.float64), s))
            bp = ss - cc  # TwoSum: e is what the double sum lost
            e = (pp - bp) + (cc - (ss - bp))
            inexact = e != 0
            nudged = np.nextafter(ss, np.where(e > 0, np.inf, -np.inf)).astype(np.float32)
            r = r.reshape(-1).copy() if r.ndim else r.reshape(1).copy()
            r[half[inexact]] = nudged[inexact]
            r = r.reshape(s.shape)
        return r if r.ndim else r[()]
    # double: Dekker's exact product, then two sums (correct except in rare double-rounding cases)
    p = a * b
    split = 134217729.0
    def halves(x):
        t = split * x
        hi = t - (t - x)
        return hi, x - hi
    ah, al = halves(a)
    bh, bl = halves(b)
    err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    bp = s - c
    e2 = (p - bp) + (c - (s - bp))
    return (s + (e2 + err)).astype(np.float64)

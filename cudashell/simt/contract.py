"""Floating-point contraction as nvcc does it (-fmad=true): its LLVM back end (NVPTX) fuses aggressively, so a
float expression is rewritten, operands first, with the DAG combiner's rules before it is computed —
`a*b + c` → fma(a, b, c) (the left product first when both are), `c - a*b` → fma(-a, b, c), `a*b - c` →
fma(a, b, -c), and, through an fma whose addend is still a product, `fma(x, y, u*v) + z` → fma(x, y, fma(u, v, z))
and `fma(x, y, u*v) - z` → fma(x, y, fma(u, v, -z)). The interpreter builds the expression as nodes whose leaves
are already computed (interp.Machine._node), inlined device functions' bodies included, as nvcc inlines them.

A node is a tuple: ("leaf", value), ("mul", a, b), ("add", a, b), ("sub", a, b), ("neg", a), ("fma", a, b, c)."""

from __future__ import annotations

import numpy as np

from .values import fma


def leaf(value) -> tuple:
    return ("leaf", value)


def neg(x: tuple) -> tuple:
    if x[0] == "leaf":
        return ("leaf", np.negative(x[1]))
    if x[0] == "neg":
        return x[1]
    return ("neg", x)


def _fma_of_product(x: tuple) -> bool:
    return x[0] == "fma" and x[3][0] == "mul"


def add(a: tuple, b: tuple) -> tuple:
    """a + b, contracted."""
    if a[0] == "neg":  # (-A) + B is B - A
        return sub(b, a[1])
    if b[0] == "neg":
        return sub(a, b[1])
    if a[0] == "mul":
        return ("fma", a[1], a[2], b)
    if b[0] == "mul":
        return ("fma", b[1], b[2], a)
    if _fma_of_product(a):
        u, v = a[3][1], a[3][2]
        return ("fma", a[1], a[2], ("fma", u, v, b))
    if _fma_of_product(b):
        u, v = b[3][1], b[3][2]
        return ("fma", b[1], b[2], ("fma", u, v, a))
    return ("add", a, b)


def sub(a: tuple, b: tuple) -> tuple:
    """a - b, contracted."""
    if b[0] == "neg":  # A - (-B) is A + B
        return add(a, b[1])
    if a[0] == "mul":
        return ("fma", a[1], a[2], neg(b))
    if b[0] == "mul":
        return ("fma", neg(b[1]), b[2], a)
    if a[0] == "neg" and a[1][0] == "mul":
        return ("fma", neg(a[1][1]), a[1][2], neg(b))
    if _fma_of_product(a):
        u, v = a[3][1], a[3][2]
        return ("fma", a[1], a[2], ("fma", u, v, neg(b)))
    if _fma_of_product(b):
        u, v = b[3][1], b[3][2]
        return ("fma", neg(b[1]), b[2], ("fma", neg(u), v, a))
    return ("sub", a, b)


def value(x: tuple, dt: np.dtype):
    """The node computed in `dt`: each operation rounded once, an fma once for its product and sum."""
    kind = x[0]
    if kind == "leaf":
        return x[1]
    if kind == "fma":
        return fma(value(x[1], dt), value(x[2], dt), value(x[3], dt), dt)
    if kind == "neg":
        return np.negative(value(x[1], dt))
    a, b = value(x[1], dt), value(x[2], dt)
    r = np.multiply(a, b) if kind == "mul" else np.add(a, b) if kind == "add" else np.subtract(a, b)
    return r.astype(dt) if isinstance(r, np.ndarray) else dt.type(r)

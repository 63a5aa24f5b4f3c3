"""Floating-point contraction as nvcc does it (-fmad=true), operands first: `a*b + c` → fma(a, b, c) (the left
product first when both are), `c - a*b` → fma(-a, b, c), `a*b - c` → fma(a, b, -c); a sum whose operands are
already fmas is not fused again (measured on the H100, nvcc 13 -O3 sm_90, 65,536 random inputs each: every
rounding of `a*b + c*d + e`, `norm2(a) - norm2(b)`, `a*b + c*d - e*f`, a complex multiply-add through inlined
struct operators, enumerated over all evaluation trees, and only these rules matched every element). What crosses
a call is the inlining: nvcc inlines device functions, so `sq(x) + y` with `sq` returning `x*x` is one fma. The
interpreter builds the expression as nodes whose leaves are already computed (interp.Machine._node), inlined
device functions' bodies included.

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

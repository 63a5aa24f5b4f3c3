"""Kernels: the built-ins (one CUDA C source for the GPU, the same arithmetic in numpy for the simulator),
what a kernel is to the shell, and the source edits nvcc needs for user kernels. (Their parameters are read by
the front end, simt/signatures.py, for both backends.) Pure: no CUDA here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import ShellError
from .inputs import read_capped


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "in", "out", "inout" (a buffer) or "scalar"
    dtype: str = "float32"
    unit: str = ""  # "us": microseconds, which the launch turns into the GPU's clock ticks (spin)

    @property
    def is_buffer(self) -> bool:
        return self.kind != "scalar"

    @property
    def writes(self) -> bool:
        return self.kind in ("out", "inout")


@dataclass(frozen=True)
class Kernel:
    name: str
    params: tuple[Param, ...]
    summary: str = ""
    builtin: bool = True
    sim: Callable | None = field(default=None, compare=False)  # (arrays, scalars) -> {name: new array}
    symbol: str = ""  # the function's name in the compiled module
    handle: object = field(default=None, compare=False)  # the backend's function, for user kernels
    source: str = field(default="", compare=False, repr=False)  # user kernels: their CUDA C, for `reset`
    path: str = field(default="", compare=False, repr=False)  # the file it came from: #include looks beside it
    counted: bool = True  # a built-in whose last parameter is the element count n (the launch passes it)
    block: int = 256  # a launch's block when none is given
    runs_for: Callable | None = field(default=None, compare=False)  # (arguments) -> seconds: the simulator's time
    module: str = ""  # user kernels: the module (one load) it came from, whose variables its launches reach

    def signature(self) -> str:
        return f"{self.name}({', '.join(p.name if p.is_buffer else f'{p.name}:{p.dtype}' for p in self.params)})"


@dataclass(frozen=True)
class ModuleSymbol:
    """A loaded module's `__constant__`, `__device__` or `__managed__` variable: memory the module owns (made when
    it is loaded, as long-lived as it), which the shell shows as a buffer named `MODULE.NAME`."""

    name: str  # as in the source
    space: str  # constant | global | managed
    size: int  # bytes (cudaGetSymbolSize)
    address: int  # the device address (cudaGetSymbolAddress / cuModuleGetGlobal)
    dtype: str = "uint8"  # numpy dtype of its element, for `show` (uint8 for a struct)
    handle: object = field(default=None, compare=False)  # the backend's allocation


BUILTIN_SOURCE = r"""
/* a thread's number across all three dimensions, x first: a 2-D or 3-D launch computes every element once */
#define GID ((((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) \
             * (blockDim.x * blockDim.y * blockDim.z) + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x)
#define NTHREADS ((long long)blockDim.x * blockDim.y * blockDim.z * gridDim.x * gridDim.y * gridDim.z)
extern "C" {
__global__ void k_sum(const float *A, const float *B, float *C, int n)
{ long long i = GID; if (i < n) C[i] = A[i] + B[i]; }

__global__ void k_copy(const float *X, float *Y, int n)
{ long long i = GID; if (i < n) Y[i] = X[i]; }

__global__ void k_fill(float *A, float value, int n)
{ long long i = GID; if (i < n) A[i] = value; }

__global__ void k_scale(float *A, float factor, int n)
{ long long i = GID; if (i < n) A[i] *= factor; }

__global__ void k_saxpy(float a, const float *X, float *Y, int n)
{ long long i = GID; if (i < n) Y[i] = a * X[i] + Y[i]; }

__global__ void k_increment(float *A, int n)
{ long long i = GID; if (i < n) A[i] += 1.0f; }

__global__ void k_touch(float *A, int n)
{   /* reads every element; the impossible test keeps the reads from being optimised away */
    float acc = 0.0f;
    for (long long i = GID; i < n; i += NTHREADS) acc += A[i];
    if (acc == -1.2345e-38f) A[0] = acc;
}

__global__ void k_spin(long long cycles)
{ long long start = clock64(); while (clock64() - start < cycles) { } }
}
"""


def _b(name, kind):
    return Param(name, kind)



def _filled(like, value):
    """numpy's full_like (the simulator's arrays are float32, as the kernels' parameters are), without importing numpy
    into the GPU worker, which reads this table."""
    out = like.copy()
    out.fill(value)
    return out


BUILTINS = {k.name: k for k in (
    Kernel("sum", (_b("A", "in"), _b("B", "in"), _b("C", "out")), "C[i] = A[i] + B[i] (the seeds' sumArraysGPU)",
           sim=lambda a, s: {"C": a["A"] + a["B"]}, symbol="k_sum"),
    Kernel("copy", (_b("X", "in"), _b("Y", "out")), "Y[i] = X[i]: a copy done by the GPU's threads (zero-copy)",
           sim=lambda a, s: {"Y": a["X"].copy()}, symbol="k_copy"),
    Kernel("fill", (_b("A", "out"), Param("value", "scalar")), "A[i] = value",
           sim=lambda a, s: {"A": _filled(a["A"], s["value"])}, symbol="k_fill"),
    Kernel("scale", (_b("A", "inout"), Param("factor", "scalar")), "A[i] *= factor",
           sim=lambda a, s: {"A": a["A"] * a["A"].dtype.type(s["factor"])}, symbol="k_scale"),
    Kernel("saxpy", (Param("a", "scalar"), _b("X", "in"), _b("Y", "inout")), "Y[i] = a·X[i] + Y[i]",
           sim=lambda a, s: {"Y": a["X"].dtype.type(s["a"]) * a["X"] + a["Y"]}, symbol="k_saxpy"),
    Kernel("increment", (_b("A", "inout"),), "A[i] += 1",
           sim=lambda a, s: {"A": a["A"] + a["A"].dtype.type(1)}, symbol="k_increment"),
    Kernel("touch", (_b("A", "in"),), "reads every element: how fast a kernel reads this memory",
           sim=lambda a, s: {}, symbol="k_touch"),
    Kernel("spin", (Param("us", "scalar", "int64", unit="us"),), "busy-waits US microseconds (to make overlap visible)",
           sim=lambda a, s: {}, symbol="k_spin", counted=False, block=1, runs_for=lambda named: int(named["us"]) * 1e-6),
)}

# ------------------------------------------------------------------ user kernels

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def with_includes(source: str, path: str | None, seen: frozenset = frozenset()) -> str:
    """The source with the files it #includes from beside it written in (once each), so that c_linkage gives the
    kernels a wrapper `.cu` pulls in from a `.cuh` C linkage too, and an export is one source. A file that is not
    there stays an #include."""
    if not path:
        return source
    folder = Path(path).resolve().parent

    def inline(m):
        target = (folder / m.group(1)).resolve()
        if target in seen or not target.is_file():
            return m.group(0)
        try:
            text = read_capped(target, "source").decode("utf-8")
        except (OSError, UnicodeDecodeError, ShellError):  # the compiler, reading it, says what is wrong
            return m.group(0)
        return with_includes(text, str(target), seen | {target})
    return _INCLUDE.sub(inline, source)


_TEMPLATE_BEFORE = re.compile(r"template\s*<[^;{}]*>\s*$")  # what precedes a template's head (not `#include <…>`)
_BOUNDS = r"(?:__launch_bounds__\s*\([^()]*\)\s*)?"  # it may stand before, after __global__ or after void
_KERNEL_HEAD = re.compile(rf'(?<![\w>"])(\s*)({_BOUNDS}__global__\s+{_BOUNDS}void\s+{_BOUNDS}\w+\s*\()')


def c_linkage(source: str) -> str:
    """The source with each plain __global__ function given C linkage, so the shell finds it by its own name;
    a template (`template <…> __global__ …`) or a kernel already in `extern "C"` keeps its own. (Wrapping the
    whole source in extern "C", as pycuda does, breaks templates: nvcc refuses C linkage for them.)"""
    out, pos = [], 0
    extern_blocks = [(m.end(), _block_end(source, m.end())) for m in re.finditer(r'extern\s+"C"\s*\{', source)]
    for m in _KERNEL_HEAD.finditer(source):
        start = m.start(2)
        before = source[:start].rstrip()
        if before.endswith('"C"') or _TEMPLATE_BEFORE.search(source[:start]) or \
                any(a <= start < b for a, b in extern_blocks):
            continue
        out.append(source[pos:start] + 'extern "C" ')
        pos = start
    return "".join(out) + source[pos:]


def _block_end(source: str, start: int) -> int:
    depth = 1
    for i in range(start, len(source)):
        if source[i] == "{":
            depth += 1
        elif source[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(source)


_SUFFIX = {"f": "float32", "d": "float64", "i": "int32", "u": "uint32", "l": "int64", "ul": "uint64"}
_NUMBER = re.compile(r"([-+]?(?:\d[\d_]*\.?\d*|\.\d+)(?:e[-+]?\d+)?)(ul|f|d|i|u|l)?", re.I | re.ASCII)


_INTEGER = re.compile(r"[-+]?(0x[0-9a-f]+|[1-9][0-9]*|0)", re.I)


def _a(dtype: str) -> str:
    """The type with its article: `an int32`, `a uint8` (you-int), `a float32`."""
    return ("an " if dtype[0] in "aeio" else "a ") + dtype


def scalar(text: str, dtype: str, col: int | None = None):
    """A scalar argument: `2.5`, `3`, `0xff`, or with a suffix that names its type (`2.5f`, `7i`, `9ul`). Integers
    are read exactly (a 64-bit value past 2^53 keeps every bit)."""
    import numpy as np  # here: the GPU worker imports this module and starts without numpy

    dt = np.dtype(dtype)
    if dt.kind in "iu" and _INTEGER.fullmatch(text):
        value = int(text, 0)
        info = np.iinfo(dt)
        if not info.min <= value <= info.max:
            raise ShellError("USAGE", f"{text} is not {_a(dtype)} ({info.min}..{info.max})", None, col)
        return dt.type(value)
    m = _NUMBER.fullmatch(text)
    if not m:
        raise ShellError("USAGE", f"expected a number for {_a(dtype)} parameter, got '{text}'", None, col)
    number, suffix = m.group(1), (m.group(2) or "").lower()
    if suffix and _SUFFIX[suffix] != dtype:
        raise ShellError("USAGE", f"'{text}' is {_SUFFIX[suffix]} but the parameter is {dtype}", None, col)
    try:
        value = float(number)
    except ValueError:  # `1__0`: the pattern lets runs of _ through, Python does not
        raise ShellError("USAGE", f"expected a number for {_a(dtype)} parameter, got '{text}'", None, col) from None
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if not value.is_integer() or not info.min <= value <= info.max:
            raise ShellError("USAGE", f"{text} is not {_a(dtype)} ({info.min}..{info.max})", None, col)
        return dt.type(int(value))
    return dt.type(value)

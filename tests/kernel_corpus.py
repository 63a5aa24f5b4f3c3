"""The kernel corpus of issue 21: course kernels this project wrote (tests/kernels/*.cu), each with the buffers
it runs on, its launch in the shell's syntax and what it must produce — the output bytes from a numpy reference,
the error the next `sync` reports, the lines it prints, or (for code outside the simulator's subset) the refusal
at `kernel load`. Code nobody here wrote is read where it lives, at test time: tests/public_kernels.py.

Inputs are what the shell's `fill` writes (a value, `iota`, or `random` with a seed — SplitMix64, written
out again here so the reference does not lean on the shell; the runner checks that the bytes agree), so
every case can be set up with shell commands alone. A module's `__constant__` and `__device__` variables are
buffers too (`MOD.VAR`, kinds "symbol" and "as-loaded"): written with `memcpy h2d` before the launch and read
with `memcpy d2h` after it, as cudaMemcpyToSymbol / cudaMemcpyFromSymbol do. Float references repeat the
kernel's operations in float32 in the kernel's order; where nvcc contracts `a*b + c` into a fused multiply-add,
the reference rounds once (`fma32`, `fma64`). Pure numpy: no backend is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable

import numpy as np

KERNELS = Path(__file__).parent / "kernels"

# where each kind of buffer comes from: `alloc …` (and `register …` for pageable memory)
KINDS = {
    "device": "device memory (cudaMalloc)",
    "managed": "managed memory (cudaMallocManaged)",
    "pinned": "pinned host memory (cudaHostAlloc)",
    "mapped": "pinned host memory, mapped (cudaHostAlloc … cudaHostAllocMapped): zero-copy",
    "registered": "pageable host memory registered mapped (cudaHostRegister): zero-copy",
    "readonly": "pageable host memory registered read-only (cudaHostRegisterReadOnly)",
    "symbol": "a __constant__ or __device__ variable of the case's module, `MOD.VAR`, written before the launch "
              "(cudaMemcpyToSymbol)",
    "as-loaded": "a __device__ variable of the case's module as its initialiser left it, checked before the launch",
}
SYMBOL_KINDS = frozenset({"symbol", "as-loaded"})  # no `alloc`: `kernel load … as MOD` makes them
HOST_KINDS = frozenset(KINDS) - {"device"} - SYMBOL_KINDS  # the host reads and writes these itself (`fill`, `show`)
RESERVED = frozenset({"n", "grid", "block", "shared", "stream", "unchecked", "as", "on", "all"})  # launch's words

INT_MIN, INT_MAX, UINT_MAX, ULL_MAX = -(1 << 31), (1 << 31) - 1, (1 << 32) - 1, (1 << 64) - 1


# ------------------------------------------------------------------ inputs
@dataclass(frozen=True)
class Fill:
    """What the shell's `fill` writes: a number, "iota" (0, 1, 2, …) or "random" (with `seed`), as `dtype`
    (the buffer's unless given), over `count` elements of that dtype (the whole buffer unless given: a
    buffer may be made of several Fills, one after the other)."""

    value: int | float | str = 0
    seed: int = 0
    dtype: str | None = None
    count: int | None = None

    def words(self, dtype: str) -> str:
        """The arguments of `fill NAME …` for this fill."""
        dt = self.dtype or dtype
        return f"{self.value} dtype {dt}" + (f" seed {self.seed}" if self.value == "random" else "")

    def values(self, dtype: str, count: int) -> np.ndarray:
        dt = np.dtype(self.dtype or dtype)
        if self.value == "iota":
            return np.arange(count).astype(dt)
        if self.value == "random":
            return random_values(self.seed, count, dt)
        return np.full(count, self.value, dt)


def rand(seed: int, count: int | None = None, dtype: str | None = None) -> Fill:
    return Fill("random", seed, dtype, count)


def const(value, count: int | None = None, dtype: str | None = None) -> Fill:
    return Fill(value, 0, dtype, count)


IOTA = Fill("iota")


def random_values(seed: int, count: int, dtype: np.dtype) -> np.ndarray:
    """`fill … random seed S`: the words z_k, SplitMix64 of seed + (k+1)·golden; a float takes one word's top 53
    bits as [0, 1), an integer dtype the little-endian bytes of the words in order (a uint8 takes 8 a word)."""
    dt = np.dtype(dtype)
    floats = dt.kind == "f"
    words = count if floats else -(-count * dt.itemsize // 8)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(words, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    if floats:
        return ((z >> np.uint64(11)).astype(np.float64) * 2.0**-53).astype(dt)
    return z.astype("<u8").view(np.uint8)[:count * dt.itemsize].view(dt)


@dataclass(frozen=True)
class Buf:
    """A buffer of `count` elements of `dtype`, of one of KINDS, holding `init` when the kernel starts;
    `output` buffers are read back and compared after the sync. A symbol's `name` is the variable's."""

    name: str
    kind: str
    dtype: str
    count: int
    init: Fill | tuple[Fill, ...] = Fill()
    output: bool = False

    @property
    def nbytes(self) -> int:
        return self.count * np.dtype(self.dtype).itemsize

    @property
    def parts(self) -> tuple[Fill, ...]:
        return self.init if isinstance(self.init, tuple) else (self.init,)

    def layout(self) -> list[tuple[int, int, Fill]]:
        """(byte offset, element count, fill) of each part."""
        out, offset = [], 0
        for f in self.parts:
            size = np.dtype(f.dtype or self.dtype).itemsize
            count = f.count if f.count is not None else (self.nbytes - offset) // size
            out.append((offset, count, f))
            offset += count * size
        return out

    def initial(self) -> np.ndarray:
        """The bytes the kernel finds, as `dtype`."""
        raw = b"".join(f.values(self.dtype, count).tobytes() for _, count, f in self.layout())
        return np.frombuffer(raw, self.dtype).copy()


# ------------------------------------------------------------------ cases
@dataclass(frozen=True)
class Case:
    """One run of one kernel. `args` is what follows the kernel's name in `launch` (buffer names, scalars
    as the shell takes them: `2.5f`, `7i`, `9ul`, `3u`); `grid`/`block` are ints or tuples (2-D, 3-D).
    Exactly one of `reference` (numpy: initial contents by name → expected contents of each output),
    `error` (the code the next `sync` reports), `printf` (the lines printed, in any order) or `refused`
    (the simulator refuses the load; its message names one of these words) says what must happen."""

    name: str
    summary: str
    kernel: str = ""
    args: str = ""
    grid: int | tuple[int, ...] = 1
    block: int | tuple[int, ...] = 1
    buffers: tuple[Buf, ...] = ()
    file: Path | None = None  # a .cu for `kernel load` (`as module`, where its names would clash) …
    source: str | None = None  # … or CUDA C for `kernel define KERNEL <<< … >>>`
    shared: int = 0
    reference: Callable[[dict], dict] | None = None
    error: str | None = None
    printf: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    ulps: dict = field(default_factory=dict)  # output → ulps allowed against numpy (not between GPU and simulator)
    unordered: dict = field(default_factory=dict)  # output → elements set by racing atomics: not compared …
    check: Callable[[dict], None] | None = None  # … but checked here (outputs by name, as their dtypes)
    intact: tuple[str, ...] = ()  # after the error and `reset`, these buffers still hold their initial bytes
    module: str | None = None  # `kernel load FILE as module`: the kernel is launched as module.kernel, and its
    # variables are the buffers module.VAR
    gpu_also: tuple[str, ...] = ()  # other codes a GPU may give for `error`, by where the address lands
    launched_before: tuple[str, ...] = ()  # `launch …` lines of the same module that run first (a list to walk)

    @property
    def launch_name(self) -> str:
        return f"{self.module}.{self.kernel}" if self.module else self.kernel

    def shell_name(self, buf: Buf) -> str:
        """What the shell calls `buf`: a symbol is `MOD.VAR`."""
        return f"{self.module}.{buf.name}" if buf.kind in SYMBOL_KINDS else buf.name

    @property
    def outputs(self) -> tuple[Buf, ...]:
        return tuple(b for b in self.buffers if b.output)

    def buf(self, name: str) -> Buf:
        return next(b for b in self.buffers if b.name == name)

    def inputs(self) -> dict[str, np.ndarray]:
        return {b.name: b.initial() for b in self.buffers}

    def expected(self) -> dict[str, np.ndarray]:
        """The reference's outputs, each as its buffer's dtype and size."""
        got = self.reference(self.inputs())
        out = {}
        for b in self.outputs:
            arr = np.asarray(got[b.name])
            if arr.dtype.names is None and arr.dtype != np.dtype(b.dtype):
                arr = arr.astype(b.dtype)
            out[b.name] = np.frombuffer(arr.tobytes(), b.dtype)
        return out


# ------------------------------------------------------------------ arithmetic as the GPU rounds it
def fma32(a, b, c) -> np.ndarray:
    """fmaf(a, b, c) rounded once to float32. a*b is exact in float64; TwoSum gives p + c as s + e exactly;
    rounding s to float32 is right unless s sits exactly halfway between two floats while e says which side
    the exact value is on (the double-rounding case)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float32).astype(np.float64) for v in (a, b, c)))
    p = a * b
    s = p + c
    bb = s - p
    e = (p - (s - bb)) + (c - bb)
    r = s.astype(np.float32)
    r64 = r.astype(np.float64)
    other = np.nextafter(r, np.where(s >= r64, np.float32(np.inf), np.float32(-np.inf))).astype(np.float32)
    o64 = other.astype(np.float64)
    tie = (s == (r64 + o64) / 2) & (e != 0)
    beyond = np.sign(e) == np.sign(o64 - r64)
    return np.where(tie & beyond, other, r).astype(np.float32)


def fma64(a, b, c) -> np.ndarray:
    """fma(a, b, c) in double, exactly: the exact rational rounded once (Python's int division rounds right)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    out = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a.ravel(), b.ravel(), c.ravel())]
    return np.array(out, np.float64).reshape(a.shape)


def tree_sum(x: np.ndarray) -> np.ndarray:
    """Sum the last axis by halving (x[:h] + x[h:] until one is left), as a shared-memory tree or a shuffle
    butterfly adds; the length is a power of two."""
    while x.shape[-1] > 1:
        h = x.shape[-1] // 2
        x = x[..., :h] + x[..., h:]
    return x[..., 0]


def c_div(a, b):
    """C's / on ints: truncates toward zero."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def c_rem(a, b):
    """C's %: the sign of the dividend."""
    return np.asarray(a, np.int64) - c_div(a, b) * np.asarray(b, np.int64)


def wrap(values, dtype: str) -> np.ndarray:
    """Python or int64 values kept to their low bits, as C's conversion to an unsigned (or two's-complement)
    type does."""
    bits = np.dtype(dtype).itemsize * 8
    flat = values.ravel().tolist() if isinstance(values, np.ndarray) else list(values)  # never through float64
    return np.array([int(v) % (1 << bits) for v in flat], np.uint64 if bits == 64 else np.int64) \
        .astype(np.dtype(dtype).str.replace("i", "u")).view(dtype)


def wrapping_sum(values, dtype: str):
    return wrap([sum(int(v) for v in np.ravel(values))], dtype)[0]


def reduce_bits(op, values, start: int) -> int:
    acc = start
    for v in np.ravel(values):
        acc = op(acc, int(v))
    return acc


def atomic_inc(times: int, limit: int, start: int = 0) -> int:
    """atomicInc applied `times` times: ((old >= limit) ? 0 : old + 1) — the same whatever the order."""
    v = start
    for _ in range(times):
        v = 0 if v >= limit else v + 1
    return v


def atomic_dec(times: int, limit: int, start: int = 0) -> int:
    """atomicDec applied `times` times: ((old == 0) | (old > limit)) ? limit : old - 1."""
    v = start
    for _ in range(times):
        v = limit if v == 0 or v > limit else v - 1
    return v


def f32(x) -> np.float32:
    return np.float32(x)


# ------------------------------------------------------------------ references, one per case
def ref_reduce_shared(d):
    x = np.concatenate([d["xs"], np.zeros(8 * 512 - 4000, np.float32)]).reshape(8, 2, 256)
    return {"partial": tree_sum(x[:, 0] + x[:, 1])}


def ref_reduce_dynamic(d):
    x = d["vals"]
    sums = [wrapping_sum(x[b * 128:(b + 1) * 128], "uint32") for b in range(6)]
    maxes = [x[b * 128:(b + 1) * 128].max() for b in range(6)]
    return {"bsum": np.array(sums, np.uint32), "bmax": np.array(maxes, np.int32)}


def ref_stencil_1d(d):
    p = np.pad(d["sin"].astype(np.int64), 3)
    return {"sout": sum(p[k:k + 1000] for k in range(7))}


def ref_stencil_2d(d):
    g = d["gin"].reshape(30, 50)
    out = g.copy()
    c, up, down, left, right = g[1:-1, 1:-1], g[:-2, 1:-1], g[2:, 1:-1], g[1:-1, :-2], g[1:-1, 2:]
    out[1:-1, 1:-1] = f32(0.2) * ((((c + up) + down) + left) + right)
    return {"gout": out}


def ref_matmul(d):
    a, b = d["ma"].reshape(40, 56), d["mb"].reshape(56, 36)
    acc = np.zeros((40, 36), np.float32)
    for k in range(56):
        acc = fma32(a[:, k, None], b[None, k, :], acc)
    return {"mc": acc}


def ref_cg_reduce(d):
    """Each thread's grid-stride sum in order, then per warp a butterfly (tree_sum's order), then warp 0's."""
    x = np.concatenate([d["cgx"], np.zeros(4 * 6 * 256 - 5000, np.float32)]).reshape(4, 6 * 256)
    per_thread = x[0]
    for row in x[1:]:
        per_thread = per_thread + row
    warps = tree_sum(per_thread.reshape(6, 8, 32))
    return {"cgpart": tree_sum(np.concatenate([warps, np.zeros((6, 24), np.float32)], axis=1))}


def hillis_steele(x: np.ndarray) -> np.ndarray:
    """An inclusive sum along the last axis as cg's scans make it: at step i, element r ≥ i adds element r − i."""
    i = 1
    while i < x.shape[-1]:
        x = np.concatenate([x[..., :i], x[..., i:] + x[..., :-i]], axis=-1)
        i <<= 1
    return x


def ref_cg_scans(d):
    u = np.concatenate([d["cgu"], np.zeros(24, np.uint32)]).reshape(-1, 16)
    incl = hillis_steele(u).reshape(-1)[:1000]
    f = np.concatenate([d["cgf"], np.zeros(24, np.float32)]).reshape(-1, 16)
    return {"cgincl": incl, "cgexcl": incl - d["cgu"], "cgfincl": hillis_steele(f).reshape(-1)[:1000]}


def ref_warp_xor(d):
    x = d["wf"].reshape(-1, 32)
    return {"wtotal": np.repeat(tree_sum(x), 32), "wfirst": np.repeat(x[:, 0], 32)}


def ref_warp_scan(d):
    x = d["su"].astype(np.uint64).reshape(-1, 32)
    scan = (np.cumsum(x, axis=1) & np.uint64(UINT_MAX)).astype(np.uint32)
    return {"sout": scan, "stot": scan[:, -1]}


def ref_blelloch(d):
    incl = np.cumsum(d["bin"].astype(np.uint64)) & np.uint64(UINT_MAX)
    return {"bout": np.concatenate([[0], incl[:-1]]).astype(np.uint32)}


def ref_collatz(d):
    steps, peaks = [], []
    for s in d["starts"]:
        x = int(s) + 1
        top, k = x, 0
        while x != 1:
            x = 3 * x + 1 if x & 1 else x // 2
            top, k = max(top, x), k + 1
        steps.append(k)
        peaks.append(top)
    return {"steps": np.array(steps, np.uint32), "peaks": np.array(peaks, np.uint64)}


PARTICLE = np.dtype([("x", "<f4"), ("y", "<f4"), ("vx", "<f4"), ("vy", "<f4"), ("bounces", "<i4")])


def ref_particles(d, n=200, dt=f32(0.1), steps=12):
    p = d["particles"].view(PARTICLE).copy()
    x, y, vx, vy = (p[k].copy() for k in ("x", "y", "vx", "vy"))
    bounces = np.zeros(n, np.int32)

    def reflect(pos, vel):
        low, high = pos < 0, pos > 1
        pos = np.where(low, f32(0) - pos, np.where(high, f32(2) - pos, pos)).astype(np.float32)
        vel = np.where(low | high, -vel, vel).astype(np.float32)
        return pos, vel, (low | high).astype(np.int32)

    for s in range(steps):
        drag = f32(0.75) if s % 4 == 3 else f32(1.0)
        x, y = fma32(vx, dt, x), fma32(vy, dt, y)
        x, vx, bx = reflect(x, vx)
        y, vy, by = reflect(y, vy)
        bounces = bounces + bx + by
        x = np.fmin(np.fmax(x, f32(0)), f32(1))
        y = np.fmin(np.fmax(y, f32(0)), f32(1))
        vx, vy = vx * drag, vy * drag
    p["x"], p["y"], p["vx"], p["vy"], p["bounces"] = x, y, vx, vy, bounces
    return {"particles": p}


def ref_brighten(d):
    v = ((d["img"].astype(np.int64) * 300) >> 8) - 20
    return {"imgout": np.clip(v, 0, 255)}


def ref_gray(d):
    rgb = d["rgb"].astype(np.int64).reshape(-1, 3)
    g = (77 * rgb[:, 0] + 150 * rgb[:, 1] + 29 * rgb[:, 2] + 128) >> 8
    return {"gray": np.where(g > 200, 255 - g, g)}


def ref_int_corners(d):
    x = d["ia"].astype(np.int64)
    y = d["ib"].astype(np.int64) | 1
    y = np.where(y == -1, -3, y)
    xu, yu = x & UINT_MAX, y & UINT_MAX
    cols = [
        c_div(x, y),
        c_rem(x, y),
        x >> 5,
        xu >> 5,
        (xu * 2654435761) & UINT_MAX,
        (xu + yu) & UINT_MAX,
        (xu < yu).astype(np.int64),
        x.astype(np.int8),
        x.astype(np.uint16),
        (x * y) >> 32,
        np.trunc(x.astype(np.float32) * f32(0.5)).astype(np.int64),
        np.abs(y) % 10,
        np.minimum(x, y),
        np.maximum(xu, yu),
        xu % 7,
        np.where((x & 0xFF) - (y & 0xFF) < 0, -1, (x ^ y) >> 28),
    ]
    return {"icorners": wrap(np.stack([np.asarray(c, np.int64) for c in cols], axis=1), "int32")}


def ref_promotions(d):
    a = d["ubytes"].astype(np.int64)
    b = np.roll(a, -1)
    c = d["sbytes"].astype(np.int64)
    us, ss = d["ushorts"].astype(np.int64), d["sshorts"].astype(np.int64)
    cols = [a + b, a - b, (a + b) & 0xFF, ~a, c >> 2, c * c * c, (c == a).astype(np.int64), ss * ss,
            (us & 0x7FFF) ** 2, (ss + us).astype(np.int16)]
    return {"promo": np.stack(cols, axis=1).astype(np.int32), "wrap8": (a * 3 + c).astype(np.uint8),
            "wrap16": (us + ss * 2).astype(np.int16)}


def ref_poly_double(d):
    x = d["xd"]
    v = fma64(x, 4.0, -2.0)
    coef = [1.0, 1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0]
    p = np.full_like(v, coef[5])
    for k in range(4, -1, -1):
        p = fma64(p, v, coef[k])
    q = fma64(v, v, 1.0)
    return {"yd": p / q + np.sqrt(np.abs(v))}


def ref_bitonic(d):
    return {"keys": np.sort(d["keys"].reshape(4, 256), axis=1)}


def ref_odd_even(d, n=128):
    s = d["oe"].copy()
    rounds = 0
    while True:
        changed = False
        for phase in (0, 1):
            i = np.arange(phase, n - 1, 2)
            swap = s[i] > s[i + 1]
            changed |= bool(swap.any())
            lo, hi = s[i].copy(), s[i + 1].copy()
            s[i], s[i + 1] = np.where(swap, hi, lo), np.where(swap, lo, hi)
        rounds += 1
        if not changed:
            break
    return {"oe": s, "oerounds": np.array([rounds], np.int32)}


def clz32(x):
    return np.array([32 - int(v).bit_length() for v in x], np.int32)


def ffs32(x):
    return np.array([(int(v) & -int(v)).bit_length() for v in x], np.int32)


def popc(x):
    return np.array([bin(int(v)).count("1") for v in x], np.int32)


def ref_warp_vote(d):
    x = d["votes"]
    warps = x.reshape(-1, 32)
    ballots = np.array([sum(1 << lane for lane in range(32) if w[lane] > 0x80000000) for w in warps], np.uint32)
    flags = np.stack([(warps == 0).any(axis=1), (warps & 1).astype(bool).all(axis=1), popc(ballots)], axis=1)
    return {"ballots": ballots, "vflags": flags.astype(np.int32),
            "vbits": np.stack([popc(x), clz32(x), ffs32(x)], axis=1).astype(np.int32)}


def ref_switch(d):
    out = []
    for op, a in zip(d["opcodes"], d["operands"]):
        x = int(c_rem(a, 1000))
        k = int(op) & 7
        if k == 0:
            r = x + 1
        elif k == 1:
            r = x * 3
        elif k in (2, 3):
            r = (-x if k == 2 else 0) + 100
        elif k in (4, 5):
            r = int(c_div(x, 7))
        elif k == 6:
            t = x
            while not -9 <= t <= 9:
                t = int(c_div(t, 10))
            r = t
        else:
            r = x ^ 0x55
        out.append(r)
    return {"swout": np.array(out, np.int32)}


def ref_gcd(d):
    g, iters = [], []
    for x, y in zip(d["ga"].astype(int), d["gb"].astype(int)):
        k = 0
        if y:
            while True:
                x, y, k = y, x % y, k + 1
                if y == 0:
                    break
        g.append(x)
        iters.append(k)
    return {"gg": np.array(g, np.uint32), "giters": np.array(iters, np.int32)}


def next_prime(a: int) -> int:
    c = a + 1
    while c < 2 or any(c % d == 0 for d in range(2, int(c**0.5) + 1)):
        c += 1
    return c


def ref_fma(d):
    fused = fma32(d["fa"], d["fb"], -d["fc"])
    twice = d["fa"] * d["fb"] - d["fc"]
    assert (fused != twice).any(), "the inputs should show fused and unfused results differing"
    return {"fused": fused, "fexp": fused}


def ref_templates(d, n=64):
    rows = d["tf"].reshape(n, 4)
    s = np.zeros(n, np.float32)
    for k in range(4):
        s = s + rows[:, k]
    outf = np.stack([s, np.where(rows[:, 0] > f32(0.5), rows[:, 0], f32(0.5))], axis=1)
    pairs = d["ti"].astype(np.int64).reshape(n, 2)
    a, b = pairs[:, 0], pairs[:, 1]
    clamp = np.clip(c_rem(b, 1000), -100, 100)
    outi = np.stack([np.maximum(a, b), 3 * (a & 0xFF) ** 2, clamp + ((a + b) & UINT_MAX) % 7], axis=1)
    return {"tof": outf, "toi": outi.astype(np.int32)}


def ref_median(d, w=24, h=18):
    p = np.pad(d["medin"].reshape(h, w), 1, mode="edge")
    win = np.stack([p[dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3)], axis=-1)
    return {"medout": np.sort(win, axis=-1)[..., 4]}


def ref_det(d):
    m = d["mats"].astype(np.int64).reshape(-1, 3, 3)
    det = sum(m[:, 0, c] * (m[:, 1, (c + 1) % 3] * m[:, 2, (c + 2) % 3] - m[:, 1, (c + 2) % 3] * m[:, 2, (c + 1) % 3])
              for c in range(3))
    return {"dets": det}


def ref_coords(d, grid=(3, 2, 2), block=(8, 4, 2)):
    rows = []
    digest = ((block[0] * 16 + block[1]) * 16 + block[2]) * 1000 + grid[0] * 100 + grid[1] * 10 + grid[2]
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                for tz in range(block[2]):
                    for ty in range(block[1]):
                        for tx in range(block[0]):
                            t = (tz * block[1] + ty) * block[0] + tx
                            rows.append([tx, ty, tz, bx, by, bz, t // 32, digest])
    return {"coords": np.array(rows, np.int32)}


def ref_atomics(d, n=256):
    x = d["ain"].astype(np.int64)
    sx = d["ain"].view(np.int32).astype(np.int64)
    wide = [int(v) * int(v) for v in x]
    ci = [wrapping_sum(sx >> 8, "int32"), wrapping_sum(-(x & 0xFFFF), "int32"), min(INT_MAX, sx.min()),
          max(INT_MIN, sx.max()), reduce_bits(lambda a, v: a & (v | 0x10000), sx, -1),
          reduce_bits(lambda a, v: a | v, x & 0x00FF00FF, 0), reduce_bits(lambda a, v: a ^ v, sx, 0), -2 * n]
    cu = [wrapping_sum(x, "uint32"), wrapping_sum(-(x & 0xFF), "uint32"), x.min(), x.max(), atomic_inc(n, 100),
          atomic_dec(n, 50), reduce_bits(lambda a, v: a & (v | 0x80000000), x, UINT_MAX),
          reduce_bits(lambda a, v: a | v, x & 0x0F0F0F0F, 0), reduce_bits(lambda a, v: a ^ v, x, 0), 7 + 3 * n]
    cull = [sum(wide) % (1 << 64), min(wide), max(int(v) << 20 for v in x),
            reduce_bits(lambda a, v: a & ~(1 << (v & 63)), x, ULL_MAX), reduce_bits(lambda a, v: a | 1 << (v & 63), x, 0),
            reduce_bits(lambda a, v: a ^ (v * 0x9E3779B97F4A7C15) % (1 << 64), x, 0), sum(wide) % (1 << 64)]
    slots = np.empty(2 * n, np.uint32)
    slots[0::2], slots[1::2] = d["ain"], np.arange(0, 2 * n, 2)
    return {"ci": wrap(ci, "int32"), "cu": wrap(cu, "uint32"), "cull": wrap(cull, "uint64"),
            "cf": np.array([0.5 + float((x & 0xFF).sum())], np.float32),
            "cd": np.array([0.25 + float((x & 0xFFFF).sum()) * 0.5]), "slots": slots}


def ref_math(d, n=512):
    raw = d["mathin"]
    x = raw + f32(0.25)
    y = np.roll(raw, -1) - f32(0.5)
    i = np.arange(n)
    exact = np.stack([np.sqrt(x), x / (y + f32(2)), np.abs(y), np.fmin(x, y), np.fmax(x, y), np.floor(y * f32(8)),
                      (np.ceil(y * f32(8)) + np.minimum(i, 7).astype(np.float32)) - np.maximum(i, 500).astype(np.float32),
                      fma32(x, y, 1)], axis=1)
    x64, y64, y3 = x.astype(np.float64), y.astype(np.float64), (y * f32(3)).astype(np.float64)
    approx = np.stack([np.exp(y64), np.log(x64), np.sin(y3), np.cos(y3), x64**1.5, 1 / np.sqrt(x64)], axis=1)
    return {"mexact": exact.astype(np.float32), "mapprox": approx.astype(np.float32)}


# ------------------------------------------------------------------ references of issue 34's kernels (symbols, C++)
def ref_const_stencil(d, n=3000, radius=4):
    x = np.concatenate([np.zeros(radius, np.float32), d["cin"], np.zeros(radius, np.float32)])
    acc = np.zeros(n, np.float32)
    for k in range(2 * radius + 1):
        acc = fma32(d["weights"][k], x[k:k + n], acc)
    return {"cout": acc}


def ref_convolve2d(d, w=45, h=30, size=5):
    """Out-of-image terms are skipped by the kernel; here they add fma(m, 0, sum), which is sum itself (every
    term is non-negative, so no -0 to lose)."""
    half = size // 2
    img = np.pad(d["image"].reshape(h, w), half)
    mask = d["mask"].reshape(size, size)
    acc = np.zeros((h, w), np.float32)
    for dy in range(size):
        for dx in range(size):
            acc = fma32(mask[dy, dx], img[dy:dy + h, dx:dx + w], acc)
    return {"conv": acc}


def ref_counters(d):
    odd = int(np.count_nonzero(d["cvals"] & 1))
    return {"oddCount": np.array([5 + odd], np.uint32), "seen": np.array([d["cvals"].size], np.uint64)}


JULIA_C = (f32(-0.8), f32(0.156))


def ref_julia(d, w=64, h=48, c=JULIA_C, steps=100):
    """escapeStep, element-wise: z*z's parts as fma(a, b, -(c*d)) and fma(a, b, c*d) (the first product fused),
    |z|^2 as fma(re, re, im*im); a pixel stops at the step |z|^2 passes 4."""
    px, py = np.meshgrid(np.arange(w), np.arange(h))
    re = (px - w // 2).astype(np.float32) / f32(w // 2) * f32(1.5)
    im = (py - h // 2).astype(np.float32) / f32(h // 2)
    out = np.zeros((h, w), np.uint8)
    live = np.ones((h, w), bool)
    with np.errstate(over="ignore", invalid="ignore"):
        for step in range(1, steps + 1):
            re, im = (fma32(re, re, -(im * im)) + c[0], fma32(re, im, im * re) + c[1])
            escaped = live & (fma32(re, re, im * im) > f32(4))
            out[escaped] = step
            live &= ~escaped
            re, im = np.where(live, re, f32(0)), np.where(live, im, f32(0))
    return {"steps": out}


def ref_linked_list(d, n=64, stride=5, tail=17):
    keys = d["keys"].astype(np.int64)
    sums, hops, last = [], [], []
    for i in range(n):
        p, s, k = i, 0, 0
        while p != tail:
            s, p, k = s + keys[p], (p + stride) % n, k + 1
        sums.append(s + keys[p])
        hops.append(k)
        last.append(p)
    return {"sums": wrap(sums, "int32"), "hops": np.array(hops, np.int32), "last": np.array(last, np.int32)}


def ref_block_sums(out, dtype, blocks=6, block=256):
    """A grid-stride block sum: element i belongs to block (i // block) % blocks; integers, so any order."""
    def ref(d):
        owner = (np.arange(d["rin"].size) // block) % blocks
        sums = [sum(int(v) for v in d["rin"][owner == b]) for b in range(blocks)]
        return {out: wrap(sums, dtype) if dtype == "int32" else np.array(sums, dtype)}
    return ref


def ref_shuffle_float4(d):
    v = d["v4in"].reshape(-1, 4)
    return {"v4out": np.stack([v[:, 3], v[:, 0] + v[:, 1], v[:, 2] * f32(2), -v[:, 0]], axis=1)}


def ref_add_int4(d):
    a, b = d["i4a"].astype(np.int64).reshape(-1, 4), d["i4b"].astype(np.int64).reshape(-1, 4)
    return {"i4out": wrap(np.stack([a[:, 0] + b[:, 0], a[:, 1] - b[:, 1], a[:, 2] ^ b[:, 2], a[:, 3] * 3], axis=1),
                          "int32")}


# ------------------------------------------------------------------ issue 34: vector types, constants, contraction
def ref_fma_inlined(d):
    ax, ay, bx, by, c = d["vr"][0::2], d["vr"][1::2], d["vp"][0::2], d["vp"][1::2], d["vc"]
    na, nb = fma32(ax, ax, ay * ay), fma32(bx, bx, by * by)  # each norm2: one fma, never fused again
    dx, dy = ax - bx, ay - by
    out = {"diff": na - nb, "chain": fma32(ax, bx, ay * by) + c, "rsub": c - na, "acc": fma32(-ax, by, c + na),
           "apart": na - nb, "dist": c + fma32(dx, dx, dy * dy), "sqc": fma32(ax, ax, c), "sqnc": ax * ax + c}
    assert (out["sqc"] != out["sqnc"]).any(), "the inputs should tell an inlined product from a returned value"
    return out


def ref_pack_vectors(d, tile=64):
    x = d["pin"].reshape(-1, tile).astype(np.int64)
    t = np.arange(tile)
    sums = sum(x[:, (t + k) % tile] for k in range(tile // 16))
    pairs = np.stack([sums, x[:, ::-1]], axis=2).astype(np.int32)
    full = np.broadcast_to(t, sums.shape)
    packed = np.stack([(full + 3) % 256, sums % 256, (sums >> 8) % 256, np.full(sums.shape, 255)], axis=2)
    return {"pairs": pairs, "packed": packed.astype(np.uint8)}


# ------------------------------------------------------------------ the corpus
def julia_steps(dim: int = 40) -> np.ndarray:
    """The escape steps of test_sim_cxx_classes.JULIA (CUDA by Example's shape), with nvcc's contractions: r*a.r - i*a.i is fma(r, a.r, -(i*a.i)),
    i*a.r + r*a.i is fma(i, a.r, r*a.i), r*r + i*i is fma(r, r, i*i)."""
    half = dim // 2
    ys, xs = np.mgrid[0:dim, 0:dim]
    ar = (f32(1.5) * (half - xs).astype(np.float32)) / f32(half)
    ai = (f32(1.5) * (half - ys).astype(np.float32)) / f32(half)
    out = np.full((dim, dim), 200, np.int32)
    alive = np.ones((dim, dim), bool)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(200):
            ar, ai = fma32(ar, ar, -(ai * ai)) + f32(-0.8), fma32(ai, ar, ar * ai) + f32(0.156)
            escaped = alive & (fma32(ar, ar, ai * ai) > f32(1000))
            out[escaped] = k
            alive &= ~escaped
    return out.reshape(-1)


def block_tree_sums(data: np.ndarray, block: int) -> np.ndarray:
    """Each block's sum in a shared-memory tree's order (s[t] += s[t + stride], stride halving), as the
    element type rounds each addition; the tail past the data is zeros."""
    blocks = -(-len(data) // block)
    tree = np.zeros(blocks * block, data.dtype)
    tree[:len(data)] = data
    tree = tree.reshape(blocks, block)
    stride = block // 2
    with np.errstate(over="ignore"):
        while stride:
            tree[:, :stride] = tree[:, :stride] + tree[:, stride:2 * stride]
            stride //= 2
    return tree[:, 0].copy()


def ref_link_and_walk(d, n=300):
    order = [(j * 37) % n for j in range(n)]
    sums, lengths = np.zeros(n, np.int32), np.zeros(n, np.int32)
    suffix = np.cumsum(d["lkeys"][order][::-1].astype(np.int64))[::-1]  # the keys from position j to the end
    suffix = suffix.astype(np.int32)  # wrapped as the kernel's int sum wraps
    for j, at in enumerate(order):
        sums[at] = suffix[j]
        lengths[at] = n - j
    return {"lsums": sums, "llens": lengths}


def ref_warp_reduce(d):
    x = d["wrx"].astype(np.int64).reshape(-1, 32)
    u = d["wrx"].view(np.uint32).reshape(-1, 32)
    each = lambda r: np.repeat(r, 32)  # noqa: E731 — every lane of the warp gets its warp's result
    bits = np.stack([each(np.bitwise_and.reduce(u | np.uint32(0x80000000), axis=1)),
                     each(np.bitwise_or.reduce(u & np.uint32(0xff), axis=1)), each(np.bitwise_xor.reduce(u, axis=1))],
                    axis=1)
    evens = np.full(x.shape, -1, np.int64)
    evens[:, 0::2] = x[:, 0::2].sum(1, keepdims=True)
    return {"wrsum": wrap(each(x.sum(1)), "int32"), "wrmin": each(x.min(1)).astype(np.int32),
            "wrmax": each(x.max(1)).astype(np.int32), "wrbits": bits.astype(np.uint32),
            "wreven": wrap(evens.reshape(-1), "int32")}


def B(name, kind, dtype, count, init=Fill(), output=False) -> Buf:
    return Buf(name, kind, dtype, count, init, output)


def O(name, kind, dtype, count, init=Fill()) -> Buf:  # noqa: E743 — an output buffer
    return Buf(name, kind, dtype, count, init, True)


K = KERNELS
CLAMP_SOURCE = """extern "C" __global__ void clampTernary(float *v, int n, float lo, float hi)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float x = v[i];
    v[i] = x < lo ? lo : (x > hi ? hi : x);
}"""
ROW_SUMS_SOURCE = """#define ROW_LEN 16
extern "C" __global__ void rowSums(const int *m, long long *sums, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    long long s = 0;
    const int *p = m + r * ROW_LEN;
    for (int k = 0; k < ROW_LEN; ++k)
        s += p[k];
    sums[r] = s;
}"""

CASES: list[Case] = [
    # -------------------------------------------------- the basics
    Case("vector_add_grid_stride", "vector add with a grid-stride loop (384 threads, 5000 elements)",
         "vecAddGridStride", "a b c 5000", 3, 128, file=K / "vector_add.cu",
         buffers=(B("a", "device", "float32", 5000, rand(1)), B("b", "device", "float32", 5000, rand(2)),
                  O("c", "device", "float32", 5000)),
         reference=lambda d: {"c": d["a"] + d["b"]}),
    Case("saxpy", "y = a*x + y, contracted into one fma by nvcc (loaded `as course`: saxpy is a built-in's name)",
         "saxpy", "3000 1.7f x y", 12, 256, file=K / "saxpy.cu", module="course",
         buffers=(B("x", "device", "float32", 3000, rand(3)), O("y", "device", "float32", 3000, rand(4))),
         reference=lambda d: {"y": fma32(f32(1.7), d["x"], d["y"])}),
    Case("warp_reduce_sync", "sm_80's __reduce_add/min/max/and/or/xor_sync over a warp, and over a partial mask",
         "warpReduce", "wrx wrsum wrmin wrmax wrbits wreven", 3, 64, file=K / "warp_reduce_sync.cu",
         buffers=(B("wrx", "device", "int32", 192, rand(94)), O("wrsum", "device", "int32", 192),
                  O("wrmin", "device", "int32", 192), O("wrmax", "device", "int32", 192),
                  O("wrbits", "device", "uint32", 576), O("wreven", "device", "int32", 192)),
         reference=ref_warp_reduce),
    Case("whole_program", "a whole course program: the kernel beside main(), the runtime API, a launch, iostream "
         "and std::vector — the simulator runs the kernel and leaves the host code to nvcc", "scaleAdd",
         "wpx wpy 3.0f 1000", 8, 128, file=K / "whole_program.cu", module="wp",
         buffers=(B("wpx", "device", "float32", 1000, rand(92)), O("wpy", "device", "float32", 1000, rand(93))),
         reference=lambda d: {"wpy": fma32(f32(3.0), d["wpx"], d["wpy"])}),
    Case("matrix_add_2d", "matrix add on a 2-D grid of 16x16 blocks (100 x 37)", "matAdd2D", "m2a m2b m2c 100 37",
         (7, 3), (16, 16), file=K / "matrix_add_2d.cu",
         buffers=(B("m2a", "device", "float32", 3700, rand(33)), B("m2b", "device", "float32", 3700, rand(34)),
                  O("m2c", "device", "float32", 3700, const(-1.0))),
         reference=lambda d: {"m2c": d["m2a"] + d["m2b"]}),
    Case("thread_coords_3d", "threadIdx/blockIdx/blockDim/gridDim and warpSize on a 3-D grid of 3-D blocks",
         "whoAmI", "coords", (3, 2, 2), (8, 4, 2), file=K / "thread_coords_3d.cu",
         buffers=(O("coords", "device", "int32", 8 * 768, const(-1)),), reference=ref_coords),
    Case("define_clamp_ternary", "`kernel define`: early return and nested ?: on floats", "clampTernary",
         "cv 1000 0.25f 0.75f", 4, 256, source=CLAMP_SOURCE,
         buffers=(O("cv", "device", "float32", 1000, rand(57)),),
         reference=lambda d: {"cv": np.clip(d["cv"], f32(0.25), f32(0.75))}),
    Case("define_row_sums", "`kernel define` with a #define, pointer arithmetic and 64-bit sums", "rowSums",
         "rowm rows 64", 1, 64, source=ROW_SUMS_SOURCE,
         buffers=(B("rowm", "device", "int32", 64 * 16, rand(58)), O("rows", "device", "int64", 64)),
         reference=lambda d: {"rows": d["rowm"].astype(np.int64).reshape(64, 16).sum(axis=1)}),
    # -------------------------------------------------- shared memory
    Case("reduce_shared_tree", "shared-memory tree reduction, last warp with __syncwarp (float partial sums)",
         "reduceSum", "xs partial 4000", 8, 256, file=K / "reduce_shared.cu",
         buffers=(B("xs", "device", "float32", 4000, rand(5)), O("partial", "device", "float32", 8)),
         reference=ref_reduce_shared),
    Case("reduce_dynamic_shared", "`extern __shared__` sized by `shared BYTES`, split by pointer casts (sum, max)",
         "sumAndMax", "vals bsum bmax 700", 6, 128, shared=128 * 8, file=K / "reduce_dynamic_shared.cu",
         buffers=(B("vals", "device", "int32", 700, rand(6)), O("bsum", "device", "uint32", 6),
                  O("bmax", "device", "int32", 6)),
         reference=ref_reduce_dynamic),
    Case("transpose_tiled_padded", "tiled transpose through a padded [32][33] shared tile, 100 x 70",
         "transposeTiled", "tout tin 100 70", (4, 3), (32, 8), file=K / "transpose_tiled.cu",
         buffers=(O("tout", "device", "float32", 7000), B("tin", "device", "float32", 7000, rand(7))),
         reference=lambda d: {"tout": d["tin"].reshape(70, 100).T.copy()}),
    Case("histogram_shared_global_atomics", "256-bin byte histogram: shared atomics, then global atomics",
         "histogram256", "bytes 20000 hist", 4, 128, file=K / "histogram.cu",
         buffers=(B("bytes", "device", "uint8", 20000, (rand(11, 4000), const(42, 3000), rand(12))),
                  O("hist", "device", "uint32", 256)),
         reference=lambda d: {"hist": np.bincount(d["bytes"], minlength=256)}),
    Case("stencil_1d_halo", "1-D stencil, radius 3, halos staged in shared memory", "stencil1d", "sin sout 1000",
         8, 128, file=K / "stencil_1d.cu",
         buffers=(B("sin", "device", "int16", 1000, rand(13)), O("sout", "device", "int32", 1000)),
         reference=ref_stencil_1d),
    Case("stencil_2d_halo", "5-point Jacobi step with a 2-D shared tile and one-cell halos (50 x 30)", "jacobi5",
         "gin gout 50 30", (4, 4), (16, 8), file=K / "stencil_2d.cu",
         buffers=(B("gin", "device", "float32", 1500, rand(14)), O("gout", "device", "float32", 1500)),
         reference=ref_stencil_2d),
    Case("matmul_tiled", "tiled matrix multiply 40x56 · 56x36, 16x16 tiles, fma chain", "matmulTiled",
         "ma mb mc 40 36 56", (3, 3), (16, 16), file=K / "matmul_tiled.cu",
         buffers=(B("ma", "device", "float32", 40 * 56, rand(15)), B("mb", "device", "float32", 56 * 36, rand(16)),
                  O("mc", "device", "float32", 40 * 36)),
         reference=ref_matmul),
    Case("block_scan_blelloch", "one-block work-efficient exclusive scan of 512 unsigned", "blellochScan",
         "bin bout 512", 1, 256, file=K / "scan_block.cu",
         buffers=(B("bin", "device", "uint32", 512, rand(20)), O("bout", "device", "uint32", 512)),
         reference=ref_blelloch),
    Case("bitonic_sort_shared", "bitonic sort of four 256-key segments in shared memory (with duplicates)",
         "bitonicSortShared", "keys", 4, 256, file=K / "bitonic_sort.cu",
         buffers=(O("keys", "device", "uint32", 1024, (rand(35, 300), const(5, 100), rand(36))),),
         reference=ref_bitonic),
    Case("odd_even_sort_do_while", "odd-even transposition sort: do/while until a round swaps nothing",
         "oddEvenSort", "oe 128 oerounds", 1, 64, file=K / "odd_even_sort.cu",
         buffers=(O("oe", "device", "float32", 128, rand(37)), O("oerounds", "device", "int32", 1)),
         reference=ref_odd_even),
    # -------------------------------------------------- warps
    Case("warp_sum_shfl_down", "warp sums with __shfl_down_sync", "warpSumDown", "shorts wsums", 2, 256,
         file=K / "warp_shuffle_reduce.cu",
         buffers=(B("shorts", "device", "int16", 512, rand(17)), O("wsums", "device", "int32", 16)),
         reference=lambda d: {"wsums": d["shorts"].astype(np.int64).reshape(16, 32).sum(axis=1)}),
    Case("warp_allreduce_shfl_xor", "butterfly all-reduce with __shfl_xor_sync, broadcast with __shfl_sync",
         "warpAllReduceXor", "wf wtotal wfirst", 2, 128, file=K / "warp_shuffle_reduce.cu",
         buffers=(B("wf", "device", "float32", 256, rand(18)), O("wtotal", "device", "float32", 256),
                  O("wfirst", "device", "float32", 256)),
         reference=ref_warp_xor),
    Case("warp_scan_shfl_up", "inclusive warp scan with __shfl_up_sync, total from the last lane",
         "warpInclusiveScan", "su sout stot", 1, 256, file=K / "warp_scan.cu",
         buffers=(B("su", "device", "uint32", 256, rand(19)), O("sout", "device", "uint32", 256),
                  O("stot", "device", "uint32", 8)),
         reference=ref_warp_scan),
    Case("warp_vote_ballot", "__ballot_sync, __any_sync, __all_sync, __popc, __clz, __ffs (zero included)",
         "warpVote", "votes ballots vflags vbits 2147483648u", 1, 128, file=K / "warp_vote.cu",
         buffers=(B("votes", "device", "uint32", 128,
                    (rand(38, 32), rand(39, 10), const(0, 1), rand(40, 21), const(7, 32), rand(41))),
                  O("ballots", "device", "uint32", 4), O("vflags", "device", "int32", 12),
                  O("vbits", "device", "int32", 384)),
         reference=ref_warp_vote),
    # -------------------------------------------------- control flow
    Case("collatz_while", "a data-dependent while per thread (Collatz walks, 64-bit peaks)", "collatzSteps",
         "starts steps peaks 384", 3, 128, file=K / "collatz_while.cu",
         buffers=(B("starts", "device", "uint16", 384, rand(21)), O("steps", "device", "uint32", 384),
                  O("peaks", "device", "uint64", 384)),
         reference=ref_collatz),
    Case("switch_ops", "switch with shared cases, fall-through, a loop inside a case, default", "switchOps",
         "opcodes operands swout 512", 2, 256, file=K / "switch_ops.cu",
         buffers=(B("opcodes", "device", "int32", 512, rand(43)), B("operands", "device", "int32", 512, rand(44)),
                  O("swout", "device", "int32", 512)),
         reference=ref_switch),
    Case("gcd_do_while", "Euclid's gcd as a do/while, with an early return for b == 0", "gcdDoWhile",
         "ga gb gg giters 512", 2, 256, file=K / "do_while_loops.cu",
         buffers=(B("ga", "device", "uint16", 512, rand(45)), B("gb", "device", "uint16", 512, (const(0, 5), rand(46))),
                  O("gg", "device", "uint32", 512), O("giters", "device", "int32", 512)),
         reference=ref_gcd),
    Case("next_prime_break_continue", "nested loops with continue and break (first prime above a number)",
         "nextPrime", "pa pp 256", 1, 256, file=K / "do_while_loops.cu",
         buffers=(B("pa", "device", "uint16", 256, (const(0, 1), const(1, 1), const(65535, 1), rand(47))),
                  O("pp", "device", "uint32", 256)),
         reference=lambda d: {"pp": np.array([next_prime(int(a)) for a in d["pa"]], np.uint32)}),
    # -------------------------------------------------- functions, types, arithmetic
    Case("device_structs", "device functions with structs by value and by pointer, default argument, "
         "__forceinline__", "moveParticles", "particles 200 0.1f 12", 2, 128, file=K / "device_structs.cu",
         buffers=(O("particles", "device", "float32", 5 * 200, rand(22)),), reference=ref_particles),
    Case("templates_preprocessor", "function templates (explicit, deduced, int params), #include beside, "
         "#define/#if, NULL", "templatedOps", "tf ti tof toi 64", 1, 64, file=K / "templates.cu",
         buffers=(B("tf", "device", "float32", 256, rand(51)), B("ti", "device", "int32", 128, rand(52)),
                  O("tof", "device", "float32", 128), O("toi", "device", "int32", 192)),
         reference=ref_templates),
    Case("median_filter_local_array", "3x3 median with a local int[9] and insertion sort, 2-D grid",
         "median3x3", "medin medout 24 18", (3, 3), (8, 8), file=K / "local_arrays.cu",
         buffers=(B("medin", "device", "int32", 24 * 18, rand(53)), O("medout", "device", "int32", 24 * 18)),
         reference=ref_median),
    Case("det3x3_local_2d_array", "3x3 determinants from a local int[3][3] filled through a walking pointer",
         "det3x3", "mats dets 128", 1, 128, file=K / "local_arrays.cu",
         buffers=(B("mats", "device", "int16", 9 * 128, rand(54)), O("dets", "device", "int64", 128)),
         reference=ref_det),
    Case("image_brighten_3d_grid", "unsigned-char planes on a 3-D grid (z = frame*3 + channel), saturation",
         "brightenContrast", "img imgout 40 24 300 -20", (3, 6, 6), (16, 4, 1), file=K / "image_3d.cu",
         buffers=(B("img", "device", "uint8", 40 * 24 * 6, rand(23)), O("imgout", "device", "uint8", 40 * 24 * 6)),
         reference=ref_brighten),
    Case("image_gray_3d_blocks", "interleaved RGB to gray through a byte pointer, 3-D blocks over frames",
         "rgbToGray", "rgb gray 30 20 4", (4, 5, 2), (8, 4, 2), file=K / "image_3d.cu",
         buffers=(B("rgb", "device", "uint8", 30 * 20 * 4 * 3, rand(24)), O("gray", "device", "uint8", 30 * 20 * 4)),
         reference=ref_gray),
    Case("int_corner_cases", "C integer corner cases: truncating / and %, shifts, wrap, conversions",
         "intCorners", "ia ib icorners 256", 2, 128, file=K / "int_corners.cu",
         buffers=(B("ia", "device", "int32", 256, tuple(const(v, 1) for v in
                                                        (INT_MIN, INT_MAX, -1, 0, 1, -7, 7, -8, 100, -100)) + (rand(25),)),
                  B("ib", "device", "int32", 256, tuple(const(v, 1) for v in (2, -2, 3, -3, -1, 1, 2, 7, -2, 5))
                    + (rand(26),)),
                  O("icorners", "device", "int32", 16 * 256)),
         reference=ref_int_corners),
    Case("char_short_promotions", "char/short promotions to int, signed char, narrowing stores", "promotions",
         "ubytes sbytes ushorts sshorts promo wrap8 wrap16 256", 1, 256, file=K / "char_short.cu",
         buffers=(B("ubytes", "device", "uint8", 256, rand(27)), B("sbytes", "device", "int8", 256, rand(28)),
                  B("ushorts", "device", "uint16", 256, rand(29)), B("sshorts", "device", "int16", 256, rand(30)),
                  O("promo", "device", "int32", 2560), O("wrap8", "device", "uint8", 256),
                  O("wrap16", "device", "int16", 256)),
         reference=ref_promotions),
    Case("fma_contraction", "a*b - c contracted to one rounding, equal to __fmaf_rn, unlike the CPU's two",
         "mulSub", "fa fb fc fused fexp 2048", 8, 256, file=K / "fma_contraction.cu",
         buffers=(B("fa", "device", "float32", 2048, rand(48)), B("fb", "device", "float32", 2048, rand(49)),
                  B("fc", "device", "float32", 2048, rand(50)), O("fused", "device", "float32", 2048),
                  O("fexp", "device", "float32", 2048)),
         reference=ref_fma),
    Case("math_single_precision", "sqrtf fabsf fminf fmaxf floorf ceilf min max __fmaf_rn exactly; expf logf sinf "
         "cosf powf rsqrtf within 4 ulps of numpy", "mathFuncs", "mathin mexact mapprox 512", 2, 256,
         file=K / "math_funcs.cu",
         buffers=(B("mathin", "device", "float32", 512, rand(56)), O("mexact", "device", "float32", 8 * 512),
                  O("mapprox", "device", "float32", 6 * 512)),
         reference=ref_math, ulps={"mapprox": 4}),
    # -------------------------------------------------- atomics
    Case("atomics_every_type", "atomicAdd/Sub/Exch/Min/Max/Inc/Dec/CAS/And/Or/Xor on int, unsigned, "
         "unsigned long long, float, double", "atomicsAll", "ain ci cu cull cf cd slots 256", 2, 128,
         file=K / "atomics_all.cu",
         buffers=(B("ain", "device", "uint32", 256, rand(55)),
                  O("ci", "device", "int32", 8, tuple(const(v, 1) for v in (0, 0, INT_MAX, INT_MIN, -1, 0, 0, 0))),
                  O("cu", "device", "uint32", 10, tuple(const(v, 1) for v in
                                                        (0, 0, UINT_MAX, 0, 0, 0, UINT_MAX, 0, 0, 7))),
                  O("cull", "device", "uint64", 7, tuple(const(v, 1) for v in (0, ULL_MAX, 0, ULL_MAX, 0, 0, 0))),
                  O("cf", "device", "float32", 1, const(0.5)), O("cd", "device", "float64", 1, const(0.25)),
                  O("slots", "device", "uint32", 512, IOTA)),
         reference=ref_atomics),
    Case("atomic_cas_float_max", "float atomicMax from an atomicCAS loop on the float's bits", "maxOfArray",
         "fvals fmax 3000", 4, 128, file=K / "atomic_cas_fmax.cu",
         buffers=(B("fvals", "device", "float32", 3000, rand(42)), O("fmax", "device", "float32", 1, const(-1.0))),
         reference=lambda d: {"fmax": np.array([d["fvals"].max()], np.float32)}),
    # -------------------------------------------------- kinds of memory
    Case("double_managed_horner", "double precision on managed memory: Horner fma chain, division, sqrt",
         "polyDouble", "xd yd 1000", 4, 256, file=K / "double_managed.cu",
         buffers=(B("xd", "managed", "float64", 1000, rand(31)), O("yd", "managed", "float64", 1000)),
         reference=ref_poly_double),
    Case("zero_copy_mapped", "reads registered pageable memory and writes mapped pinned memory (zero-copy)",
         "squaresToHost", "zin zout 1024", 4, 256, file=K / "zero_copy.cu",
         buffers=(B("zin", "registered", "uint32", 1024, rand(32)), O("zout", "mapped", "uint32", 1024)),
         reference=lambda d: {"zout": (d["zin"].astype(np.uint64) ** 2 + np.arange(1024, dtype=np.uint64))
                              & np.uint64(UINT_MAX)}),
    # -------------------------------------------------- printf and faults
    Case("printf_warps", "printf from the first lane of each warp, and %u %x %.3f %s", "helloWarps", "pdata 128",
         2, 64, file=K / "printf_warps.cu", buffers=(B("pdata", "device", "int32", 128, IOTA),),
         printf=tuple(f"block {b} warp {w} value {b * 64 + w * 32}" for b in range(2) for w in range(2))
         + ("n=128 hex=ff half=1.500 done",)),
    Case("out_of_bounds_write", "a write gigabytes past the allocation: CUDA_ERROR_ILLEGAL_ADDRESS at sync",
         "writeFarPastTheEnd", "oob 268435456l", 1, 32, file=K / "oob_write.cu",
         buffers=(B("oob", "device", "int32", 64),), error="CUDA_ERROR_ILLEGAL_ADDRESS",
         gpu_also=("CUDA_ERROR_INVALID_ADDRESS_SPACE",)),  # an H100 said this when the address fell in the
    # shared-memory window of its generic address space (it depends on where the buffer was allocated)
    Case("readonly_registered_write", "a kernel writes memory registered read-only: CUDA_ERROR_ILLEGAL_ADDRESS",
         "scaleInPlace", "ro 1024 3", 4, 256, file=K / "readonly_write.cu",
         buffers=(B("ro", "readonly", "int32", 1024, IOTA),), error="CUDA_ERROR_ILLEGAL_ADDRESS", intact=("ro",)),
    Case("misaligned_store", "an int store at byte offset 2: CUDA_ERROR_MISALIGNED_ADDRESS", "storeIntAt",
         "mis 2 7", 1, 1, file=K / "misaligned.cu", buffers=(B("mis", "device", "uint8", 64),),
         error="CUDA_ERROR_MISALIGNED_ADDRESS"),
    Case("assert_fails", "a device assert that fails for one element: CUDA_ERROR_ASSERT", "checkPositive",
         "adata 128", 1, 128, file=K / "assert_kernel.cu",
         buffers=(B("adata", "device", "int32", 128, (const(5, 100), const(-3, 1), const(9))),),
         error="CUDA_ERROR_ASSERT"),
    # -------------------------------------------------- issue 34: constant memory and __device__ variables
    Case("const_stencil_1d", "1-D stencil, radius 4, weights in __constant__ memory written by memcpy h2d",
         "constStencil", "cin cout 3000", 12, 256, file=K / "const_stencil_1d.cu", module="cst",
         buffers=(B("weights", "symbol", "float32", 9, rand(75)), B("cin", "device", "float32", 3000, rand(76)),
                  O("cout", "device", "float32", 3000)),
         reference=ref_const_stencil),
    Case("conv2d_const_mask", "2-D convolution, a 5x5 __constant__ mask sized by file-scope consts, 45 x 30",
         "convolve2d", "image conv 45 30", (3, 4), (16, 8), file=K / "conv2d_const_mask.cu", module="conv",
         buffers=(B("mask", "symbol", "float32", 25, rand(77)), B("image", "device", "float32", 45 * 30, rand(78)),
                  O("conv", "device", "float32", 45 * 30)),
         reference=ref_convolve2d),
    Case("device_counter", "__device__ counters bumped by atomicAdd: one initialised to 5, one zero, read back",
         "countOdd", "cvals 1000", 4, 256, file=K / "device_counter.cu", module="ctr",
         buffers=(B("cvals", "device", "int32", 1000, rand(79)), O("oddCount", "as-loaded", "uint32", 1, const(5)),
                  O("seen", "as-loaded", "uint64", 1)),
         reference=ref_counters),
    Case("device_histogram", "a 64-bin histogram into a __device__ table the host filled first (iota)",
         "histogramToTable", "hbytes 5000", 3, 128, file=K / "device_histogram.cu", module="dh",
         buffers=(B("hbytes", "device", "uint8", 5000, (rand(80, 2000), const(7, 500), rand(81))),
                  O("table", "symbol", "uint32", 64, IOTA)),
         reference=lambda d: {"table": d["table"] + np.bincount(d["hbytes"] % 64, minlength=64)}),
    Case("void_kernel_device_array", "`(void)` parameters; the output is a zero-initialised __device__ array",
         "recordLaunch", "", 6, 96, file=K / "void_kernel.cu", module="vk",
         buffers=(O("launchInfo", "as-loaded", "int32", 8),),
         reference=lambda d: {"launchInfo": [b * 1000 + 960 + 6 if b < 6 else 0 for b in range(8)]}),
    Case("symbol_struct_static", "an initialised __constant__ struct read as loaded, a static __device__ counter",
         "applyParams", "pin pout 700", 3, 256, file=K / "symbol_structs.cu", module="ps",
         buffers=(B("params", "as-loaded", "float32", 2, (const(2.5, 1), const(7, 1, "int32"))),
                  B("pin", "device", "int32", 700, rand(96)), O("pout", "device", "float32", 700),
                  O("applied", "as-loaded", "int32", 1)),
         reference=lambda d: {"pout": wrap(d["pin"].astype(np.int64) + 7, "int32").astype(np.float32) * f32(2.5),
                              "applied": [700]}),
    # -------------------------------------------------- issue 34: parameters, vector types, C++
    Case("typedef_params", "typedef'd `uint n` and `real a`, a `const real in[]` parameter, a commented-out "
         "signature above the real one", "scaleAdd", "tyout tyin 3000 1.25f", 12, 256, file=K / "typedef_params.cu",
         buffers=(O("tyout", "device", "float32", 3000, rand(82)), B("tyin", "device", "float32", 3000, rand(83))),
         reference=lambda d: {"tyout": fma32(f32(1.25), d["tyin"], d["tyout"])}),
    Case("float4_copy", "float4 pointers: one 16-byte load and store a thread", "copyFloat4", "v4in v4out 1000",
         4, 256, file=K / "float4_copy.cu",
         buffers=(B("v4in", "device", "float32", 4000, rand(84)), O("v4out", "device", "float32", 4000)),
         reference=lambda d: {"v4out": d["v4in"]}),
    Case("float4_make_members", "float4 member access and make_float4", "shuffleFloat4", "v4in v4out 1000", 4, 256,
         file=K / "float4_copy.cu",
         buffers=(B("v4in", "device", "float32", 4000, rand(85)), O("v4out", "device", "float32", 4000)),
         reference=ref_shuffle_float4),
    Case("int4_make_members", "int4 loads, member arithmetic, make_int4", "addInt4", "i4a i4b i4out 500", 2, 256,
         file=K / "float4_copy.cu",
         buffers=(B("i4a", "device", "int32", 2000, rand(86)), B("i4b", "device", "int32", 2000, rand(87)),
                  O("i4out", "device", "int32", 2000)),
         reference=ref_add_int4),
    Case("float4_misaligned", "a float4 load 4 bytes past a 16-byte boundary: CUDA_ERROR_MISALIGNED_ADDRESS",
         "loadFloat4At", "fbase fsum 1", 1, 32, file=K / "float4_copy.cu",
         buffers=(B("fbase", "device", "float32", 64, IOTA), B("fsum", "device", "float32", 32)),
         error="CUDA_ERROR_MISALIGNED_ADDRESS"),
    Case("reduce_template_cg_int", "SharedMemory<T>-style struct template with conversion operators, block.sync(), "
         "cg::reduce over a 32-thread tile (int)", "blockSumInt", "rin rsum 10000", 6, 256, shared=256 * 4,
         file=K / "reduce_template_cg.cu",
         buffers=(B("rin", "device", "int32", 10000, rand(88)), O("rsum", "device", "int32", 6)),
         reference=ref_block_sums("rsum", "int32")),
    Case("reduce_template_cg_double", "the same template for double (integer inputs: exact in any order)",
         "blockSumDouble", "rin dsum 10000", 6, 256, shared=256 * 8, file=K / "reduce_template_cg.cu",
         buffers=(B("rin", "device", "int32", 10000, rand(89)), O("dsum", "device", "float64", 6)),
         reference=ref_block_sums("dsum", "float64")),
    Case("transpose_cg_sync", "tiled transpose with cg::this_thread_block().sync(), 100 x 70, edges guarded",
         "transposeCG", "cgout cgin 100 70", (4, 3), (32, 8), file=K / "transpose_cg.cu",
         buffers=(O("cgout", "device", "float32", 7000), B("cgin", "device", "float32", 7000, rand(90))),
         reference=lambda d: {"cgout": d["cgin"].reshape(70, 100).T.copy()}),
    Case("julia_complex_struct", "Julia set with a complex struct: constructor, methods, operator* and operator+",
         "julia", "steps 64 48 -0.8f 0.156f", (4, 6), (16, 8), file=K / "julia_complex.cu",
         buffers=(O("steps", "device", "uint8", 64 * 48, const(255)),), reference=ref_julia),
    Case("linked_list_walk", "a self-referential struct: one kernel links a list in device memory, another walks it",
         "walkList", "pool 64 sums hops last", 2, 32, file=K / "linked_list.cu", module="ll",
         launched_before=("launch ll.buildList pool keys 64 17 grid 2 block 32",),
         buffers=(B("pool", "device", "uint8", 64 * 16), B("keys", "device", "int32", 64, rand(91)),
                  O("sums", "device", "int32", 64), O("hops", "device", "int32", 64), O("last", "device", "int32", 64)),
         reference=ref_linked_list),
    # -------------------------------------------------- outside the subset: the simulator must refuse
    Case("refuse_texture", "a texture fetch", file=K / "refuse_texture.cu", refused=("texture", "tex1Dfetch")),
    Case("refuse_cooperative_groups", "cooperative groups' grid-wide sync (it needs a cooperative launch)",
         file=K / "refuse_cooperative_groups.cu", refused=("cooperative launch",)),
    Case("refuse_dynamic_parallelism", "a kernel launching a kernel", file=K / "refuse_dynamic_parallelism.cu",
         refused=("dynamic parallelism", "<<<")),
    Case("refuse_inline_ptx", "inline PTX (asm)", file=K / "refuse_inline_ptx.cu", refused=("asm", "ptx")),
    # -------------------------------------------------- cooperative groups (issue 34, item 4)
    Case("cg_reduce_tiles", "cg::reduce over tiles of 32, warp sums through shared memory, block.sync()",
         "cgReduceSum", "cgx cgpart 5000", 6, 256, file=K / "cg_reduce.cu",
         buffers=(B("cgx", "device", "float32", 5000, rand(63)), O("cgpart", "device", "float32", 6)),
         reference=ref_cg_reduce),
    Case("cg_tile_scans", "cg::inclusive_scan / exclusive_scan over tiles of 16 (unsigned and float)",
         "cgTileScans", "cgu cgincl cgexcl cgf cgfincl 1000", 4, 256, file=K / "cg_reduce.cu",
         buffers=(B("cgu", "device", "uint32", 1000, rand(64)), O("cgincl", "device", "uint32", 1000),
                  O("cgexcl", "device", "uint32", 1000), B("cgf", "device", "float32", 1000, rand(65)),
                  O("cgfincl", "device", "float32", 1000)),
         reference=ref_cg_scans),
    Case("cg_transpose_tiled", "tiled transpose synchronised by cg::this_thread_block()'s sync(), 100 x 70",
         "cgTranspose", "cgtout cgtin 100 70", (4, 3), (32, 8), file=K / "cg_transpose.cu",
         buffers=(O("cgtout", "device", "float32", 7000), B("cgtin", "device", "float32", 7000, rand(66))),
         reference=lambda d: {"cgtout": d["cgtin"].reshape(70, 100).T.copy()}),
    # -------------------------------------------------- issue 34 (i34-vec): vector types, file-scope constants, and
    # contraction across inlined device functions
    Case("fma_inlined_chain", "nvcc contracts a product with the sum it meets, through inlined device functions "
         "(sq(a) + c is one fma) but not a __noinline__ call's result, and never fuses an fma again "
         "(norm2(a) - norm2(b) on float2)", "fmaInlined",
         "vr vp vc diff chain rsub acc apart dist sqc sqnc 2000", 8, 256, file=K / "fma_inlined.cu",
         buffers=(B("vr", "device", "float32", 4000, rand(61)), B("vp", "device", "float32", 4000, rand(62)),
                  B("vc", "device", "float32", 2000, rand(63)), O("diff", "device", "float32", 2000),
                  O("chain", "device", "float32", 2000), O("rsub", "device", "float32", 2000),
                  O("acc", "device", "float32", 2000), O("apart", "device", "float32", 2000),
                  O("dist", "device", "float32", 2000), O("sqc", "device", "float32", 2000),
                  O("sqnc", "device", "float32", 2000)),
         reference=ref_fma_inlined),
    Case("float4_copy_constexpr", "float4 copy, 16 bytes a thread in one access, made by make_float4 in a device function, "
         "scaled by a file-scope constexpr", "copyFloat4", "f4in f4out 1000", 4, 256, file=K / "vector_types.cu",
         buffers=(B("f4in", "device", "float32", 4000, rand(64)), O("f4out", "device", "float32", 4000)),
         reference=lambda d: {"f4out": d["f4in"] * np.float32(0.5)}),
    Case("int2_uchar4_file_consts", "int2 and uchar4 written whole, a file-scope const as a shared array's size "
         "and a loop bound", "packVectors", "pin pairs packed", 3, 64, file=K / "vector_types.cu",
         buffers=(B("pin", "device", "int32", 192, rand(65)), O("pairs", "device", "int32", 384),
                  O("packed", "device", "uint8", 768)),
         reference=ref_pack_vectors),
    # -------------------------------------------------- issue 34: structs and classes (i34-cls)
    Case("class_template_pair", "a struct template instantiated for int, filled by a braced list", "pairSum",
         "out", 1, 32, file=K / "class_template_pair.cu", buffers=(O("out", "device", "int32", 32),),
         reference=lambda b: {"out": np.full(32, 7, np.int32)}),
    Case("class_methods_counter", "a class with member functions, one const", "countUp", "out 10", 1, 32,
         file=K / "class_methods_counter.cu", buffers=(O("out", "device", "int32", 32),),
         reference=lambda b: {"out": np.full(32, 45, np.int32)}),
    *[Case(f"shared_memory_template_{dtype}", f"a block reduction through a SharedMemory<T> struct template ({dtype})",
           kernel, "smin smout 1000", 8, 128, file=K / "shared_memory_template.cu", module="smt",
           shared=128 * np.dtype(dtype).itemsize,
           buffers=(B("smin", "device", dtype, 1000, rand(62)), O("smout", "device", dtype, 8)),
           reference=lambda d: {"smout": block_tree_sums(d["smin"], 128)})
      for kernel, dtype in (("reduceInt", "int32"), ("reduceFloat", "float32"), ("reduceDouble", "float64"))],
    Case("linked_list_link_and_walk", "a self-referential struct: a block links a list in device memory, then walks it",
         "linkAndWalk", "lnodes lkeys lsums llens 300", 1, 128, file=K / "linked_list_walk.cu",
         buffers=(B("lnodes", "device", "int32", 300 * 4), B("lkeys", "device", "int32", 300, rand(63)),
                  O("lsums", "device", "int32", 300), O("llens", "device", "int32", 300)),
         reference=ref_link_and_walk),
]

RUNNABLE = [c for c in CASES if not c.refused]
REFUSED = [c for c in CASES if c.refused]

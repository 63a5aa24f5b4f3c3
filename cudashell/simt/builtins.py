"""The device functions a kernel may call that the program does not define: CUDA's math, atomics, warp
intrinsics, barriers, assert. Each takes the machine, the call and the active lanes; arguments reach it
already converted to the declared parameter types (prelude.py), so dispatch is by name and dtype."""

from __future__ import annotations

import re

import numpy as np

from .memory import WARP, Fault
from .prelude import VECTOR_MAKERS
from .values import dtype_of, fma

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def _args(mach, e, m):
    return [mach.ev(a, m) for a in e.args]


def _where(e) -> str:
    return f"{e.loc[0]}:{e.loc[1]}:{e.loc[2]}"


def _exact(fn):
    """A math function computed in double and rounded once to the argument's type."""
    def run(mach, e, m):
        args = _args(mach, e, m)
        dt = dtype_of(e.type)
        with np.errstate(all="ignore"):
            r = fn(*[np.asarray(a, np.float64) for a in args])
        return np.asarray(r).astype(dt)
    return run


MATH = {
    "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "fabs": np.abs, "floor": np.floor, "ceil": np.ceil,
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "trunc": np.trunc, "round": lambda x: np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)),
    "cbrt": np.cbrt, "fmin": np.fmin, "fmax": np.fmax, "pow": np.power, "fmod": np.fmod, "atan2": np.arctan2,
    "hypot": np.hypot,
}


def _sqrt(mach, e, m):  # correctly rounded on the GPU, and in numpy at the argument's own precision
    (x,) = _args(mach, e, m)
    with np.errstate(all="ignore"):
        return np.sqrt(np.asarray(x, dtype_of(e.type)))


def _minmax(fn):
    def run(mach, e, m):
        a, b = _args(mach, e, m)
        return np.asarray(fn(a, b)).astype(dtype_of(e.type))[()]
    return run


def _abs(mach, e, m):
    (x,) = _args(mach, e, m)
    return np.abs(np.asarray(x)).astype(dtype_of(e.type))


def _fma(mach, e, m):
    a, b, c = _args(mach, e, m)
    return fma(a, b, c, dtype_of(e.type))


def _fdividef(mach, e, m):
    a, b = _args(mach, e, m)
    with np.errstate(all="ignore"):
        return (np.asarray(a, F32) / np.asarray(b, F32)).astype(F32)


def _saturate(mach, e, m):
    (x,) = _args(mach, e, m)
    return np.clip(np.nan_to_num(np.asarray(x, F32), nan=0.0), 0.0, 1.0).astype(F32)


# ------------------------------------------------------------------ bits
def _popc(mach, e, m):
    (x,) = _args(mach, e, m)
    x = np.asarray(x).astype(np.uint64)
    return np.bitwise_count(x).astype(np.int32) if hasattr(np, "bitwise_count") else \
        np.vectorize(lambda v: bin(int(v)).count("1"))(x).astype(np.int32)


def _clz(bits):
    def run(mach, e, m):
        (x,) = _args(mach, e, m)
        x = np.asarray(x).astype(np.int64 if bits == 64 else np.int32).view(np.uint64 if bits == 64 else np.uint32)
        xf = x.astype(np.float64)
        lz = np.where(x == 0, bits, bits - 1 - np.floor(np.log2(np.where(x == 0, 1, xf))).astype(np.int64))
        # float log2 can be off by one near powers of two for 64-bit values: fix with an exact check
        lz = np.asarray(lz, np.int64)
        top = np.where(lz < bits, bits - 1 - lz, 0).astype(np.uint64)
        fix = (x != 0) & ((x.astype(np.uint64) >> top) == 0)
        lz = np.where(fix, lz + 1, lz)
        return lz.astype(np.int32)
    return run


def _ffs(bits):
    def run(mach, e, m):
        (x,) = _args(mach, e, m)
        u = np.asarray(x).astype(np.int64).astype(np.uint64) & np.uint64((1 << bits) - 1 if bits < 64 else ~0 & (2**64 - 1))
        low = u & (~u + np.uint64(1))
        pos = np.where(u == 0, 0, np.round(np.log2(np.where(u == 0, 1, low).astype(np.float64))).astype(np.int64) + 1)
        return np.asarray(pos).astype(np.int32)
    return run


def _brev(mach, e, m):
    (x,) = _args(mach, e, m)
    x = np.asarray(x).astype(np.uint32)
    out = np.zeros_like(x)
    for i in range(32):
        out |= ((x >> np.uint32(i)) & np.uint32(1)) << np.uint32(31 - i)
    return out


def _mul24(signed: bool):
    """__mul24 / __umul24: the low 32 bits of the product of the operands' low 24 bits (sign-extended for
    __mul24), as PTX's mul24.lo does."""
    def run(mach, e, m):
        a, b = (np.asarray(v).astype(np.int64) & 0xFFFFFF for v in _args(mach, e, m))
        if signed:
            a, b = (np.where(v & 0x800000, v - 0x1000000, v) for v in (a, b))
        return ((a * b) & 0xFFFFFFFF).astype(np.uint32).view(np.int32 if signed else np.uint32)
    return run


def _bitcast(dst):
    def run(mach, e, m):
        (x,) = _args(mach, e, m)
        x = np.asarray(x).astype(dtype_of(e.args[0].type))
        return x.view(np.dtype(dst)) if x.ndim else x.reshape(1).view(np.dtype(dst))[0]
    return run


# ------------------------------------------------------------------ warps
def _lane_in_warp(mach):
    """Each lane's number in its warp (made once a launch shape: shuffles and votes ask for it at every call)."""
    if mach.lane_in_warp is None:
        mach.lane_in_warp = mach.shape["lane_in_warp"] = mach.lane & (WARP - 1)
    return mach.lane_in_warp


def shuffle(mach, v, which, width, kind: str):
    """Each lane's read of `v` from another lane of its `width`-lane segment of the warp, as shfl.sync does it."""
    v = np.broadcast_to(np.asarray(v), (mach.n,))
    key = (kind, int(which), int(width)) if np.ndim(which) == 0 and np.ndim(width) == 0 else None
    if key is not None and key in mach.shuffles:  # the same offset again (a reduction's steps): its lanes
        return v[mach.shuffles[key]]
    lane = _lane_in_warp(mach)
    width = np.asarray(width).astype(np.int64)
    seg = lane & ~(width - 1)
    which = np.asarray(which).astype(np.int64)
    if kind == "idx":
        src = seg + (which & (width - 1))
    elif kind == "up":
        src = lane - which
        src = np.where(src < seg, lane, src)
    elif kind == "down":
        src = lane + which
        src = np.where(src >= seg + width, lane, src)
    else:  # PTX's shfl.bfly: a lane past the last of its segment reads its own value
        src = lane ^ which
        src = np.where(src >= seg + width, lane, src)
    source = mach.lane - lane + src
    if key is not None:  # kept as int32 (a chunk's lanes are far fewer than 2^31): half the bytes kept
        source = mach.shuffles[key] = source.astype(np.int32)
    return v[source]


def _shfl(kind):
    def run(mach, e, m):
        _mask, v, which, width = _args(mach, e, m)
        return shuffle(mach, v, which, width, kind)
    return run


def _warp_reduce(op):
    """__reduce_OP_sync (sm_80+): the operation over the values of the mask's lanes, every one of them given it."""
    def run(mach, e, m):
        mask, value = _args(mach, e, m)
        dt = dtype_of(e.type)
        lane = _lane_in_warp(mach)
        member = (((np.asarray(mask).astype(np.uint64) >> lane.astype(np.uint64)) & np.uint64(1)) != 0) & m
        v = np.broadcast_to(np.asarray(value).astype(dt), (mach.n,)).reshape(-1, WARP)
        inside = member.reshape(-1, WARP)
        if op == "add":
            r = np.where(inside, v.astype(np.int64), 0).sum(1).astype(dt)
        else:
            ufunc, start = {"min": (np.minimum, np.iinfo(dt).max), "max": (np.maximum, np.iinfo(dt).min),
                            "and": (np.bitwise_and, dt.type(np.iinfo(dt).max)), "or": (np.bitwise_or, 0),
                            "xor": (np.bitwise_xor, 0)}[op]
            r = ufunc.reduce(np.where(inside, v, dt.type(start)), axis=1).astype(dt)
        return np.repeat(r, WARP)
    return run


def _vote(kind):
    def run(mach, e, m):
        mask, pred = _args(mach, e, m)
        pred = np.broadcast_to(np.asarray(pred) != 0, (mach.n,)) & m
        lane = _lane_in_warp(mach)
        member = ((np.asarray(mask).astype(np.uint64) >> lane.astype(np.uint64)) & np.uint64(1)) != 0
        bits = np.where(pred & member, np.left_shift(np.uint64(1), lane.astype(np.uint64)), np.uint64(0))
        ballot = bits.reshape(-1, WARP).sum(1, dtype=np.uint64).astype(np.uint32)
        per_lane = np.repeat(ballot, WARP)
        if kind == "ballot":
            return per_lane
        if kind == "any":
            return (per_lane != 0).astype(np.int32)
        voters = np.where(m & member, np.left_shift(np.uint64(1), lane.astype(np.uint64)), np.uint64(0))
        need = np.repeat(voters.reshape(-1, WARP).sum(1, dtype=np.uint64).astype(np.uint32), WARP)
        return (per_lane == need).astype(np.int32)
    return run


def _activemask(mach, e, m):
    lane = _lane_in_warp(mach)
    bits = np.where(m, np.left_shift(np.uint64(1), lane.astype(np.uint64)), np.uint64(0))
    return np.repeat(bits.reshape(-1, WARP).sum(1, dtype=np.uint64).astype(np.uint32), WARP)


# ------------------------------------------------------------------ barriers and checks
def barrier(mach, m, loc, what: str, width: int) -> None:
    """All threads of each `width`-thread group (a block, or a tile of a warp) that any of them reached must
    arrive (threads that have exited count as arrived); racecheck then orders what they did before it."""
    arrived = m | mach.kernel_frame.ret | ~mach.valid
    per_group = arrived.reshape(-1, width)
    came = m.reshape(-1, width).any(1)
    short = came & ~per_group.all(1)
    if short.any():
        g = int(np.flatnonzero(short)[0])
        missing = int(np.flatnonzero(~per_group[g])[0]) + g * width
        group = "a block" if width == mach.tpb else f"a tile of {width} threads"
        raise Fault("DIVERGENT_BARRIER", mach.mem.describe(
            missing, None, 0, f"{what} reached by only some threads of {group}", loc,
            "this thread did not reach it (a barrier inside a branch some threads skip)"))
    if mach.mem.watch is not None:
        if width == mach.tpb:
            mach.mem.watch.barrier()
        else:
            mach.mem.watch.tile_barrier(m, width)


def _syncthreads(mach, e, m):
    barrier(mach, m, e.loc, "__syncthreads()", mach.tpb)
    if e.name != "__syncthreads":  # __syncthreads_count / _and / _or: a block-wide reduction of the predicate
        (pred,) = _args(mach, e, m)
        p = (np.broadcast_to(np.asarray(pred), (mach.n,)) != 0) & m
        counts = p.reshape(-1, mach.tpb).sum(1)
        members = m.reshape(-1, mach.tpb).sum(1)
        value = {"__syncthreads_count": counts, "__syncthreads_and": (counts == members).astype(np.int64),
                 "__syncthreads_or": (counts > 0).astype(np.int64)}[e.name]
        return np.repeat(value, mach.tpb).astype(np.int32)
    return None


def _syncwarp(mach, e, m):
    """Orders, for racecheck, what the warp's lanes did before it (a mask's lanes must all call it: not checked)."""
    _args(mach, e, m)
    if mach.mem.watch is not None:
        mach.mem.watch.tile_barrier(m, WARP)


def _ldg(mach, e, m):
    """A load through the read-only cache: the same bytes."""
    (ptr,) = _args(mach, e, m)
    return mach.load_by("readonly", ptr, e.type, m, e.loc)


def _nothing(mach, e, m):
    _args(mach, e, m)
    return None


def _assert(mach, e, m):
    cond = np.broadcast_to(np.asarray(mach.ev(e.args[0], m)) != 0, (mach.n,))
    failed = m & ~cond
    if failed.any():
        lane = int(np.flatnonzero(failed)[0])
        raise Fault("CUDA_ERROR_ASSERT", mach.mem.describe(
            lane, None, 0, f"Assertion `{e.args[1].value}` failed", e.loc, ""))
    return None


# ------------------------------------------------------------------ atomics
def _atomic(op):
    def run(mach, e, m):
        args = _args(mach, e, m)
        ptr_t = e.args[0].type
        dt = dtype_of(ptr_t.to)
        lanes = np.flatnonzero(m)
        addr = np.asarray(args[0], np.int64)
        addr = addr[lanes] if addr.ndim else np.full(len(lanes), addr, np.int64)

        def pick(v):
            v = np.asarray(v)
            return (v[lanes] if v.ndim else np.full(len(lanes), v)).astype(dt)
        if op == "cas":
            compare, value = pick(args[1]), pick(args[2])
        else:
            compare, value = None, pick(args[1])
        want = mach.discarding is not e
        old = mach.mem.atomic(op, addr, lanes, dt, e.loc, value, want, compare)
        out = np.zeros(mach.n, dt)
        out[lanes] = old
        return out
    return run


def _make_vector(mach, e, m):
    """make_float4(x, y, z, w) and the like: the vector built field by field in a slot of the calling frame (an
    aggregate's value is where it is)."""
    args = _args(mach, e, m)
    slot = mach.result_slot(e)
    for (_, ft, off), v in zip(e.type.fields, args):
        mach.store(slot + off, ft, v, m)
    return np.int64(slot)


BUILTINS = {
    "__syncthreads": _syncthreads, "__syncthreads_count": _syncthreads, "__syncthreads_and": _syncthreads,
    "__syncthreads_or": _syncthreads,
    "__syncwarp": _syncwarp, "__threadfence": _nothing, "__threadfence_block": _nothing,
    "__cush_assert": _assert, "__ldg": _ldg,
    "__popc": _popc, "__popcll": _popc, "__clz": _clz(32), "__clzll": _clz(64), "__ffs": _ffs(32),
    "__ffsll": _ffs(64), "__brev": _brev, "__mul24": _mul24(True), "__umul24": _mul24(False),
    "__fmaf_rn": _fma, "__fma_rn": _fma, "fmaf": _fma, "fma": _fma, "__fdividef": _fdividef,
    "__saturatef": _saturate,
    "__shfl_sync": _shfl("idx"), "__shfl_up_sync": _shfl("up"), "__shfl_down_sync": _shfl("down"),
    "__shfl_xor_sync": _shfl("xor"),
    "__ballot_sync": _vote("ballot"), "__any_sync": _vote("any"), "__all_sync": _vote("all"),
    "__activemask": _activemask,
    **{f"__reduce_{op}_sync": _warp_reduce(op) for op in ("add", "min", "max", "and", "or", "xor")},
    "min": _minmax(np.minimum), "max": _minmax(np.maximum), "abs": _abs, "llabs": _abs,
    "__float_as_int": _bitcast("int32"), "__int_as_float": _bitcast("float32"),
    "__float_as_uint": _bitcast("uint32"), "__uint_as_float": _bitcast("float32"),
    "__double_as_longlong": _bitcast("int64"), "__longlong_as_double": _bitcast("float64"),
}
for _name, _fn in MATH.items():
    BUILTINS[_name] = BUILTINS[_name + "f"] = _exact(_fn)
for _name in ("exp", "log", "sin", "cos", "pow", "log2", "tan"):  # the GPU's fast approximations: exact here
    BUILTINS[f"__{_name}f"] = BUILTINS[_name + "f"]
BUILTINS["__exp10f"] = _exact(lambda x: np.power(10.0, x))
BUILTINS["sqrt"] = BUILTINS["sqrtf"] = _sqrt
for _name in VECTOR_MAKERS:
    BUILTINS[_name] = _make_vector
for _op in ("Add", "Sub", "Exch", "Min", "Max", "Inc", "Dec", "And", "Or", "Xor", "CAS"):
    BUILTINS["atomic" + _op] = _atomic(_op.lower())


def known(name: str) -> bool:
    return name in BUILTINS


# ------------------------------------------------------------------ printf
_SPEC = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|z|j|t|L)?([diouxXeEfFgGcspa%])")


class Printf:
    """A device printf's format, rendered per thread as the GPU's printf buffer would print it."""

    def __init__(self, fmt: str):
        self.fmt = fmt

    def render(self, values: list, types: list, mem) -> str:
        out, k, pos = [], 0, 0
        values = list(values)
        for mt in _SPEC.finditer(self.fmt):
            out.append(self.fmt[pos:mt.start()])
            pos = mt.end()
            flags, width, prec, length, conv = mt.groups()
            if conv == "%":
                out.append("%")
                continue
            if width == "*" or prec == "*":  # the width or precision is an argument before the value
                taken = []
                for _ in range((width == "*") + (prec == "*")):
                    taken.append(int(values[k]) if k < len(values) else 0)
                    k += 1
                width = str(taken.pop(0)) if width == "*" else width
                prec = str(taken.pop(0)) if prec == "*" else prec
            if k >= len(values):
                out.append(mt.group(0))
                continue
            v = values[k]
            k += 1
            spec = "%" + flags + (width or "") + (f".{prec}" if prec is not None else "")
            if conv == "s":
                out.append((spec + "s") % (v.decode("utf-8", "replace") if isinstance(v, bytes) else "(string)"))
            elif conv == "p":
                out.append("0x%x" % int(np.int64(v).view(np.uint64)))
            elif conv == "c":
                out.append((spec + "c") % chr(int(v) & 0xFF))
            elif conv in "diuoxX":
                bits = {"hh": 8, "h": 16, "l": 64, "ll": 64, "z": 64, "j": 64, "t": 64}.get(length or "",
                                                                                      8 * np.asarray(v).dtype.itemsize)
                iv = int(v) & ((1 << bits) - 1)  # C reads the argument at the length the format names
                if conv in "di" and iv >= 1 << (bits - 1):
                    iv -= 1 << bits
                out.append((spec + ("d" if conv in "diu" else conv)) % iv)
            elif conv == "a":  # C's %a: no trailing zeros in the fraction
                mant, exp = float(v).hex().split("p")
                out.append(mant.rstrip("0").rstrip(".") + "p" + exp)
            else:
                out.append((spec + conv) % float(v))
        out.append(self.fmt[pos:])
        return "".join(out)

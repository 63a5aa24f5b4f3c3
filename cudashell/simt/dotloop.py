"""A dot-product loop run a window of rounds at a time: `for (int k = K0; k < END; ++k) acc += X * Y;` with `acc` a
float register and X, Y loads whose addresses step by the same amount each round (a tiled matrix multiply's inner
loop, a naive one's, a convolution's). Statement by statement, each round is a dozen NumPy calls of Python's pace
over the chunk's lanes; here the rounds' addresses come from three evaluations (the first round, the second, the
last: affine in k, which the tree is checked to be), the loads of every round are gathered at once where every
block reads alike from shared memory (else each round's load takes the ordinary path), and the fma chain runs
rounded once a round as fma.rn is. Nothing else differs: the same checks before any byte moves (a round that
would fault leaves the loop to the ordinary path, which names the thread and line), the same bank wavefronts,
sectors, racecheck records and instruction counts as the rounds one by one would make, the same bits."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from . import ir
from .ctype import Array, Pointer, Scalar
from .memory import SHARED_BASE, WINDOW, _wavefronts
from .values import fma

MOST_ROUNDS = 1 << 16  # longer loops go round by round: the ordinary path calls a loop runaway
WINDOW_BYTES = 1 << 20  # a window's float64 sums: rounds × lanes × 8 bytes at most (a launch's memory stays small)
FLOAT = Scalar("float32")
PURE = (ir.Const, ir.Var, ir.Special, ir.Cast, ir.Decay, ir.Binary, ir.Unary)  # a load (Index) is not
ADDRESS_OPS = ("+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^")
HALF_MASK, HALF = (1 << 29) - 1, 1 << 28  # a float64's low 29 bits when it lies halfway between two floats


@dataclass(eq=False)
class Plan:
    k: str  # the counter (a register of an integer type)
    kt: Scalar
    end: ir.Expr  # compared with k, evaluated once: it reads nothing the loop writes
    inclusive: bool  # `<=`
    acc: str  # the float register summed into
    x: ir.Expr  # the two loads (Index or `*p`), in the order the product names them
    y: ir.Expr
    stmts: int  # statements a round runs (the body, and its block if it has one)
    reads: tuple  # the registers the loads' addresses read, k aside: where they are the same objects as at the
    # loop's last entry (values are never changed in place), so are the addresses


_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop node → Plan, or None (not such a loop)


def plan_of(s: ir.Loop) -> Plan | None:
    try:
        return _plans[s]
    except KeyError:
        p = _plans[s] = _analyse(s)
        return p


def _analyse(s: ir.Loop) -> Plan | None:
    init = s.init.stmts[0] if type(s.init) is ir.Block and len(s.init.stmts) == 1 else s.init
    if type(init) is ir.Decl and not init.var.in_memory and type(init.init) is ir.Const:
        k, kt = init.var.name, init.var.type
    elif type(init) is ir.ExprStmt and type(init.expr) is ir.Assign and init.expr.op == "=" and \
            _reg(init.expr.target) and type(init.expr.value) is ir.Const:
        k, kt = init.expr.target.name, init.expr.target.type
    else:
        return None
    if not _integer(kt) or not s.test_first:
        return None
    c = s.cond
    if not (type(c) is ir.Binary and c.op in ("<", "<=") and _reg(c.a) and c.a.name == k and c.b.type == kt):
        return None
    st = s.step
    if not ((type(st) is ir.Unary and st.op in ("++pre", "post++") and _reg(st.expr) and st.expr.name == k) or
            (type(st) is ir.Assign and st.op == "+=" and _reg(st.target) and st.target.name == k and
             type(st.value) is ir.Const and st.value.value == 1)):
        return None
    body, stmts = s.body, 1
    if type(body) is ir.Block and len(body.stmts) == 1:
        body, stmts = body.stmts[0], 2
    if type(body) is not ir.ExprStmt or type(body.expr) is not ir.Assign:
        return None
    a = body.expr
    ft = a.target.type
    if not (a.op == "+=" and _reg(a.target) and ft == FLOAT and a.value.type == ft and
            type(a.value) is ir.Binary and a.value.op == "*" and a.value.a.type == ft and a.value.b.type == ft):
        return None
    acc = a.target.name
    if acc == k or _reads(c.b, {k, acc}) or not _pure(c.b):
        return None
    x, y = a.value.a, a.value.b
    for load in (x, y):
        if not (type(load) is ir.Index or (type(load) is ir.Unary and load.op == "*")):
            return None
        inner = (load.base, load.index) if type(load) is ir.Index else (load.expr,)
        if _reads(load, {acc}) or any(_degree(e, k) is None for e in inner):
            return None
    reads = tuple(sorted(_names(x, k) | _names(y, k)))
    return Plan(k, kt, c.b, c.op == "<=", acc, x, y, stmts, reads)


def _integer(t) -> bool:
    return isinstance(t, Scalar) and t.name.startswith(("int", "uint"))


def _reg(e) -> bool:
    return type(e) is ir.Var and not e.in_memory


def _children(e) -> list:
    return [v for v in vars(e).values() if isinstance(v, ir.Expr)]


def _reads(e, names: set) -> bool:
    if type(e) is ir.Var:
        return e.name in names
    return any(_reads(c, names) for c in _children(e))


def _names(e, k: str) -> set:
    if type(e) is ir.Var:
        return {e.name} - {k}
    return set().union(*(_names(c, k) for c in _children(e)))


def _pure(e) -> bool:
    """Computes a value and reads no memory (an array's name is its address): evaluating it again changes nothing
    and counts nothing."""
    t = type(e)
    if t not in PURE:
        return False
    if t is ir.Var:
        return not e.in_memory or isinstance(e.type, Array)
    if t is ir.Unary and e.op != "-":
        return False  # a load, ++, &, …
    if t is ir.Binary and e.op not in ADDRESS_OPS:
        return False
    if t is ir.Decay:
        inner = e.expr
        return (type(inner) is ir.Var and isinstance(inner.type, Array)) or \
            (type(inner) is ir.Index and _pure(inner.base) and _pure(inner.index))
    return all(_pure(c) for c in _children(e))


def _degree(e, k: str):
    """0 where `e` does not involve k, 1 where it is affine in k (sums, differences, products by what does not
    involve it, integer widenings), None otherwise (or where it is not pure)."""
    if not _pure(e):
        return None
    if not _reads(e, {k}):
        return 0
    t = type(e)
    if t is ir.Var:
        return 1
    if t is ir.Cast:
        src = e.expr.type
        wide = _integer(src) and (isinstance(e.type, Pointer) or (_integer(e.type) and e.type.size >= src.size))
        return _degree(e.expr, k) if wide else None
    if t is ir.Unary:  # negation
        return _degree(e.expr, k)
    if t is ir.Decay:  # &a[f(k)][0]
        return _add(_degree(e.expr.base, k), _degree(e.expr.index, k))
    if t is ir.Binary:
        a, b = _degree(e.a, k), _degree(e.b, k)
        if e.op in ("+", "-"):
            return _add(a, b)
        if e.op == "*" and None not in (a, b) and a + b == 1:
            return 1
    return None


def _add(a, b):
    return None if a is None or b is None else max(a, b)


def run(mach, s: ir.Loop, m, warps: int) -> bool:
    """Run loop `s` (its init done) over the lanes `m` (`warps` of them) if it is a dot-product loop whose rounds
    can go a window at a time; False (nothing done) where the ordinary path must run it."""
    p = plan_of(s)
    mem = mach.mem
    if p is None or mem.trace is not None:
        return False
    env = mach.frame.env
    before = k0 = env.get(p.k)
    end = mach.ev(p.end, m)
    if np.ndim(k0) or np.ndim(end):
        return False
    k0, end = int(k0), int(end)
    if p.inclusive and end >= np.iinfo(p.kt.dtype).max:  # `k <= INT_MAX` never ends
        return False
    rounds = end - k0 + (1 if p.inclusive else 0)
    if rounds < 2 or rounds > MOST_ROUNDS:
        return False
    dt = p.kt.dtype.type
    full = bool(m.all())
    reads = tuple(env.get(name) for name in p.reads)
    memo = mach.dot_memo.get(s)  # the loop entered again with the same registers (a tile loop's next tile)
    if memo is not None and memo[0] is mach.frame and memo[1] == (k0, rounds, full) and \
            all(a is b for a, b in zip(memo[2], reads)):
        addrs, gathers = memo[3], memo[4]
    else:
        try:
            addrs = [_rounds(mach, p, load, k0, rounds, m) for load in (p.x, p.y)]
        finally:
            env[p.k] = before
        if None in addrs:
            return False
        gathers = [_shared_rounds(mach, a0, step, rounds, m) for a0, step in addrs]
        if any(g is False for g in gathers):
            return False
        mach.dot_memo[s] = (mach.frame, (k0, rounds, full), reads, addrs, gathers)
    _run_rounds(mach, p, addrs, gathers, rounds, m, warps)
    mach.set_reg(p.k, dt(k0 + rounds), m)
    return True


def _rounds(mach, p: Plan, load, k0: int, rounds: int, m):
    """(first round's addresses, step a round) of a load: from the first, second and last rounds' (affine in k, so
    the last checks that no index wrapped); None where it did."""
    dt = p.kt.dtype.type
    env = mach.frame.env
    at = []
    for k in (k0, k0 + 1, k0 + rounds - 1):
        env[p.k] = dt(k)
        at.append(np.asarray(mach.place(load, m)[1], np.int64))
    step = at[1] - at[0]
    if not np.array_equal(at[0] + (rounds - 1) * step, at[2]):
        return None
    if step.ndim and (step == step.flat[0]).all():
        step = step.flat[0]
    return at[0], step


def _shared_rounds(mach, a0, step, rounds: int, m):
    """Where every block of the chunk reads alike from shared memory, within bounds and aligned: the block's
    offsets as a grid of its threads' rows and columns (x), narrowed to one column where a row reads one element
    (`as[ty][k]`) or to one row where a column does (`bs[k][tx]`), with the step and the wavefronts of one round
    (a shift by whole words moves every lane to the next bank alike); None where each round's load takes the
    ordinary path; False where a round would fault (the ordinary path names it)."""
    mem = mach.mem
    if np.ndim(a0) == 0 or np.ndim(step) or not m.all():
        return None
    every = mem._every_block(a0, mach.lane)
    if not every:
        return None
    last = int(step) * (rounds - 1)
    lo, hi = int(a0[:every].min()) + min(0, last), int(a0[:every].max()) + max(0, last)
    if lo < SHARED_BASE or hi >= SHARED_BASE + WINDOW:
        return None if hi < SHARED_BASE - WINDOW or lo >= SHARED_BASE + WINDOW else False
    off = a0[:every] - SHARED_BASE
    if (off & 3).any() or step % 4 or lo - SHARED_BASE < 0 or hi - SHARED_BASE + 4 > mem.shared_bytes:
        return False
    lanes = mach.lane[:every]
    key = (off.tobytes(), lanes.tobytes(), 4)
    counts = mem.patterns.get(key)
    if counts is None:
        counts = mem.patterns[key] = _wavefronts(off, lanes)
    grid = off.reshape(_grid(mach))
    if (grid == grid[:, :1]).all():
        grid = grid[:, :1]
    elif (grid == grid[:1, :]).all():
        grid = grid[:1, :]
    return off, grid, int(step), counts


def _grid(mach) -> tuple[int, int]:
    """A block's lanes as (rows, columns): columns of blockDim.x threads where the block is whole warps of them."""
    bx = int(mach.special["blockDim.x"])
    return (mach.tpb // bx, bx) if mach.valid[:mach.tpb].all() and mach.tpb % bx == 0 else (1, mach.tpb)


def _run_rounds(mach, p: Plan, addrs, gathers, rounds: int, m, warps: int) -> None:
    mem = mach.mem
    blocks = mem.shared.shape[0]
    shape = (blocks,) + _grid(mach)
    view = mem.shared.view(np.float32)
    acc = np.broadcast_to(np.asarray(mach.frame.env[p.acc], np.float32), (mach.n,)).reshape(shape)
    window = max(1, min(rounds, WINDOW_BYTES // (8 * mach.n)))
    loads = (p.x, p.y)
    lanes = mach.lane[:mach.tpb]
    for first in range(0, rounds, window):
        w = min(window, rounds - first)
        vals, offsets = [], []  # each load's values, and (for racecheck) each round's byte offsets
        for g in gathers:
            if g is None:
                vals.append(np.empty((blocks, w) + shape[1:], np.float32))
                offsets.append(None)
            else:
                off, grid, st, (req, wav) = g
                shifts = st * np.arange(first, first + w, dtype=np.int64)
                mem.traffic.shared_requests += req * blocks * w
                mem.traffic.shared_wavefronts += wav * blocks * w
                part = (grid[None] + shifts[:, None, None]) >> 2  # (rounds, rows or 1, columns or 1)
                vals.append(np.take(view, part, axis=1))  # (blocks, rounds, rows or 1, columns or 1)
                offsets.append((off[None, :] + shifts[:, None]) if mem.watch is not None else None)
        for j in range(w):  # each round's loads in the order the statement makes them: a fault names the first
            for i, ((a0, step), g) in enumerate(zip(addrs, gathers)):
                if g is None:
                    vals[i][:, j] = _ordinary(mach, loads[i], a0 + step * (first + j), m).reshape(shape)
                elif mem.watch is not None:
                    mem.watch.shared(lanes // mem.tpb, offsets[i][j], lanes, 4, loads[i].loc, False,
                                     every_block=blocks)
        x, y = (v.astype(np.float64) for v in vals)  # exact; a row's or a column's value broadcast below
        acc = _chain(x, y, acc, (blocks, w) + shape[1:])
    mach.statements += rounds * p.stmts * warps
    mach.set_reg(p.acc, acc.reshape(-1), m)


def _chain(x, y, acc, shape):
    """acc ← fma.rn(x[:, j], y[:, j], acc) for each round j of the window (x, y: (blocks, rounds, …)): the
    product exact in float64, the sum rounded to float64 then to float32 — twice, which differs from once only
    where the float64 sum lies halfway between two floats: those lanes are done again by values.fma."""
    sums = np.empty((shape[1], shape[0]) + shape[2:])  # a round's sums contiguous: half the time of a strided add
    np.multiply(x.transpose(1, 0, 2, 3), y.transpose(1, 0, 2, 3), out=sums)
    start, acc = acc, np.array(np.broadcast_to(acc, sums.shape[1:]), np.float32)
    for s in sums:
        np.add(s, acc, out=s)
        np.copyto(acc, s, casting="same_kind")
    low = sums.view(np.int64)
    np.bitwise_and(low, HALF_MASK, out=low)
    halfway = low == HALF
    if halfway.any():
        at = np.nonzero(halfway.any(axis=0))
        redo = np.broadcast_to(start, acc.shape)[at]
        for j in range(shape[1]):
            redo = fma(np.broadcast_to(x[:, j], acc.shape)[at], np.broadcast_to(y[:, j], acc.shape)[at], redo,
                       np.dtype(np.float32))
        acc[at] = redo
    return acc


def _ordinary(mach, load, addr, m):
    """One round's load of `load` at `addr` as the statement-by-statement path makes it."""
    t = load.type
    if type(load) is ir.Index and load.path:
        return mach.load_by(load.path, addr, t, m, load.loc)
    return mach.load_mem(addr, t, m, load.loc)

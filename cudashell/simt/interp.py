"""The SIMT interpreter: a launch's threads run as NumPy lanes, many blocks at once, every statement for
every lane that is active there (a mask per branch; a loop runs until every lane has left it). Warps are 32
consecutive lanes of a block, so shuffles and votes read their neighbours; all lanes meet at each statement,
so a barrier only has to check that all of a block came."""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np

from . import contract, dotloop, ir
from .builtins import BUILTINS
from .builtins import Printf as PrintfFormat
from .coop import COOP
from .ctype import BOOL, VOID, Array, Pointer, Scalar, Struct, common, promote
from .memory import SHARED_BASE, WARP, Fault, Memory
from .values import convert, divide, dtype_of, remainder, shift, truthy

ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or,
         "^": np.bitwise_xor}
COMPARE = {"<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal, "==": np.equal,
           "!=": np.not_equal}


COPY_UNITS = {16: Scalar("V16"), 8: Scalar("uint64"), 4: Scalar("uint32"), 1: Scalar("uint8")}


def alignment(t) -> int:
    if isinstance(t, Struct):
        return t.align
    if isinstance(t, Array):
        return alignment(t.elem)
    return t.size


def copy_unit(t) -> int:
    """The bytes of one access when an aggregate is copied whole."""
    unit = min(alignment(t), 16)
    if unit >= 8 and t.size % unit == 0:
        return unit
    return 4 if t.size % 4 == 0 else 1


FUSED_CALLS = {"fmaf", "fma"}  # llvm.fma: an fma node the back end fuses through (__fmaf_rn is an intrinsic it keeps)
RUNAWAY_ROUNDS, RUNAWAY_SECONDS = 100_000, 10.0  # a loop past both is taken for one that never ends


def active_warps(m: np.ndarray) -> int:
    """The warps with a lane in the mask: a warp's 32 bools are four 8-byte words, OR-ed as columns (ten times
    faster than `any` along each warp's row)."""
    if m.all():
        return len(m) // WARP
    w = m.view(np.uint64).reshape(-1, WARP // 8)
    return int(np.count_nonzero(w[:, 0] | w[:, 1] | w[:, 2] | w[:, 3]))


class Frame:
    def __init__(self, n: int):
        self.env: dict = {}
        self.addr: dict = {}  # in-memory variables → their local (or shared) address
        self.ret = np.zeros(n, bool)
        self.retval = None
        self.jumps: list = []  # [kind, mask] of the enclosing loops and switches: break / continue masks


class Machine:
    """Runs one kernel over a chunk of blocks: `lanes` lanes, `tpb` of them a block (whole warps)."""

    def __init__(self, program, memory: Memory, lanes: int, tpb: int, threads: int, block, grid, block_ids,
                 shared_layout: dict, report, shapes: dict | None = None):
        self.program = program
        self.mem = memory
        self.n = lanes
        self.tpb = tpb
        # what depends only on the chunk's shape is made once a launch (`shapes`, by lanes), never written to
        shape = (shapes if shapes is not None else {}).setdefault(lanes, {})
        if not shape:
            blocks = lanes // tpb
            t = np.arange(tpb, dtype=np.int64)  # one block's pattern, repeated for every block of the chunk
            bx, by, bz = block

            def per_lane(values, extent):  # a dimension of extent 1 is 0 for every lane: a scalar, no array
                return np.tile(values.astype(np.uint32), blocks) if extent > 1 else np.uint32(0)
            shape.update(lane=np.arange(lanes, dtype=np.int64), valid=np.tile(t < threads, blocks),
                         threads=(per_lane(t % bx, bx), per_lane((t // bx) % by, by), per_lane(t // (bx * by), bz)),
                         shuffles={})
        self.lane, self.valid = shape["lane"], shape["valid"]
        self.lane_in_warp = shape.get("lane_in_warp")  # lane % 32, made when a warp intrinsic first asks
        self.shape = shape
        self.shuffles: dict = shape["shuffles"]  # (kind, offset, width) of a uniform shuffle → the lane each reads
        bx, by, bz = block
        tx, ty, tz = shape["threads"]
        self.special = {"threadIdx.x": tx, "threadIdx.y": ty, "threadIdx.z": tz,
                        "blockDim.x": np.uint32(bx), "blockDim.y": np.uint32(by), "blockDim.z": np.uint32(bz),
                        "gridDim.x": np.uint32(grid[0]), "gridDim.y": np.uint32(grid[1]),
                        "gridDim.z": np.uint32(grid[2]), "warpSize": np.int32(WARP)}
        for axis, ids, extent in zip("xyz", block_ids, grid):
            self.special[f"blockIdx.{axis}"] = np.repeat(ids.astype(np.uint32), tpb) if extent > 1 else np.uint32(0)
        self.shared_layout = shared_layout  # shared variable name → offset in the block's shared memory
        self.report = report  # printf lines, warnings
        self.frames: list[Frame] = []
        self.statements = 0
        self.discarding = None
        self.dot_memo: dict = {}  # dot-product loop → what its last entry worked out (dotloop.run)
        self.started = time.perf_counter()

    # -------------------------------------------------------------- running
    def run(self, fn: ir.Function, args: list) -> None:
        f = Frame(self.n)
        self.frames.append(f)
        for p, a in zip(fn.params, args):
            self._bind(f, p, a)
        self.kernel_frame = f
        m = self.valid.copy()
        self.block(fn.body.stmts, m)
        self.frames.pop()

    def _bind(self, f: Frame, p: ir.Var, value) -> None:
        if p.in_memory:
            size = p.type.size
            addr = self.mem.push(size)
            f.addr[p.name] = addr
            if isinstance(p.type, (Struct, Array)):
                self._copy_struct(addr, value, p.type, self.valid, p.loc)
            else:
                self.store(addr, p.type, value, self.valid)
        else:
            f.env[p.name] = value

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def off(self) -> np.ndarray:
        f = self.frame
        out = f.ret
        for _, brk, cont in f.jumps:
            out = out | brk
            if cont is not None:
                out = out | cont
        return out

    def live(self, m):
        return m & ~self.off()

    # -------------------------------------------------------------- statements
    def block(self, stmts: list, m) -> None:
        for s in stmts:
            m = self.live(m)
            if not m.any():
                return
            self.stmt(s, m)

    def stmt(self, s, m) -> None:
        self.statements += active_warps(m)
        t = type(s)
        if t is ir.ExprStmt:
            self.discarding = s.expr  # an atomic whose old value nobody reads can skip computing it
            self.ev(s.expr, m)
            self.discarding = None
        elif t is ir.Block:
            self.block(s.stmts, m)
        elif t is ir.Decl:
            self.decl(s, m)
        elif t is ir.If:
            c = truthy(self.ev(s.cond, m))
            if np.ndim(c) == 0:
                if c:
                    self.stmt(s.then, m)
                elif s.other is not None:
                    self.stmt(s.other, m)
                return
            mt = m & c
            if mt.any():
                self.stmt(s.then, mt)
            if s.other is not None:
                me = self.live(m & ~c)
                if me.any():
                    self.stmt(s.other, me)
        elif t is ir.Loop:
            self.loop(s, m)
        elif t is ir.Return:
            f = self.frame
            if s.value is not None:
                v = self.ev(s.value, m)
                f.retval = v if f.retval is None else np.where(m, v, f.retval)
            f.ret = f.ret | m
        elif t is ir.Jump:
            for entry in reversed(self.frame.jumps):
                if s.kind == "break":
                    entry[1] |= m
                    return
                if entry[2] is not None:  # continue: the innermost loop
                    entry[2] |= m
                    return
        elif t is ir.Switch:
            self.switch(s, m)
        else:  # pragma: no cover - the front end makes no other kinds
            raise TypeError(t)

    def decl(self, s: ir.Decl, m) -> None:
        v = s.var
        f = self.frame
        if s.shared:
            f.addr[v.name] = SHARED_BASE + self.shared_layout[v.name]
            return
        if v.in_memory:
            if v.name not in f.addr:
                f.addr[v.name] = self.mem.push(max(v.type.size, 1))
            if s.init is not None:
                self.init_memory(f.addr[v.name], v.type, s.init, m)
            return
        if s.init is None:
            value = np.zeros((), dtype_of(v.type))[()]
        else:
            value = self.ev(s.init, m)
        self.set_reg(v.name, value, m)

    def init_memory(self, addr, t, init, m) -> None:
        if isinstance(init, ir.InitList):
            if isinstance(t, Struct):
                fields = t.fields
                for (name, ft, off), item in zip(fields, init.items):
                    self.init_memory(addr + off, ft, item, m)
                for name, ft, off in fields[len(init.items):]:
                    self.zero(addr + off, ft, m)
            else:
                for k, item in enumerate(init.items):
                    self.init_memory(addr + k * t.elem.size, t.elem, item, m)
                for k in range(len(init.items), t.n or 0):
                    self.zero(addr + k * t.elem.size, t.elem, m)
            return
        if isinstance(t, (Struct, Array)):
            self._copy_struct(addr, self.ev(init, m), t, m, init.loc)
            return
        self.store(addr, t, self.ev(init, m), m)

    def zero(self, addr, t, m):
        if isinstance(t, (Struct, Array)):
            for k in range(0, t.size, 1):
                self.store(addr + k, Scalar("uint8"), np.uint8(0), m)
        else:
            self.store(addr, t, np.zeros((), dtype_of(t))[()], m)

    def set_reg(self, name: str, value, m) -> None:
        env = self.frame.env
        env[name] = value if name not in env or m.all() else np.where(m, value, env[name])

    def loop(self, s: ir.Loop, m) -> None:
        if s.init is not None:
            self.stmt(s.init, m)
        if dotloop.plan_of(s) is not None and dotloop.run(self, s, m, active_warps(m)):  # warps counted only then
            return
        f = self.frame
        entry = [None, np.zeros(self.n, bool), np.zeros(self.n, bool)]
        f.jumps.append(entry)
        cur = m & ~f.ret  # the lanes still in the loop: each round's end takes out those that broke or returned
        first = True
        rounds = 0
        while True:
            rounds += 1
            if rounds % RUNAWAY_ROUNDS == 0 and time.perf_counter() - self.started > RUNAWAY_SECONDS:
                raise Fault("RUNAWAY_KERNEL", f"a loop at {s.loc[0]}:{s.loc[1]}:{s.loc[2]} ran {rounds} rounds "
                            f"({RUNAWAY_SECONDS:g} s on the simulator) without every thread leaving it")
            if s.cond is not None and (s.test_first or not first):
                c = truthy(self.ev(s.cond, cur))
                if np.ndim(c) == 0:  # a uniform condition (`k < T`): every lane stays, or every lane leaves
                    if not c:
                        break
                else:
                    cur &= c
            first = False
            if not cur.any():
                break
            entry[2][:] = False
            self.stmt(s.body, cur)
            cur = cur & ~(f.ret | entry[1])  # the step computes nothing that breaks or returns: as it left cur
            if s.step is not None and cur.any():
                self.ev(s.step, cur)
        f.jumps.pop()

    def switch(self, s: ir.Switch, m) -> None:
        value = self.ev(s.value, m)
        f = self.frame
        entry = [None, np.zeros(self.n, bool), None]
        f.jumps.append(entry)
        cases = [c for labels, _ in s.items for c in labels if c is not None]
        matched = np.zeros(self.n, bool)
        for c in cases:
            matched |= np.asarray(value == c)
        active = np.zeros(self.n, bool)
        for labels, stmt in s.items:
            for c in labels:
                active |= m & (np.asarray(value == c) if c is not None else ~matched)
            run = self.live(active)
            if run.any():
                self.stmt(stmt, run)
        f.jumps.pop()

    # -------------------------------------------------------------- memory and places
    def place(self, e, m):
        """Where an lvalue is: ("reg", name) or ("mem", address(es), type)."""
        t = type(e)
        if t is ir.Var:
            if e.in_memory or e.name in self.frame.addr:
                return ("mem", self.addr_of(e.name), e.type)
            return ("reg", e.name, e.type)
        if t is ir.Unary and e.op == "*":
            return ("mem", self.ev(e.expr, m), e.type)
        if t is ir.Index:
            base = self.ev(e.base, m)
            idx = self.ev(e.index, m)
            size = e.type.size
            if np.ndim(idx) == 0:
                return ("mem", np.asarray(base, np.int64) + np.asarray(idx).astype(np.int64) * size, e.type)
            addr = np.asarray(idx).astype(np.int64)  # then multiplied in place: twice as fast as a multiply
            addr *= size  # that casts as it goes
            addr += np.asarray(base, np.int64)
            return ("mem", addr, e.type)
        if t is ir.Member:
            if e.arrow or type(e.base) not in (ir.Var, ir.Index, ir.Member, ir.Unary):
                base = self.ev(e.base, m)  # a pointer, or a struct that is a value (a call's): its address
            else:
                base = self.place(e.base, m)[1]
            return ("mem", np.asarray(base, np.int64) + e.offset, e.type)
        raise Fault("NOT_SUPPORTED_ON_SIM", f"{e.loc[0]}:{e.loc[1]}:{e.loc[2]}: not an lvalue")

    def addr_of(self, name: str) -> int:
        """Where an in-memory variable is: in its frame, (file-scope __shared__) in the block's shared memory, or
        (a module's __constant__/__device__ variable) where the module's load put it."""
        addr = self.frame.addr.get(name)
        if addr is not None:
            return addr
        offset = self.shared_layout.get(name)
        return SHARED_BASE + offset if offset is not None else self.program.addresses[name]

    def load(self, p, m, loc=None):
        if p[0] == "reg":
            return self.frame.env[p[1]]
        t = p[2]
        if isinstance(t, (Struct, Array)):
            return p[1]  # an aggregate's value is where it is
        return self.load_mem(p[1], t, m, loc)

    def load_mem(self, addr, t, m, loc=None):
        dt = dtype_of(t)
        if m.all():  # every lane: no gathering of addresses, no scattering of values
            vals = self.mem.access(addr, self.lane, dt, loc, False)
        else:
            lanes = np.flatnonzero(m)
            a = addr if np.ndim(addr) == 0 else np.asarray(addr)[lanes]
            got = self.mem.access(a, lanes, dt, loc, False)
            vals = np.zeros(self.n, dt)
            vals[lanes] = got
        if isinstance(t, Scalar) and t.name == "bool":
            return vals != 0
        return vals

    def load_by(self, path: str, addr, t, m, loc=None):
        """A load by the read-only data path (`__ldg`, a `const T* __restrict__` parameter) or the constant cache
        (a __constant__ variable by its name): the same bytes, counted as that path moves them."""
        self.mem.path = path
        try:
            return self.load_mem(addr, t, m, loc)
        finally:
            self.mem.path = ""

    def store(self, addr, t, value, m, loc=None) -> None:
        dt = dtype_of(t)
        v = np.asarray(value).astype(dt, copy=False)
        if m.all():
            self.mem.access(addr, self.lane, dt, loc, True, v)
            return
        lanes = np.flatnonzero(m)
        a = addr if np.ndim(addr) == 0 else np.asarray(addr)[lanes]
        self.mem.access(a, lanes, dt, loc, True, v[lanes] if v.ndim else v)

    def _copy_struct(self, dst, src, t, m, loc) -> None:
        """Aggregates are copied in the widest accesses their alignment allows, as nvcc's vector loads and stores
        do: a float4 (16-aligned) is one 16-byte access a lane, a double2 one, a float2 one 8-byte access; other
        aggregates in 4-byte words where their size allows."""
        size = t.size
        step = copy_unit(t)
        dt = COPY_UNITS[step]
        for k in range(0, size, step):
            self.store(np.asarray(dst, np.int64) + k, dt, self.load_mem(np.asarray(src, np.int64) + k, dt, m, loc), m,
                       loc)

    def assign(self, p, value, m, loc) -> None:
        if p[0] == "reg":
            self.set_reg(p[1], value, m)
        elif isinstance(p[2], (Struct, Array)):
            self._copy_struct(p[1], value, p[2], m, loc)
        else:
            self.store(p[1], p[2], value, m, loc)

    # -------------------------------------------------------------- expressions
    def ev(self, e, m):
        t = type(e)
        if t is ir.Const:
            return e.value
        if t is ir.Var:
            return self.load(self.place(e, m), m, e.loc)
        if t is ir.Cast:
            v = self.ev(e.expr, m)
            if e.type == VOID:
                return None
            return convert(v, e.expr.type, e.type)
        if t is ir.Binary:
            return self.binary(e, m)
        if t is ir.Index or t is ir.Member or (t is ir.Unary and e.op == "*"):
            p = self.place(e, m)
            if isinstance(p[2], (Struct, Array)):
                return p[1]
            if t is not ir.Unary and e.path:
                return self.load_by(e.path, p[1], p[2], m, e.loc)
            return self.load_mem(p[1], p[2], m, e.loc)
        if t is ir.Special:
            return self.special[e.name]
        if t is ir.Assign:
            return self.assign_expr(e, m)
        if t is ir.Unary:
            return self.unary(e, m)
        if t is ir.Decay:
            inner = e.expr
            if type(inner) is ir.Var:
                return np.int64(self.addr_of(inner.name))
            return self.place(inner, m)[1]
        if t is ir.Cond:
            c = truthy(self.ev(e.cond, m))
            if np.ndim(c) == 0:
                return self.ev(e.a if c else e.b, m)
            ma, mb = m & c, m & ~c
            a = self.ev(e.a, ma) if ma.any() else 0
            b = self.ev(e.b, mb) if mb.any() else 0
            if e.type == VOID:  # `c ? f() : g()` for their effects
                return None
            if isinstance(e.type, Struct):
                return np.where(c, a, b)
            return np.where(c, a, b).astype(dtype_of(e.type), copy=False) if e.type != BOOL else np.where(c, a, b)
        if t is ir.Call:
            return self.call(e, m)
        if t is ir.Printf:
            self.printf(e, m)
            return np.int32(0)
        raise Fault("NOT_SUPPORTED_ON_SIM", f"{e.loc[0]}:{e.loc[1]}:{e.loc[2]}: {t.__name__} is not runnable")

    def binary(self, e: ir.Binary, m):
        op = e.op
        if op == "&&" or op == "||":
            a = truthy(self.ev(e.a, m))
            rest = m & (a if op == "&&" else ~a)
            if np.ndim(a) == 0:
                if (op == "&&") != bool(a):
                    return a
                return truthy(self.ev(e.b, m))
            b = truthy(self.ev(e.b, rest)) if rest.any() else False
            return (a & b) if op == "&&" else (a | b)
        if op == ",":
            self.ev(e.a, m)
            return self.ev(e.b, m)
        ta, tb = e.a.type, e.b.type
        if op in ("+", "-") and isinstance(e.type, Scalar) and e.type.is_float:
            return contract.value(self._node(e, m, e.type), e.type.dtype)
        a, b = self.ev(e.a, m), self.ev(e.b, m)
        return self.arith(op, a, b, ta, tb, e.type)

    def _node(self, e, m, t) -> tuple:
        """A float expression of type t as contraction nodes (contract.py), combined operands first as nvcc's
        back end does; what is not a sum, difference, product or negation of t (nor an inlined call, nor fmaf)
        is computed now, in source order, as a leaf."""
        k = type(e)
        if e.type == t:
            if k is ir.Binary and (e.op == "+" or e.op == "-" or e.op == "*"):
                a, b = self._node(e.a, m, t), self._node(e.b, m, t)
                if e.op == "*":
                    return ("mul", a, b)
                return contract.add(a, b) if e.op == "+" else contract.sub(a, b)
            if k is ir.Unary and e.op == "-":
                return contract.neg(self._node(e.expr, m, t))
            if k is ir.Call:
                fn = self.program.functions.get(e.name)
                if fn is not None and fn.returns is not None:
                    with self._called(fn, e, m):  # nvcc inlines it: its returned expression joins the caller's
                        self.block(fn.prologue, m)
                        self.statements += active_warps(m)
                        return self._node(fn.returns, m, t)
                if fn is None and e.name in FUSED_CALLS:
                    x, y, z = (self._node(a, m, t) for a in e.args)
                    return ("fma", x, y, z)
        return contract.leaf(self.ev(e, m))

    def arith(self, op, a, b, ta, tb, rt):
        if isinstance(ta, Pointer) or isinstance(tb, Pointer):
            return self._pointer_arith(op, a, b, ta, tb)
        if op in COMPARE:
            return COMPARE[op](a, b)
        if op == "/":
            return divide(a, b, rt)
        if op == "%":
            return remainder(a, b, rt)
        if op == "<<" or op == ">>":
            return shift(a, b, rt, op == "<<")
        r = ARITH[op](a, b)
        if isinstance(rt, Scalar) and rt.name != "bool":
            return r.astype(rt.dtype, copy=False) if isinstance(r, np.ndarray) else rt.dtype.type(r)
        return r

    def _pointer_arith(self, op, a, b, ta, tb):
        if op in COMPARE:
            return COMPARE[op](np.asarray(a, np.int64), np.asarray(b, np.int64))
        if isinstance(ta, Pointer) and isinstance(tb, Pointer):  # p - q: elements between them
            return ((np.asarray(a, np.int64) - np.asarray(b, np.int64)) // max(ta.to.size, 1)).astype(np.int64)
        if isinstance(tb, Pointer):
            a, b, ta, tb = b, a, tb, ta
        step = max(ta.to.size, 1) if ta.to != VOID else 1
        off = np.asarray(b).astype(np.int64) * step
        return np.asarray(a, np.int64) + off if op == "+" else np.asarray(a, np.int64) - off

    def assign_expr(self, e: ir.Assign, m):
        p = self.place(e.target, m)
        tt = e.target.type
        if e.op == "=":
            if type(e.value) is ir.InitList and p[0] == "mem":  # `v[i] = {1, 2, 3, 4}`: built in the frame,
                slot = self.result_slot(e.value)  # then copied whole (one st.global.v4 for a float4)
                self.init_memory(slot, tt, e.value, m)
                self.assign(p, np.int64(slot), m, e.loc)
                return np.int64(slot)
            v = self.ev(e.value, m)
            self.assign(p, v, m, e.loc)
            return v
        op = e.op[:-1]
        if isinstance(tt, Pointer):
            cur = self.load(p, m, e.loc)
            v = self._pointer_arith(op, cur, self.ev(e.value, m), tt, e.value.type)
        else:
            vt = e.value.type
            ct = common(tt, vt) if op not in ("<<", ">>") else promote(tt)
            if op in ("+", "-") and ct.is_float and tt == ct and e.value.type == ct:  # x += a*b: contracted too
                rhs = self._node(e.value, m, ct)
                cur = contract.leaf(self.load(p, m, e.loc))
                v = contract.value(contract.add(cur, rhs) if op == "+" else contract.sub(cur, rhs), ct.dtype)
            else:
                rhs = self.ev(e.value, m)
                cur = self.load(p, m, e.loc)
                r = self.arith(op, convert(cur, tt, ct), convert(rhs, vt, ct if op not in ("<<", ">>") else vt),
                               ct, ct if op not in ("<<", ">>") else vt, ct)
                v = convert(r, ct, tt)
        self.assign(p, v, m, e.loc)
        return v

    def unary(self, e: ir.Unary, m):
        op = e.op
        if op == "&":
            p = self.place(e.expr, m)
            if p[0] == "reg":
                raise Fault("NOT_SUPPORTED_ON_SIM", f"{e.loc[0]}:{e.loc[1]}:{e.loc[2]}: address of a register")
            return np.asarray(p[1], np.int64) if np.ndim(p[1]) else np.int64(p[1])
        if op in ("++pre", "--pre", "post++", "post--"):
            p = self.place(e.expr, m)
            cur = self.load(p, m, e.loc)
            t = e.expr.type
            one = 1 if "++" in op else -1
            if isinstance(t, Pointer):
                new = np.asarray(cur, np.int64) + one * max(t.to.size, 1)
            elif t.name == "bool":
                new = np.asarray(True) if one > 0 else ~np.asarray(cur)
            else:
                new = (np.asarray(cur) + t.dtype.type(1)).astype(t.dtype) if one > 0 else \
                    (np.asarray(cur) - t.dtype.type(1)).astype(t.dtype)
            self.assign(p, new, m, e.loc)
            return new if op.endswith("pre") else cur
        v = self.ev(e.expr, m)
        if op == "-":
            r = np.negative(v)
        elif op == "+":
            r = v
        elif op == "~":
            r = np.invert(v)
        elif op == "!":
            return ~truthy(v)
        else:
            raise Fault("NOT_SUPPORTED_ON_SIM", f"{e.loc[0]}:{e.loc[1]}:{e.loc[2]}: the operator {op}")
        return r.astype(dtype_of(e.type), copy=False) if isinstance(r, np.ndarray) else dtype_of(e.type).type(r)

    # -------------------------------------------------------------- calls
    def call(self, e: ir.Call, m):
        fn = self.program.functions.get(e.name)
        if fn is None:
            return (BUILTINS.get(e.name) or COOP[e.name])(self, e, m)
        if len(self.frames) > 64:
            raise Fault("NOT_SUPPORTED_ON_SIM", f"{e.loc[0]}:{e.loc[1]}:{e.loc[2]}: recursion deeper than 64 calls")
        ret_slot = self.result_slot(e) if isinstance(fn.ret, Struct) else None
        with self._called(fn, e, m) as f:
            self.block(fn.body.stmts, m.copy())
            result = f.retval
            if ret_slot is not None and result is not None:
                self._copy_struct(ret_slot, result, fn.ret, m, e.loc)
                result = np.int64(ret_slot)
        return result

    @contextmanager
    def _called(self, fn: ir.Function, e: ir.Call, m):
        """The callee's frame while its body runs: the arguments computed in the caller's, then bound to its
        parameters (those in memory copied to its part of the stack, given back when it returns)."""
        args = [self.ev(a, m) for a in e.args]
        sp = self.mem.sp
        f = Frame(self.n)
        f.ret = ~m  # lanes not calling are as if returned already
        self.frames.append(f)
        try:
            for p, a in zip(fn.params, args):
                if p.in_memory:
                    addr = self.mem.push(p.type.size)
                    f.addr[p.name] = addr
                    if isinstance(p.type, (Struct, Array)):
                        self._copy_struct(addr, a, p.type, m, e.loc)
                    else:
                        self.store(addr, p.type, a, m)
                else:
                    f.env[p.name] = a
            yield f
        finally:
            self.frames.pop()
            self.mem.sp = sp

    def result_slot(self, e: ir.Expr) -> int:
        """Where a call's aggregate result (or an initializer list's) lives: a slot of the calling frame, one per
        call site (the result is copied out of the callee's frame into it)."""
        key = ("ret", id(e))
        caller = self.frame
        if key not in caller.addr:
            caller.addr[key] = self.mem.push(e.type.size)
        return caller.addr[key]

    def printf(self, e: ir.Printf, m) -> None:
        args = []
        for a in e.args:
            inner = a
            while isinstance(inner, (ir.Cast, ir.Decay)):
                inner = inner.expr
            args.append(inner.value if isinstance(inner, ir.Const) and isinstance(inner.value, bytes)
                        else self.ev(a, m))
        types = [a.type for a in e.args]
        fmt = PrintfFormat(e.fmt)
        for lane in np.flatnonzero(m):
            values = [np.asarray(v)[lane] if np.ndim(v) else v for v in args]
            self.report.printf(fmt.render(values, types, self.mem))

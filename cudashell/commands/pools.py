"""pool, pool create, pool set, pool trim, pool destroy: the stream-ordered allocator's pools — what each holds
(reserved) and hands out (used), what it gives back at a synchronize (its release threshold), and which freed memory
it lets another stream reuse.

Pool names: `default` is the default pool of the session's GPU (GPU 0), `gpuN:default` GPU N's; `pool create` makes
`pool1`, `pool2`, … unless told `as NAME`."""

from __future__ import annotations

from typing import TypedDict

from ..backends.base import UNLIMITED
from ..errors import ShellError, usage
from ..export.cemit import ident
from ..language.argkinds import parse_size
from ..language.grammar import Arg, Opt
from ..language.registry import c_writer, command, watcher
from ..model.session import MemPool
from ..output.render import fit
from ..output.results import Message, Result
from ..sizes import format_size
from .checks import c_pool, check_name, default_name, resolve_pool

REUSE = {"follow-events": "cudaMemPoolReuseFollowEventDependencies",
         "opportunistic": "cudaMemPoolReuseAllowOpportunistic",
         "internal": "cudaMemPoolReuseAllowInternalDependencies"}


def pool_row(backend, pool: MemPool) -> dict:
    a = backend.pool_attributes(pool.handle)
    return {"name": pool.name, "device": pool.device, "default": pool.default, **a,
            "threshold_text": "max" if a["threshold"] == UNLIMITED else format_size(a["threshold"])}


@command("pool", "memory", "list the stream-ordered allocator's pools", "pool",
         "cudaDeviceGetDefaultMemPool, cudaMemPoolGetAttribute (cuMemPoolGetAttribute)", exported=False,
         details="One row per pool: each GPU's default pool (`default` is GPU 0's, `gpuN:default` GPU N's, for the "
                 "GPUs the session uses) and those `pool create` made. reserved: the memory the pool holds "
                 "(ReservedMemCurrent, and its high-water mark); used: what its allocations hold (UsedMemCurrent: "
                 "a block freed in stream order counts until a synchronize sees the free done); threshold: what a "
                 "stream, event or device synchronize leaves reserved (0 by default: everything idle goes back); "
                 "reuse: which freed memory another stream may take — after an event (follow-events), once its free "
                 "is done (opportunistic), by waiting for the free (internal).")
def pool(session, backend, args):
    devices = sorted({c.device for c in session.contexts.values()})
    pools = [MemPool(default_name(d), backend.pool_default(d), d, True) for d in devices]
    return PoolList({"pools": [pool_row(backend, p) for p in pools + list(session.pools.values())]})


@command("pool create", "memory", "make a pool of device memory", "pool create as scratch",
         "cudaMemPoolCreate (cuMemPoolCreate)",
         opts=(Opt("on", Arg("GPU", "int")), Opt("as", Arg("NAME", "newname"))),
         details="A pool of its own (threshold 0, every reuse policy on), on the session's GPU or GPU N; "
                 "`alloc device SIZE async pool NAME` allocates from it (cudaMallocFromPoolAsync).")
def pool_create(session, backend, args):
    name = args.get("NAME") or next(f"pool{n}" for n in range(1, len(session.pools) + 2)
                                     if f"pool{n}" not in session.pools)
    check_name(name, args.col("NAME"), "a pool")
    if name in session.pools:
        raise ShellError("NAME_TAKEN", f"a pool named '{name}' exists", "pick another name or `pool destroy` it",
                         args.col("NAME"))
    device = args.get("GPU", 0)
    if device:
        session.primary_context(backend, device)  # NO_SUCH_DEVICE before the driver makes anything
    made = MemPool(name, backend.pool_create(device), device, False)
    session.pools[name] = made
    return PoolChange({"pool": pool_row(backend, made), "call": "cudaMemPoolCreate"}, named=name)


@command("pool set", "memory", "set a pool's release threshold or a reuse policy",
         "pool set default threshold max", "cudaMemPoolSetAttribute (cuMemPoolSetAttribute)",
         args=(Arg("P", "pool"), Arg("WHAT", choices=("threshold", "reuse")), Arg("VALUE", "word"),
               Arg("SWITCH", choices=("on", "off"), optional=True)),
         details="`threshold SIZE|max`: what the pool keeps reserved at a synchronize (max: everything, so the next "
                 "allocation needs no new mapping); `reuse follow-events|opportunistic|internal on|off`.")
def pool_set(session, backend, args):
    p = resolve_pool(session, backend, args.get("P"), args.col("P"))
    what, value, switch = args.get("WHAT"), args.get("VALUE"), args.get("SWITCH")
    if what == "threshold":
        if switch is not None:
            raise usage("a threshold takes one size", args.col("SWITCH"))
        attribute, number = "threshold", UNLIMITED if value == "max" else parse_size(value, args.col("VALUE"))
    else:
        if value not in REUSE:
            raise usage(f"no reuse policy '{value}'", args.col("VALUE"), f"one of {', '.join(REUSE)}")
        if switch is None:
            raise usage(f"reuse {value} needs on or off", args.end_col)
        attribute, number = value, int(switch == "on")
    backend.pool_set(p.handle, attribute, number)
    return PoolChange({"pool": pool_row(backend, p), "call": "cudaMemPoolSetAttribute"})


@command("pool trim", "memory", "give a pool's idle memory back", "pool trim default",
         "cudaMemPoolTrimTo (cuMemPoolTrimTo)", args=(Arg("P", "pool"), Arg("KEEP", "size", optional=True)),
         details="Releases idle memory until at most KEEP bytes (0 unless told) stay reserved. Memory freed in "
                 "stream order is idle only once a synchronize has seen the free done: trimmed right after "
                 "`free … async`, it stays (as on the H100).")
def pool_trim(session, backend, args):
    p = resolve_pool(session, backend, args.get("P"), args.col("P"))
    backend.pool_trim(p.handle, args.get("KEEP", 0))
    return PoolChange({"pool": pool_row(backend, p), "call": "cudaMemPoolTrimTo"})


@command("pool destroy", "memory", "destroy a pool `pool create` made", "pool destroy scratch",
         "cudaMemPoolDestroy (cuMemPoolDestroy)", args=(Arg("P", "pool"),),
         details="Its allocations stay usable; its memory goes back when the last of them is freed. A GPU's default "
                 "pool cannot be destroyed (the driver's CUDA_ERROR_INVALID_VALUE).")
def pool_destroy(session, backend, args):
    p = resolve_pool(session, backend, args.get("P"), args.col("P"))
    if p.default:
        raise ShellError("CUDA_ERROR_INVALID_VALUE", f"{p.name} is GPU {p.device}'s default pool, which cannot be "
                         "destroyed", "destroy a pool `pool create` made", args.col("P"))
    backend.pool_destroy(p.handle)
    del session.pools[p.name]
    session.gone["pool " + p.name] = "was destroyed"
    return Message({"text": f"pool {p.name} destroyed", "name": p.name, "call": "cudaMemPoolDestroy"})


# ------------------------------------------------------------------ C: the same calls through the runtime API
@c_writer("pool create")
def c_pool_create(w, a, i, text):
    var = ident("mp", w.named(a, text))
    w.declare(f"cudaMemPool_t {var};")
    w.emit(f"{{ cudaMemPoolProps props = {{}}; props.allocType = cudaMemAllocationTypePinned; "
           f"props.location.type = cudaMemLocationTypeDevice; props.location.id = {a.get('GPU', 0)}; "
           f"CHECK(cudaMemPoolCreate(&{var}, &props)); }}", i, "cuMemPoolCreate")


@c_writer("pool set")
def c_pool_set(w, a, i, text):
    what, value = a.get("WHAT"), a.get("VALUE")
    if what == "threshold":
        number = "~0ull" if value == "max" else f"{parse_size(value)}ull"
        line = c_pool(w, a.get("P"), lambda mp: f"uint64_t v = {number}; "
                      f"CHECK(cudaMemPoolSetAttribute({mp}, cudaMemPoolAttrReleaseThreshold, &v));")
    else:
        line = c_pool(w, a.get("P"), lambda mp: f"int v = {int(a.get('SWITCH') == 'on')}; "
                      f"CHECK(cudaMemPoolSetAttribute({mp}, {REUSE[value]}, &v));")
    w.emit(line if line.startswith("{") else f"{{ {line} }}", i, "cuMemPoolSetAttribute")


@c_writer("pool trim")
def c_pool_trim(w, a, i, text):
    w.emit(c_pool(w, a.get("P"), lambda mp: f"CHECK(cudaMemPoolTrimTo({mp}, {a.get('KEEP', 0)}));"), i,
           "cuMemPoolTrimTo")


@c_writer("pool destroy")
def c_pool_destroy(w, a, i, text):
    w.emit(f"CHECK(cudaMemPoolDestroy({ident('mp', a.get('P'))}));", i, "cuMemPoolDestroy")


@watcher
def stream_ordered_races(session, backend, command, result, error) -> list:
    """The stream-ordered races the command's work made (model/streamorder.py), each a warning after its output:
    the command ran, as it does on a GPU, where compute-sanitizer would name the same two operations."""
    if not session.races:  # most commands
        return []
    races, session.races = session.races, []
    return [Race(r) for r in races]


# ------------------------------------------------------------------ the results of these commands
class RaceData(TypedDict):
    buffer: str
    first: str  # the operation the second must follow: the allocation, or a use before a free
    then: str  # the operation not ordered after it
    why: str
    hint: str


class Race(Result, kind="race"):
    Data = RaceData

    def text(self):
        d = self.data
        return [f"warning: stream-ordered race on {d['buffer']}: {d['then']} is not ordered after {d['first']} "
                f"({d['why']}) — hint: {d['hint']}"]


class PoolRow(TypedDict):
    """One pool as `pool` lists it: the driver's attributes (cuMemPoolGetAttribute), in bytes."""

    name: str
    device: int
    default: bool
    threshold: int
    threshold_text: str
    reserved: int
    reserved_high: int
    used: int
    used_high: int
    follow_events: bool
    opportunistic: bool
    internal: bool


class PoolListData(TypedDict):
    pools: list[PoolRow]


def _reuse_text(r: PoolRow) -> str:
    return ",".join(k for k in REUSE if r[k.replace("-", "_")]) or "none"


class PoolList(Result, kind="pools"):
    Data = PoolListData

    def lines(self, tablefmt="simple", width=0):
        rows = [[r["name"], str(r["device"]), r["threshold_text"], format_size(r["reserved"]),
                 format_size(r["reserved_high"]), format_size(r["used"]), format_size(r["used_high"]), _reuse_text(r)]
                for r in self.data["pools"]]
        return [fit(rows, ["pool", "GPU", "threshold", "reserved", "high", "used", "high", "reuse"], tablefmt, width)]


class PoolChangeData(TypedDict):
    pool: PoolRow
    call: str


class PoolChange(Result, kind="pool"):
    Data = PoolChangeData

    def text(self):
        r = self.data["pool"]
        return [f"pool {r['name']} (GPU {r['device']}): threshold {r['threshold_text']}, reserved "
                f"{format_size(r['reserved'])}, used {format_size(r['used'])}, reuse {_reuse_text(r)}  — "
                f"{self.data['call']}"]

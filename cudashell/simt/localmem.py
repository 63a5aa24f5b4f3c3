"""Local memory — a thread's arrays, structs and variables whose address is taken — measured before a kernel runs.

The interpreter holds every lane's local memory as real RAM (a chunk of 32,768 lanes with a 4 MiB array each would be
128 GiB), so what a kernel's threads may hold is decided before any of it is allocated: at load, CUDA's own limit of
512 KiB a thread (ptxas refuses a kernel that needs more: "uses too much local data"); at launch, the lanes run at
once are as many as the simulator's storage budget has room for, and a launch whose one block does not fit is
refused as SIM_BUDGET — never a MemoryError."""

from __future__ import annotations

from ..errors import ShellError
from ..sizes import format_size
from . import ir
from .compile_error import CompileError
from .ctype import Struct
from .launch import _children
from .memory import WARP

LOCAL_LIMIT = 512 << 10  # CUDA's maximum local memory per thread (compute capability 2.0 and later)
SLOT = 16  # the interpreter's stack keeps each frame's variables 16-byte aligned
MAX_CALLS = 64  # the interpreter refuses calls nested deeper (interp.Machine.call)
GROWTH = 2  # the interpreter's stack grows by doubling: room for the copy it makes


def _slot(nbytes: int) -> int:
    return -(-max(nbytes, 1) // SLOT) * SLOT


def _own_frame(fn: ir.Function) -> tuple[int, set[str]]:
    """The bytes of one call's own frame (its parameters, variables and struct results kept in local memory) and
    the program functions it calls."""
    total = sum(_slot(p.type.size) for p in fn.params if p.in_memory)
    callees: set[str] = set()
    todo: list = [fn.body]
    while todo:  # iterative: the front end bounds nesting, but no walk here should depend on it
        node = todo.pop()
        if isinstance(node, ir.Decl) and node.var.in_memory and not node.shared:
            total += _slot(node.var.type.size)
        elif isinstance(node, ir.Call):
            callees.add(node.name)
            if isinstance(node.type, Struct):
                total += _slot(node.type.size)
        todo.extend(_children(node))
    return total, callees


def local_bytes(program, fn: ir.Function) -> int:
    """The most local memory one thread of `fn` holds at once: its frame and the deepest chain of calls below it
    (a recursive call counted once, and no chain deeper than the interpreter's 64 calls)."""
    frames: dict[str, int] = {}
    active: set[str] = set()

    def deepest(f: ir.Function, depth: int) -> int:
        if f.name in frames:
            return frames[f.name]
        if f.name in active or depth > MAX_CALLS:
            return 0
        active.add(f.name)
        own, callees = _own_frame(f)
        below = [deepest(program.functions[c], depth + 1) for c in callees if c in program.functions]
        active.discard(f.name)
        frames[f.name] = own + max(below, default=0)
        return frames[f.name]

    return deepest(fn, 0)


def per_thread(program, fn: ir.Function) -> int:
    """local_bytes, measured once a program: a launch in a loop does not walk the kernel again."""
    measured = program.__dict__.setdefault("_local_bytes", {})
    if fn.name not in measured:
        measured[fn.name] = local_bytes(program, fn)
    return measured[fn.name]


def refuse_oversized(program) -> None:
    """At load, as ptxas: a kernel whose threads need more than CUDA's 512 KiB of local memory each."""
    for name in program.kernel_names:
        fn = program.functions[name]
        need = per_thread(program, fn)
        if need > LOCAL_LIMIT:
            raise CompileError("USAGE", f"kernel {name} needs {format_size(need)} of local memory a thread (its "
                               f"arrays and structs): CUDA allows {format_size(LOCAL_LIMIT)} (ptxas: \"uses too much "
                               "local data\"); make the array __shared__ or a buffer in global memory", fn.loc)


def _block_threads(block: tuple) -> int:
    """A block's lanes as the interpreter holds them: whole warps."""
    return -(-(block[0] * block[1] * block[2]) // WARP) * WARP


def blocks_at_once(program, fn: ir.Function, block: tuple, room: int) -> int | None:
    """How many blocks' local memory fits in `room` bytes of the storage budget at once (None: the kernel holds
    none, so the budget sets no bound); 0 when not even one block fits."""
    need = per_thread(program, fn) * _block_threads(block)
    return None if need == 0 else max(0, room) // (GROWTH * need)


def refuse_over_budget(program, fn: ir.Function, block: tuple, room: int) -> None:
    """At launch: a kernel whose one block's local memory the storage budget cannot hold (SIM_BUDGET, before
    anything is allocated or queued)."""
    if blocks_at_once(program, fn, block, room) != 0:
        return
    each = per_thread(program, fn)
    threads = block[0] * block[1] * block[2]
    raise ShellError("SIM_BUDGET", f"kernel {fn.name} holds {format_size(each)} of local memory a thread: one block "
                     f"of {threads} threads needs {format_size(GROWTH * each * _block_threads(block))} of the "
                     f"simulator's storage budget, which has {format_size(max(0, room))} left (a real GPU would have "
                     "the memory)", "launch smaller blocks, make the arrays smaller, free buffers, or raise "
                     "storage_budget in a --sim-profile")

"""launch, kernel load/define, kernels: built-in kernels on both backends, user CUDA C on the GPU."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import NotRequired, TypedDict

from ..backends.base import LaunchOptions
from ..errors import ShellError, usage
from ..export.cemit import CTYPES, ident, refuse
from ..language.argkinds import parse_part
from ..language.grammar import Arg, Flag, Opt, keyword_typo
from ..language.registry import c_writer, command, lookup
from ..model.inputs import read_capped
from ..model.kernels import BUILTINS, Kernel, scalar, with_includes
from ..model.launchdims import c_dims, computed, default_grid, dim3, is_1d, shape_text
from ..model.operations import KERNEL
from ..model.session import Buffer
from ..output.render import (
    access_lines,
    counts_lines,
    fit,
    gpu_time,
    how_text,
    timing_note,
)
from ..output.results import Result, TimingData, hexptr, timing_data
from ..simt.signatures import read_kernels
from ..simt.variables import module_variables
from ..sizes import format_size
from .checks import check_device_accessible, check_reach, check_within, pitch_word, region


def _buffer_arg(session, backend, text: str, col: int, checked: bool, ctx):
    """A pointer argument: a buffer or a part of one (`d0[1MB:]` passes `d0 + 1MB`), as a Region."""
    part = region(session, parse_part(text, col), col, "kernel argument")
    if checked:
        check_device_accessible(part.buf, col, backend.info.unified_addressing)
        check_reach(backend, part.buf, ctx, col)
    return part


MAX_TRACED = 1024


def _check_traceable(backend, kernel, grid, block, col):
    if not backend.capabilities.draws_accesses or kernel.builtin:
        raise usage("show-access draws your own kernels on the simulator (it watches every access)", col,
                    "run it with --backend sim")
    threads = grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]
    if threads > MAX_TRACED:
        raise usage(f"show-access draws launches of up to {MAX_TRACED} threads; this one has {threads}", col,
                    "launch a smaller grid to see it")


def _kernel_arg(session, words: list[str], index: int) -> list[tuple[str, str]]:
    """`launch K …`: buffers the GPU can reach where K's parameter number `index` is a pointer."""
    kernel = session.kernels.get(words[1]) if len(words) > 1 else None
    if kernel is None or index >= len(kernel.params) or not kernel.params[index].is_buffer:
        return []
    return [(b.name, f"{kernel.params[index].name}: {b.kind} {b.size} B") for b in session.buffers.values()
            if b.device_accessible]


SPIN_LIMIT_US = 3_600_000_000  # `spin US`: an hour at most (the simulator's ns clock is exact past it; a GPU waits)


@command("launch", "kernels", "launch a kernel: built-ins sum, fill, scale, saxpy, increment, touch, spin, or "
         "a loaded one", "launch saxpy 2.0 x y stream 1",
         "kernel<<<grid, block, shared, stream>>>(args…) (cuLaunchKernel)",
         args=(Arg("KERNEL", "kernel"), Arg("ARG", "word", optional=True, many=True, complete=_kernel_arg)),
         opts=(Opt("n", Arg("ELEMENTS", "count")), Opt("grid", Arg("G", "dim3")), Opt("block", Arg("B", "dim3")),
               Opt("shared", Arg("BYTES", "size")), Opt("stream", Arg("S", "stream"))),
         flags=(Flag("unchecked"), Flag("show-access")),
         details="Buffer names become device pointers (the host pointer itself for pinned memory under UVA); "
                 "a part of a buffer (`d0[1MB:]`) passes the pointer plus the offset, as C's `d0 + offset`; "
                 "a buffer the GPU cannot reach is refused before launch. Scalars follow the kernel's "
                 "signature or take a suffix (2.5f, 7i, 9ul). Built-ins work on float32 elements: N defaults to "
                 "the smallest buffer's, block to 256, grid to cover N; only grid×block elements are computed. "
                 "grid and block take 1 to 3 dimensions as C's dim3 does (`grid 64,64 block 16,16`); a shape the "
                 "device refuses (over 1024 threads a block or 1024×1024×64, a grid over (2^31-1)×65535×65535) is "
                 "the driver's CUDA_ERROR_INVALID_VALUE. "
                 "`spin US` busy-waits (an hour at most). Launches are asynchronous. `unchecked` skips the shell's refusal of a buffer "
                 "the GPU cannot reach: the kernel gets the host pointer, as C would pass it, and the GPU faults. "
                 "On the simulator a kernel of yours reports what it moved (32-byte sectors a warp request, shared-"
                 "memory bank wavefronts, atomics); `show-access` (a launch of up to 1024 threads) draws which "
                 "thread read and wrote which element.")
def launch(session, backend, args):
    name = args.get("KERNEL")
    kernel: Kernel | None = session.kernels.get(name)
    if kernel is None:
        raise ShellError("NO_SUCH_KERNEL", f"no kernel named '{name}'",
                         "kernels: " + ", ".join(session.kernels) + "; `kernel load FILE.cu` adds yours",
                         args.col("KERNEL"))
    texts = args.get("ARG") or []
    if len(texts) != len(kernel.params):
        spec = lookup("launch")
        typo = next(((i, t) for i, w in enumerate(texts) if (t := keyword_typo(w, spec.opts, spec.flags))), None)
        n = len(kernel.params)
        raise usage(f"{name} takes {n} argument{'s' * (n != 1)}, got {len(texts)}",
                    args.many_cols["ARG"][typo[0]] if typo else args.col("ARG"),
                    f"did you mean `{typo[1]}` for '{texts[typo[0]]}'?" if typo else f"launch {kernel.signature()}")
    cols = args.many_cols.get("ARG", [])
    checked = "unchecked" not in args.flags
    ctx = session.contexts[session.stream(args.get("S"), args.col("S")).context]  # a kernel runs in its stream's
    values = [(_buffer_arg(session, backend, t, c, checked, ctx) if p.is_buffer
               else scalar(pitch_word(session, t, c), p.dtype, c))
              for p, t, c in zip(kernel.params, texts, cols)]
    for p, v, c in zip(kernel.params, values, cols):
        if p.unit == "us" and not 0 <= int(v) <= SPIN_LIMIT_US:
            raise usage(f"{kernel.name} {p.name.upper()} takes 0 to {SPIN_LIMIT_US:_} µs (an hour), got {int(v):_}", c,
                        "a longer wait is no experiment: a GPU would sit on it for real")
    bufs = [v for p, v in zip(kernel.params, values) if p.is_buffer]
    if not kernel.builtin and "ELEMENTS" in args.values:
        raise usage("n applies to the built-ins; pass a count as your kernel's own argument", args.col("ELEMENTS"))
    # no limit checks on the shapes here: one the device refuses is the driver's error (the simulator's too)
    block = args.get("B", (kernel.block, 1, 1))
    if bufs:
        count = args.get("ELEMENTS", (min if kernel.builtin else max)(r.nbytes for r in bufs) // 4)
    else:
        count = args.get("ELEMENTS", 1)
    if kernel.builtin:
        for r in bufs:
            check_within(r, count * 4, args.col("ELEMENTS"), f"{count} float32 elements")
    grid = args.get("G") or default_grid(count, block)
    stream = session.stream(args.get("S"), args.col("S"))
    options = LaunchOptions(show_access="show-access" in args.flags)
    if options.show_access:
        _check_traceable(backend, kernel, grid, block, args.col("show-access"))
    t = backend.launch(kernel, values, count, grid, block, args.get("BYTES", 0), stream.handle, options=options)
    report = t.report  # a KernelReport where the backend counted the kernel (the simulator, a kernel of yours)
    counts = report.counts() if report is not None and not report.fault else None
    read = written = None  # a built-in's elements, each read and/or written once; a kernel of yours: not split
    if kernel.builtin:
        read = sum(count * 4 for p in kernel.params if p.kind in ("in", "inout"))
        written = sum(count * 4 for p in kernel.params if p.writes)
    moved = read + written if kernel.builtin else report.moved if report is not None else 0
    session.track(KERNEL, stream, moved, t, *[v.buf for p, v in zip(kernel.params, values) if p.is_buffer and p.writes],
                  name=kernel.name, counts=counts)
    for p, v in zip(kernel.params, values):
        if p.is_buffer and p.writes:
            v.buf.view = p.dtype  # what the kernel wrote it as: `show` reads it so
    shown = [v.label() if p.is_buffer else v.item() for p, v in zip(kernel.params, values)]
    return Launched({"kernel": kernel.name, "args": shown, "n": count, "grid": list(grid),
                             "block": list(block), "shared": args.get("BYTES", 0),
                             "computed": computed(count, grid, block),
                             "builtin": kernel.builtin, "stream": stream.name,
                             "bytes": moved, "bytes_read": read, "bytes_written": written,
                             "counted": kernel.builtin or counts is not None,
                             "call": "cudaLaunchKernel", **timing_data(t),
                             "counts": counts,
                             "access": report.access_map() if report is not None and options.show_access else None,
                             **({"fault": report.fault} if report is not None and report.fault else {})})


@c_writer("launch")
def c_launch(w, a, i, text):
    kernel = BUILTINS.get(a.get("KERNEL"))
    if kernel is None and a.get("KERNEL") in w.user:
        w.in_ctx(w.ctx_of_stream(a.get("S")), i, lambda: _launch_user(w, *w.user[a.get("KERNEL")], a, i, text))
        return
    if kernel is None:
        raise refuse(text, f"no source for kernel {a.get('KERNEL')} (its `kernel define` or `kernel load` is "
                     "not in the session's history)")
    words = a.get("ARG") or []
    parts = {k: parse_part(word) for k, (p, word) in enumerate(zip(kernel.params, words)) if p.is_buffer}
    missing = [part.name for part in parts.values() if part.name not in w.buffers]
    if missing:
        raise refuse(text, f"the program never made {missing[0]}")
    block = a.get("B", dim3(kernel.block))
    n = a.get("ELEMENTS", min(w.rest(part) for part in parts.values()) // 4 if parts else 1)
    grid = a.get("G") or default_grid(n, block)
    args = []
    for k, (p, word) in enumerate(zip(kernel.params, words)):
        if p.is_buffer:
            args.append(f"(float *)({w.ptr(parts[k])})" if parts[k].start else f"(float *){w.ptr(parts[k])}")
        elif p.unit == "us":  # microseconds: in clock ticks, as the kernel counts (read as the launch read it)
            args.append(f"(long long){int(scalar(word, p.dtype))} * clock_khz / 1000")
            w.declare("int clock_khz = 0;")
            w.set_up("CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));")
        else:
            args.append(re.sub(r"[a-zA-Z]+$", "", word) + ("f" if "." in word else ""))
    if kernel.counted:
        args.append(str(n))
    w.in_ctx(w.ctx_of_stream(a.get("S")), i, lambda: _emit_launch(w, kernel.symbol, grid, block, a, i, args))


def _launch_user(w, symbol, kernel, a, i, text):
    """A launch of the user's kernel: each buffer passed as the pointer type its parameter takes (any_ptr)."""
    words = a.get("ARG") or []
    args, sizes = [], []
    for p, word in zip(kernel.params, words):
        if p.is_buffer:
            part = parse_part(word)
            if part.name not in w.buffers:
                raise refuse(text, f"the program never made {part.name}")
            w.helper("user_ptr")
            args.append(f"any_ptr{{{w.ptr(part)}}}")
            sizes.append(w.rest(part))
        else:
            pitched = word[:-len(".pitch")] if word.endswith(".pitch") else None
            args.append(f"({CTYPES.get(p.dtype) or 'int'}){ident('pitch', pitched)}" if pitched in w.pitched
                        else _c_scalar(word, p.dtype))
    block = a.get("B") or dim3(256)
    grid = a.get("G") or default_grid(max(sizes) // 4 if sizes else 1, block)  # as the shell's launch
    _emit_launch(w, symbol, grid, block, a, i, args)


def _c_scalar(word: str, dtype: str) -> str:
    """A scalar argument as C writes it: the shell's suffix (`7i`, `2.5f`) gives way to a cast to the parameter's
    type."""
    number = re.sub(r"(ul|[fdilu])$", "", word, flags=re.I)
    return f"({CTYPES.get(dtype) or 'int'}){number}"


def _emit_launch(w, symbol, grid, block, a, i, args):
    """kernel<<<grid, block, shared, stream>>>(args), then the launch's error check."""
    rest = f"{a.get('BYTES', 0)}, {w.stream(a.get('S'))}>>>({', '.join(args)});"
    if is_1d(grid) and is_1d(block):
        w.emit(f"{symbol}<<<{grid[0]}, {block[0]}, {rest}", i, "cuLaunchKernel")
    else:  # C's dim3, in a scope of its own: the next launch declares its own
        w.emit("{", i)
        w.emit(f"    dim3 grid({c_dims(grid)}); dim3 block({c_dims(block)});", i)
        w.emit(f"    {symbol}<<<grid, block, {rest}", i, "cuLaunchKernel")
        w.emit("}", i)
    w.emit("CHECK(cudaGetLastError());", i, replay=True)


def _register(session, backend, kernels: list[Kernel], prefix: str | None, col: int, symbols=(),
              module: str = "") -> list[str]:
    """The module's kernels (named `prefix.kernel` with a prefix) and its variables (buffers named `module.VAR`),
    all names checked free before any is taken."""
    named = [(f"{prefix}.{k.name}" if prefix else k.name, k) for k in kernels]
    for name, _ in named:
        if name in session.kernels:
            raise ShellError("NAME_TAKEN", f"a kernel named '{name}' exists", "load it `as` another name", col)
    for sym in symbols:
        if f"{module}.{sym.name}" in session.buffers:
            raise ShellError("NAME_TAKEN", f"a buffer named '{module}.{sym.name}' exists (the module's variable "
                             f"{sym.name} would take it)", "load it `as` another name", col)
    for name, k in named:
        session.kernels[name] = replace(k, module=module)
    for sym in symbols:
        session.add_buffer(symbol_buffer(session, sym, module))
    return [f"{name}{k.signature()[len(k.name):]}" for name, k in named]


def symbol_buffer(session, sym, module: str) -> Buffer:
    """A module's variable as a session buffer: device memory (managed for `__managed__`) at the address the load
    gave it, in the current context, marked as the module's so that `free` leaves it and the C names the symbol."""
    managed = sym.space == "managed"
    ctx = session.context
    return Buffer(f"{module}.{sym.name}", "managed" if managed else "device", sym.size,
                  frozenset({"global"}) if managed else frozenset(), sym.address if managed else None, sym.address,
                  sym.handle, device=ctx.device, context=ctx.name, view=sym.dtype, symbol=sym.space, module=module,
                  source_name=sym.name)


def _symbol_rows(module: str, symbols) -> list[dict]:
    return [{"name": f"{module}.{s.name}", "kind": s.space, "size": s.size, "device_ptr": hexptr(s.address)}
            for s in symbols]


@command("kernel load", "kernels", "compile a .cu file's __global__ kernels (nvcc on a GPU; the simulator's "
         "interpreter elsewhere)",
         "kernel load kernels/mine.cu as mine", "nvcc via pycuda.compiler, then cuModuleLoadData",
         args=(Arg("FILE", "cuda-file"),), opts=(Opt("as", Arg("MOD", "newname")),),
         details="Paths are relative to the calling script. With `as MOD` the kernels are named MOD.kernel. "
                 "Pointer parameters take buffers (written unless const); scalars take numbers. The module's "
                 "`__constant__`, `__device__` and `__managed__` variables become buffers named MOD.NAME (the "
                 "file's stem without `as`): fresh each load, initialised from the source; `memcpy` to or from "
                 "one is cudaMemcpyToSymbol / cudaMemcpyFromSymbol.")
def kernel_load(session, backend, args):
    path = Path(args.get("FILE"))
    if not path.is_absolute():
        path = session.script_dir / path
    try:
        source = read_capped(path, "source").decode("utf-8")
    except OSError as e:
        raise ShellError("NO_SUCH_FILE", f"cannot read {path}: {e.strerror}", None, args.col("FILE")) from None
    except UnicodeDecodeError as e:
        raise usage(f"{path} is not UTF-8 text (byte {e.start})", args.col("FILE"), "is it a CUDA C source?") from None
    # both backends read the signatures (simt.signatures) before any compiler runs: a bad one is USAGE there
    kernels, symbols = backend.load_kernels(source, str(path), session.root)
    module = args.get("MOD") or path.stem
    return KernelsLoaded({"loaded": _register(session, backend, kernels, args.get("MOD"), args.col("FILE"), symbols,
                                              module),
                          "from": str(path), "symbols": _symbol_rows(module, symbols)})


@c_writer("kernel load")
def c_kernel_load(w, a, i, text):
    path, mod = a.get("FILE"), a.get("MOD")
    prefix = f"{mod}." if mod else ""
    source, where = _loaded_source(w, path, prefix)
    if source is None:
        raise refuse(text, f"cannot read {path} from here", "export from where the session loaded it")
    expanded = with_includes(source, where)
    w.user_source(expanded, {prefix + k.name: k for k in read_kernels(source, where)})
    w.emit(f"// kernel load {path}: its source is above main", i)
    w.module_variables(expanded, module_variables(source, where), mod or Path(path).stem, i)


def _loaded_source(w, path: str, prefix: str) -> tuple[str | None, str | None]:
    """The source the session compiled (its kernels keep it, for `reset`), else the file read now."""
    want = Path(path)
    for n, k in w.kernels.items():
        if not k.builtin and k.path and n.startswith(prefix) and ("." not in n[len(prefix):]) and \
                Path(k.path).parts[-len(want.parts):] == want.parts:
            return k.source, k.path
    for where in ([want] if want.is_absolute() else [p / want for p in (w.base, Path.cwd()) if p]):
        try:
            return where.read_text(encoding="utf-8"), str(where)
        except (OSError, UnicodeDecodeError):
            continue
    return None, None


@command("kernel define", "kernels", "compile an inline kernel (nvcc on a GPU; the simulator's interpreter elsewhere)",
         "kernel define twice <<< __global__ void twice(float *a, int n) { int i = blockIdx.x * blockDim.x + "
         "threadIdx.x; if (i < n) a[i] *= 2; } >>>", "nvcc via pycuda.compiler (SourceModule)",
         args=(Arg("NAME", "newname"), Arg("SOURCE", "cuda-source")),
         details="The CUDA C goes between <<< and >>>; in a script it may span lines. If the source's one "
                 "kernel has another name, it is registered as NAME. The source's `__constant__`, `__device__` and "
                 "`__managed__` variables become buffers named NAME.VAR.")
def kernel_define(session, backend, args):
    name, source = args.get("NAME"), args.get("SOURCE")
    # named for errors as `twice (kernel define):3:9`; its #includes are found beside the script
    where = str(session.script_dir / f"{name} (kernel define)")
    kernels, symbols = backend.load_kernels(source, where, session.root)
    if name not in [k.name for k in kernels]:
        if len(kernels) != 1:
            raise usage(f"the source defines {', '.join(k.name for k in kernels)}, not {name}", args.col("NAME"))
        kernels = [Kernel(name, kernels[0].params, "user kernel", False, None, kernels[0].symbol, kernels[0].handle,
                          kernels[0].source, kernels[0].path)]
    return KernelsLoaded({"loaded": _register(session, backend, kernels, None, args.col("NAME"), symbols, name),
                          "from": None, "symbols": _symbol_rows(name, symbols)})


@c_writer("kernel define")
def c_kernel_define(w, a, i, text):
    name, source = a.get("NAME"), a.get("SOURCE")
    known = w.kernels.get(name)
    where = known.path if known is not None and known.path else None
    expanded = with_includes(source, where)
    found = read_kernels(source, where)
    names = {k.name: k for k in found}
    if name not in names and len(found) == 1:
        names[name] = found[0]
    w.user_source(expanded, names)
    w.emit(f"// kernel define {name}: its source is above main", i)
    w.module_variables(expanded, module_variables(source, where), name, i)


@command("kernels", "kernels", "list the kernels you can launch", "kernels", "(none)", exported=False)
def kernels(session, backend, args):
    return KernelList({"kernels": [{"name": n, "signature": k.signature(), "builtin": k.builtin,
                                               "summary": k.summary} for n, k in session.kernels.items()]})


# ------------------------------------------------------------------ the results of these commands
class KernelListDataKernelsItem(TypedDict):
    name: str
    signature: str
    builtin: bool
    summary: str


class KernelListData(TypedDict):
    kernels: list[KernelListDataKernelsItem]


class KernelList(Result, kind="kernel_list"):
    Data = KernelListData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        rows = [[k["signature"], "built-in" if k["builtin"] else "loaded", k["summary"]] for k in d["kernels"]]
        return [fit(rows, ["kernel", "", "what it does"], tablefmt, width)]


class KernelsDataSymbolsItem(TypedDict):
    """A module's variable, now the buffer `name`: its space (constant, global, managed), size, device address."""
    name: str
    kind: str
    size: int
    device_ptr: str


KernelsData = TypedDict("KernelsData", {
    "loaded": list[str],
    "from": str | None,
    "symbols": list[KernelsDataSymbolsItem],
})


class KernelsLoaded(Result, kind="kernels"):
    Data = KernelsData

    def text(self):
        d = self.data
        return ["loaded " + ", ".join(d["loaded"])] + [
            f"  {s['name']}: __{'device' if s['kind'] == 'global' else s['kind']}__ {format_size(s['size'])} at "
            f"{s['device_ptr']} (a buffer: memcpy, checksum, compare, a kernel argument)" for s in d["symbols"]]


class LaunchAccessElement(TypedDict):
    read: list[str]  # the threads, as the drawing names them: `3`, `3,1`, `b2:3` (simt.launch._label)
    write: list[str]


class LaunchAccess(TypedDict):
    element_size: int
    elements: dict[str, LaunchAccessElement]  # the first 64 elements touched
    more: int  # elements touched besides those


class LaunchDataCountsGlobalKind(TypedDict):
    """The traffic to one kind of memory (simt.memory.Traffic.summary)."""

    requests: int
    sectors: int
    bytes: int
    useful_bytes: int
    sectors_per_request: float
    efficiency: float
    pattern: str


# keyed by the memory a kernel's loads and stores reached, as the simulator's regions name it (its own GPU's
# memory, a peer GPU's, managed, host memory mapped for the GPU): only the kinds it touched
LaunchDataCountsGlobal = TypedDict("LaunchDataCountsGlobal", {
    "device": NotRequired[LaunchDataCountsGlobalKind],
    "peer": NotRequired[LaunchDataCountsGlobalKind],
    "managed": NotRequired[LaunchDataCountsGlobalKind],
    "zero-copy": NotRequired[LaunchDataCountsGlobalKind],
})


class LaunchDataCountsShared(TypedDict):
    requests: int
    wavefronts: int
    conflict_ways: float


class LaunchDataCountsConstant(TypedDict):
    """Loads of __constant__ memory: warp requests, and the distinct addresses they touched (one a broadcast)."""
    requests: int
    addresses: int
    addresses_per_request: float


LaunchDataCounts = TypedDict("LaunchDataCounts", {
    "global": LaunchDataCountsGlobal,
    "loads": int,
    "stores": int,
    "shared": LaunchDataCountsShared,
    "atomics": int,
    "warp_instructions": int,
    "constant": LaunchDataCountsConstant,
    "readonly_loads": int,  # of `loads`, those by the read-only data path (__ldg, const __restrict__ parameters)
})


class LaunchData(TimingData):
    kernel: str
    args: list[float | str]
    n: int
    grid: list[int]
    block: list[int]
    shared: int
    computed: int
    builtin: bool
    stream: str
    bytes: int  # what the kernel moved: what `sync` and the trace report
    bytes_read: int | None  # a built-in's split of it; None for a kernel of yours
    bytes_written: int | None
    counted: bool  # whether `bytes` was known: a built-in's by its definition, yours as the simulator counted it
    call: str
    counts: LaunchDataCounts | None
    access: dict[str, LaunchAccess] | None
    fault: NotRequired[str]  # the simulator saw the kernel fault: the error `sync` will report


def moved_text(d) -> str:
    """What a launch's byte count counts: a built-in reads and writes each element once (`increment` both: twice
    its buffer), `spin` touches nothing; a kernel of yours moved what the simulator counted, in 32-byte sectors."""
    if d.get("fault"):
        return "bytes moved not counted: the kernel faults (the next `sync` says where)"
    if not d["counted"]:
        return "bytes moved not counted (only the simulator counts a kernel of yours)"
    if d["bytes_read"] is None:
        return f"{format_size(d['bytes'])} moved (32-byte sectors its loads and stores touched)"
    if not d["bytes"]:
        return f"0 B moved: {d['kernel']} touches no memory"
    parts = [f"{format_size(n)} {what}" for n, what in ((d["bytes_read"], "read"), (d["bytes_written"], "written")) if n]
    return f"{format_size(d['bytes'])} moved" + (f" ({' + '.join(parts)})" if len(parts) > 1 else f", all {parts[0].split()[-1]}")


class Launched(Result, kind="launch"):
    Data = LaunchData

    def text(self):
        d = self.data
        part = f" ({d['computed']} computed: grid×block < n)" if d["builtin"] and d["computed"] < d["n"] else ""
        shared = f", {d['shared']}" if d["shared"] else ""
        n = f", n={d['n']}" if d["builtin"] and BUILTINS[d["kernel"]].counted else ""
        shape = f"{shape_text(dim3(d['grid']))}, {shape_text(dim3(d['block']))}"
        return [f"launch {d['kernel']}<<<{shape}{shared}>>>({', '.join(map(str, d['args']))}{n})"
                f"{part} on stream {d['stream']}: kernel {gpu_time(d)}, {moved_text(d)}, "
                f"{how_text(d)} {timing_note(d)}"] + counts_lines(d.get("counts")) + access_lines(d.get("access"))

    def figure(self):
        """show-access as GPU-Puzzles draws it, where the simulator traced the accesses."""
        from ..output.figures import access_figure

        return access_figure(self.data) if self.data.get("access") else None


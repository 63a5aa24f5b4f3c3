"""CUDA C for the shell's commands — one writer for both `explain on` (the statements one command stands for)
and `export c` (the session as a program that nvcc builds and that prints the checksums `checksum` printed).
It reads commands as parsed, with the buffers alive before them, so both show the same names, flags and pointer
arithmetic (`b_p0 + 1048576` for `p0[1MB:]`).

This module is the generic writer: the prelude and helpers, declarations, contexts, pointers into buffers, the
walk over history, the program's assembly and explain's formatting. The C of each command is beside its handler in
cudashell/commands/ (`@c_writer`, kept in its Spec): every exported command has one; a command it cannot write as
C that does what the session did is refused with NOT_EXPORTABLE, naming the command — never left as a comment."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

from ..errors import ShellError
from ..language.grammar import split_commands
from ..language.registry import parse_segment
from ..model.kernels import BUILTIN_SOURCE
from ..output.render import wrap

PRELUDE = r"""// Written by cudashell `export c`: the session replayed with the CUDA runtime API.
// Build and run: nvcc -O2 -o session session.cu && ./session
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <chrono>
#include <thread>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_), \
            cudaGetErrorName(e_)); exit(1); } } while (0)
""" + BUILTIN_SOURCE + r"""
static uint64_t splitmix64(uint64_t seed, uint64_t i) {  // the shell's `fill … random`
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
struct f16 { uint16_t bits; };  // `dtype float16` as the shell (numpy) writes it
static uint16_t half_bits(double d) {  // double → IEEE half, rounded to nearest, ties to even (numpy's rounding)
    uint64_t b; memcpy(&b, &d, 8);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    int exp = (int)((b >> 52) & 0x7ff);
    uint64_t man = b & 0xFFFFFFFFFFFFFull;
    if (exp == 0x7ff) return sign | 0x7c00 | (man ? 0x200 : 0);
    int e = exp - 1023 + 15;  // the half's biased exponent
    if (e >= 31) return sign | 0x7c00;
    uint64_t m = man | (1ull << 52);
    int shift = e >= 1 ? 42 : 42 + (1 - e);
    if (exp == 0 || shift > 63) return sign;
    uint64_t q = m >> shift, rest = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rest > half || (rest == half && (q & 1))) q++;
    uint32_t h = e >= 1 ? ((uint32_t)(e - 1) << 10) + (uint32_t)q : (uint32_t)q;
    return (uint16_t)(sign | (h >= 0x7c00 ? 0x7c00 : h)); }
template <typename T> static T of_double(double v) { return (T)v; }
template <> f16 of_double<f16>(double v) { return f16{half_bits(v)}; }
template <typename T> static T of_index(uint64_t i) { return (T)i; }
template <> f16 of_index<f16>(uint64_t i) { return f16{half_bits((double)i)}; }
template <typename T> static void fill_iota(void *p, size_t bytes) {
    T *a = (T *)p; for (size_t i = 0; i < bytes / sizeof(T); i++) a[i] = of_index<T>(i); }
template <typename T> static void fill_value(void *p, size_t bytes, double v) {
    T *a = (T *)p; for (size_t i = 0; i < bytes / sizeof(T); i++) a[i] = of_double<T>(v); }
template <typename T> static void fill_random(void *p, size_t bytes, uint64_t seed, bool fp) {
    T *a = (T *)p; size_t n = bytes / sizeof(T);
    if (fp) {  // a float: one draw an element, its 53 high bits in [0, 1)
        for (size_t i = 0; i < n; i++) a[i] = of_double<T>((double)(splitmix64(seed, i) >> 11) * 0x1.0p-53);
        return; }
    unsigned char *b = (unsigned char *)p; size_t whole = n * sizeof(T);  // an integer: the words' bytes in order
    for (size_t at = 0; at < whole; at += 8) {  // (a CUDA host is little-endian: memcpy lays z's low byte first)
        uint64_t z = splitmix64(seed, at / 8);
        memcpy(b + at, &z, whole - at < 8 ? whole - at : 8); } }
static void CUDART_CB host_print(void *text) { printf("callback: %s\n", (const char *)text); }
static uint64_t checksum(const void *p, size_t bytes) {  // the shell's `checksum`
    const unsigned char *b = (const unsigned char *)p; uint64_t s = 0;
    for (size_t i = 0; i < bytes; i++) s += (uint64_t)b[i] * (i % 251 + 1);
    return s; }
"""
# Written after the prelude when a command needs them.
HELPERS = {
    "hold": r"""
// `hold`: the shell's gate — a one-thread kernel on each stream polls a flag in pinned, mapped, portable memory
// until `release` writes this hold's number into it (cudashell/backends/gpu/sync.py, where the device has no
// cuStreamWaitValue32; benchmarks/ref_small.cu holds its stream the same way).
__global__ void k_hold(const volatile unsigned int *flag, unsigned int gen) {
    while (*flag < gen) {
#if __CUDA_ARCH__ >= 700
        __nanosleep(500);
#endif
    } }
""",
    "user_ptr": r"""
struct any_ptr {  // a buffer (or a part of one) passed to your kernel as whatever pointer type it takes
    void *p;
    template <typename T> operator T *() const { return (T *)p; } };
""",
    "driver": r"""
// Contexts (`context create|use|destroy`) are the driver API's: its calls are reached through the runtime
// (cudaGetDriverEntryPointByVersion), so plain nvcc builds this without -lcuda.
#include <cuda.h>
#if CUDART_VERSION < 12050
#error "contexts need CUDA 12.5 or later (cudaGetDriverEntryPointByVersion)"
#endif
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "%s:%d: %s failed: CUresult %d\n", __FILE__, __LINE__, #x, (int)r_); exit(1); } } while (0)
static void *driver_call(const char *name, unsigned int version) {
    void *f = nullptr; cudaDriverEntryPointQueryResult found;
    CHECK(cudaGetDriverEntryPointByVersion(name, &f, version, cudaEnableDefault, &found));
    if (f == nullptr || found != cudaDriverEntryPointSuccess) {
        fprintf(stderr, "the driver has no %s (version %u)\n", name, version); exit(1); }
    return f; }
static struct {
    CUresult (*deviceGet)(CUdevice *, int);
    CUresult (*ctxCreate)(CUcontext *, unsigned int, CUdevice);  // cuCtxCreate_v2
    CUresult (*ctxPopCurrent)(CUcontext *);
    CUresult (*ctxSetCurrent)(CUcontext);
    CUresult (*ctxSynchronize)(void);
    CUresult (*ctxDestroy)(CUcontext);
    CUresult (*primaryRetain)(CUcontext *, CUdevice);
    CUresult (*primaryRelease)(CUdevice);
} drv;
static void driver_init() {
    if (drv.deviceGet) return;
    drv.deviceGet = (decltype(drv.deviceGet))driver_call("cuDeviceGet", 2000);
    drv.ctxCreate = (decltype(drv.ctxCreate))driver_call("cuCtxCreate", 3020);
    drv.ctxPopCurrent = (decltype(drv.ctxPopCurrent))driver_call("cuCtxPopCurrent", 4000);
    drv.ctxSetCurrent = (decltype(drv.ctxSetCurrent))driver_call("cuCtxSetCurrent", 4000);
    drv.ctxSynchronize = (decltype(drv.ctxSynchronize))driver_call("cuCtxSynchronize", 2000);
    drv.ctxDestroy = (decltype(drv.ctxDestroy))driver_call("cuCtxDestroy", 4000);
    drv.primaryRetain = (decltype(drv.primaryRetain))driver_call("cuDevicePrimaryCtxRetain", 7000);
    drv.primaryRelease = (decltype(drv.primaryRelease))driver_call("cuDevicePrimaryCtxRelease", 11000); }
static CUcontext ctx_create(int device) {  // `context create`: made, popped, then made current (as the shell does)
    driver_init(); CUdevice d; CUcontext c, popped;
    CU(drv.deviceGet(&d, device)); CU(drv.ctxCreate(&c, 0, d)); CU(drv.ctxPopCurrent(&popped));
    CU(drv.ctxSetCurrent(c)); return c; }
static void ctx_use(CUcontext c) { driver_init(); CU(drv.ctxSetCurrent(c)); }
static void ctx_sync(CUcontext c) { driver_init(); CU(drv.ctxSetCurrent(c)); CU(drv.ctxSynchronize()); }
static void ctx_destroy(CUcontext c) { driver_init(); CU(drv.ctxDestroy(c)); }
static void use_primary(int device) {  // `device use N` / `context use gpuN`: GPU N's primary context current
    driver_init(); CHECK(cudaSetDevice(device)); CUdevice d; CUcontext c;
    CU(drv.deviceGet(&d, device)); CU(drv.primaryRetain(&c, d)); CU(drv.ctxSetCurrent(c)); CU(drv.primaryRelease(d)); }
""",
}
CTYPES = {"uint8": "uint8_t", "int8": "int8_t", "uint16": "uint16_t", "int16": "int16_t", "uint32": "uint32_t",
          "int32": "int32_t", "uint64": "uint64_t", "int64": "int64_t", "float16": None, "float32": "float",
          "float64": "double"}
RELEASE = "*(volatile unsigned int *)hold_flag = hold_gen;"  # `release`, and the program's end while held


def refuse(text: str, why: str, hint: str | None = None) -> ShellError:
    return ShellError("NOT_EXPORTABLE", f"`{_short(text)}` cannot be written as C that does what the session did: "
                      f"{why}", hint or "leave it out of the session (or `history` to see where it is)")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "…"


def ident(kind: str, name: str) -> str:
    return f"{kind}_" + re.sub(r"\W", "_", name)


def alive(session, words=None) -> tuple:
    """What the writer needs to know of a session: its buffers (name → (kind, size), a registered pageable buffer
    as 'registered'), its events, the buffers on another GPU than 0, the current GPU, and the contexts (the
    current one, those made by `context create`, which context each stream and buffer is in, whether held).
    Given the `words` of one command, only the buffers and events they name (all of them for `free all`):
    explaining a command costs the same however many buffers the session holds."""
    if words is None or "all" in words:
        bufs, events = list(session.buffers.values()), set(session.events)
    else:
        names = {w.split("[", 1)[0] for w in words}
        bufs = [session.buffers[n] for n in names if n in session.buffers]
        events = {n for n in names if n in session.events}
    where = {"current": session.current,
             "created": {n: c.device for n, c in session.contexts.items() if not c.primary},
             "streams": {n: s.context for n, s in session.streams.items()},
             "buffers": {b.name: b.context for b in bufs}, "held": session.held is not None,
             "kernels": {n: k for n, k in session.kernels.items() if not k.builtin and (words is None or n in words)},
             "symbols": {b.name: b.source_name for b in bufs if b.symbol},
             "reservations": [b.name for b in bufs if "vmm" in b.flags],
             "pitched": {b.name: b.shape.height for b in bufs if b.shape}}
    return ({b.name: ("registered" if b.registered is not None else b.kind, b.size) for b in bufs},
            events, {b.name: b.device for b in bufs if b.device}, session.context.device, where)


class Writer:
    """Turns commands into C, keeping track of what is alive: each command's writer (`Spec.c_writer`, called
    with the Writer, the parsed args, the indent and the command's text) writes through its services — `emit`,
    `declare`, `helper`, `stream`, `in_ctx`, `switch`, `ptr`, `length`, `rest`, … `body` is the program's;
    `shown` is what one command stands for (without the program's own bookkeeping, such as zeroing new memory
    as the shell does); `drivers` the driver calls behind it. `kernels`: the session's kernels (their sources,
    for `kernel load`); `gpus_here`: the GPUs the session had (whether an `if gpus` block ran); `base`: where
    relative paths are."""

    def __init__(self, buffers: dict | None = None, events=(), gpus: dict | None = None, device: int = 0,
                 where: dict | None = None, *, kernels: dict | None = None, gpus_here: int | None = None,
                 base: Path | None = None, lang: str = "en"):
        where = where or {}
        self.first: list[str] = []  # before anything else in main (the environment CUDA reads as it starts)
        self.decls: list[str] = []
        self.setup: list[str] = []  # at the top of main: attribute queries
        self.body: list[str] = []
        self.shown: list[str] = []
        self.drivers: list[str] = []
        self.buffers: dict[str, tuple[str, int]] = dict(buffers or {})  # name → (kind, size)
        self.events: set[str] = set(events)
        self.gpu_of: dict[str, int] = dict(gpus or {})  # buffers on another GPU than 0
        self.device = device  # the current GPU (`device use N`: cudaSetDevice)
        self.ctx: str = where.get("current", f"gpu{device}")  # the current context: gpuN (primary) or made
        self.created: dict[str, int] = dict(where.get("created", {}))  # contexts made by `context create` → GPU
        self.stream_ctx: dict[str, str] = dict(where.get("streams", {}))  # stream → its context
        self.stream_make: dict[str, str] = {}  # stream → the statement that made it (`reset` makes it again)
        self.buf_ctx: dict[str, str] = {n: where.get("buffers", {}).get(n, f"gpu{g}")
                                        for n, g in {**{n: 0 for n in self.buffers}, **self.gpu_of}.items()}
        self.buf_make: dict[str, str] = {}  # buffer → its allocation statement (`reset` makes it again)
        self.event_ctx: dict[str, str] = {}  # event → the context it was made in
        self.peers: set[tuple[int, int]] = set()  # peer access given (`reset` gives it again)
        self.held = bool(where.get("held"))
        self.driver_on = bool(self.created)  # contexts switch through the driver API once one was made
        self.devices: set[int] = {device, *self.gpu_of.values()}
        self.conditional: set[str] = set()  # buffers made inside an `if gpus` block
        self.unchecked: set[str] = set(where.get("reservations", ()))  # `vmm reserve` ranges: not every byte can be
        # read (no checksum at the end), and `free all` unmaps and frees them
        self.depth = 0  # how many `if gpus` blocks the writer is in
        self.ctx_before_if: list[str] = []  # the context current where each open block began
        self.helpers: list[str] = []
        self.sources: list[tuple[str, str]] = []  # users' kernels (namespace, source), written before main
        self.user: dict = {n: (k.symbol, k) for n, k in where.get("kernels", {}).items()}  # launch name → (C name, Kernel)
        self.symbols: dict[str, str] = dict(where.get("symbols", {}))  # a module's variable's buffer → its C name
        self.pitched: dict[str, int] = dict(where.get("pitched", {}))  # pitched memory → its rows a slice (`pitch_NAME`)
        self.kernels = kernels or {}
        self.gpus_here = gpus_here
        self.base = base
        self.lang = lang

    def emit(self, line: str, indent: int = 1, driver: str | None = None, replay: bool = False) -> None:
        self.body.append("    " * indent + line)
        if not replay:
            self.shown.append(line)
        if driver and driver not in self.drivers:
            self.drivers.append(driver)

    def declare(self, line: str) -> None:
        if line not in self.decls:
            self.decls.append(line)

    def set_up(self, line: str) -> None:
        if "    " + line not in self.setup:
            self.setup.append("    " + line)
            self.shown.append(line)

    def helper(self, name: str) -> None:
        if name not in self.helpers:
            self.helpers.append(name)

    def stream(self, name) -> str:
        if name in (None, "0", "default") or (name and name.endswith(":0")):
            return "0"  # a context's legacy default stream (`ctx1:0` is ctx1's), used in that context
        return ident("s", name)

    # ------------------------------------------------------------------ contexts
    def ctx_of_stream(self, name) -> str:
        if name in (None, "0", "default"):
            return self.ctx
        if name.endswith(":0"):
            return name[:-2]
        return self.stream_ctx.get(name, self.ctx)

    def switch(self, ctx: str) -> str:
        """The statement that makes `ctx` current."""
        if ctx in self.created:
            return f"ctx_use({ident('ctx', ctx)});"
        gpu = int(ctx[3:]) if ctx.startswith("gpu") and ctx[3:].isdigit() else 0
        return f"use_primary({gpu});" if self.driver_on else f"CHECK(cudaSetDevice({gpu}));"

    def in_ctx(self, ctx: str, i: int, write) -> None:
        """`write()` with `ctx` current: work on a stream runs in the stream's context, as on the GPU side."""
        if ctx == self.ctx:
            write()
            return
        self.emit(self.switch(ctx), i, "cuCtxSetCurrent", replay=True)
        write()
        self.emit(self.switch(self.ctx), i, replay=True)

    def ctx_device(self, ctx: str) -> int:
        if ctx in self.created:
            return self.created[ctx]
        return int(ctx[3:]) if ctx.startswith("gpu") and ctx[3:].isdigit() else 0

    # ------------------------------------------------------------------ commands
    def command(self, text: str, indent: int = 1) -> None:
        for seg in split_commands(text):
            cmd = parse_segment(seg)
            name, a = cmd.spec.name, cmd.args
            if not cmd.spec.exported:
                continue
            write = cmd.spec.c_writer
            if write is None:
                raise refuse(seg.text, f"`{name}` has no C writer (`@c_writer` beside its handler in "
                             "cudashell/commands/)")
            unknown = self._unknown_buffers(cmd)
            if unknown:
                raise refuse(seg.text, f"the program never made {unknown} (made by a command that failed, or "
                             "inside a `repeat`, or skipped in an `if gpus` block)")
            write(self, a, indent, seg.text)

    @staticmethod
    def named(a, text: str) -> str:
        """The NAME of what a command makes: history names what the shell named (`as NAME`), except inside a
        `repeat` block — each round makes another, and there is no C name to give."""
        if "NAME" not in a.values:
            raise refuse(text, "it names nothing the program can declare: made inside `repeat`, each round makes "
                         "another", "give it a name outside the `repeat` (`as NAME`)")
        return a.get("NAME")

    def _unknown_buffers(self, cmd) -> str | None:
        """A buffer the program never declared: made inside a `repeat` that failed, or never named."""
        for arg in cmd.spec.args + tuple(o.arg for o in cmd.spec.opts):
            for name in arg.buffers(cmd.args.values[arg.name]) if arg.name in cmd.args.values else []:
                if name != "all" and name not in self.buffers:
                    return name
        return None

    def replay(self, history) -> None:
        """The session's successful commands, in order; an `if gpus` block that ran becomes a runtime check
        around the commands it ran (history holds them, with their names, just before the block's own line)."""
        entries = [(e.text, e.ok) for e in history]
        items, i = [], len(entries) - 1
        while i >= 0:
            item, i = self._take(entries, i)
            items.append(item)
        for item in reversed(items):
            self._write_item(item, 1)

    def _take(self, entries, i):
        """The history item ending at entry i (walking backwards) and the index before it."""
        text, ok = entries[i]
        if not ok:
            return None, i - 1
        n = self._ran_block(text)
        if n is None:
            return ("cmd", text), i - 1
        segments = split_commands(_if_gpus_commands(text).replace("\n", ";"))
        inner, j = [], i - 1
        for seg in reversed(segments):
            if j < 0 or not entries[j][1] or not (entries[j][0] == seg.text or
                                                  entries[j][0].startswith(seg.text + " as ")):
                return ("ran", text), i - 1  # not what the block ran (a script inside it): its commands stand
            item, j = self._take(entries, j)
            inner.append(item)
        return ("if", n, list(reversed(inner)), text), j

    def _ran_block(self, text: str) -> int | None:
        """N, for an `if gpus N` whose block ran in the session; else None."""
        try:
            cmd = parse_segment(split_commands(text)[0])
        except ShellError:
            return None
        if cmd.spec.name != "if gpus":
            return None
        n = cmd.args.get("N")
        return n if self.gpus_here is None or self.gpus_here >= n else None

    def _write_item(self, item, i: int) -> None:
        if item is None:
            return
        if item[0] == "cmd":
            self.command(item[1], i)
        elif item[0] == "ran":
            self.emit(f"// {comment(item[1])}: the block's commands are written above, as they ran", i)
        else:
            _, n, inner, _text = item
            self.open_if(n, i)
            for sub in inner:
                self._write_item(sub, i + 1)
            self.close_if(i)

    # ------------------------------------------------------------------ pointers into buffers
    def ptr(self, part) -> str:
        """`b_p0`, or `b_p0 + 1048576` for `p0[1MB:]`: C's pointer arithmetic."""
        return ident("b", part.name) + (f" + {part.start}" if part.start else "")

    def length(self, part) -> int | None:
        """The bytes a part names when its text gave them (`[a:+n]`, `[a:b]`), else None."""
        if part.length is not None:
            return part.length
        return part.stop - part.start if part.stop is not None else None

    def rest(self, part) -> int:
        """The part's length, or what is left of its buffer from its start."""
        given = self.length(part)
        return given if given is not None else self.buffers[part.name][1] - part.start

    # ------------------------------------------------------------------ blocks and sources
    WRITTEN = ("body", "shown", "drivers", "first", "decls", "setup", "helpers", "sources", "user")

    def knowledge(self) -> dict:
        """A copy of what the writer knows of the session — not what it has written (WRITTEN): `restore` forgets
        what a block the session skipped would have made, as the session never made it."""
        return {k: (v.copy() if isinstance(v, (dict, set, list)) else v) for k, v in vars(self).items()
                if k not in self.WRITTEN}

    def restore(self, known: dict) -> None:
        vars(self).update(known)

    def open_if(self, n: int, i: int) -> None:
        """`if gpus N` as a runtime check of cudaGetDeviceCount (replay's blocks that ran, and the command's)."""
        self.emit(f"{{ int gpus = 0; CHECK(cudaGetDeviceCount(&gpus)); if (gpus >= {n}) {{  // if gpus {n}", i,
                  "cuDeviceGetCount")
        self.depth += 1
        self.ctx_before_if = self.ctx_before_if + [self.ctx]

    def close_if(self, i: int) -> None:
        before = self.ctx_before_if.pop()
        if self.ctx != before:  # with fewer GPUs the block does not run: either way the same context after it
            self.emit(f"{self.switch(self.ctx)}  // as the block left it", i + 1, replay=True)
        self.emit("} }", i)
        self.depth -= 1

    def user_source(self, source: str, names: dict) -> None:
        """A source goes above main once, in a namespace of its own (two sources may share a name)."""
        found = next((ns for ns, s in self.sources if s == source), None)
        if found is None:
            found = f"user{len(self.sources) + 1}"
            self.sources.append((found, source))
        self.user.update({n: (f"{found}::{k.symbol}", k) for n, k in names.items()})

    def module_variables(self, source: str, found: list, module: str, i: int) -> None:
        """A loaded module's variables (`found`: simt.variables' reading of `source`, above main already) as buffers
        named `module.NAME`: each a pointer from cudaGetSymbolAddress, so kernel arguments and checksums take it as
        any buffer, and `memcpy` to or from it is cudaMemcpyToSymbol / cudaMemcpyFromSymbol."""
        ns = next(ns for ns, s in self.sources if s == source)
        for var in found:
            name, cname = f"{module}.{var.name}", f"{ns}::{var.name}"
            ptr = ident("b", name)
            self.declare(f"unsigned char *{ptr} = nullptr;")
            self.emit(f"CHECK(cudaGetSymbolAddress((void **)&{ptr}, {cname}));", i, "cuModuleGetGlobal")
            self.buffers[name] = ("managed" if var.space == "managed" else "device", var.size)
            self.buf_ctx[name] = self.ctx
            self.symbols[name] = cname

    # ------------------------------------------------------------------ the program
    def program(self) -> str:
        end = []
        if self.held:
            end.append(f"    {RELEASE}  // still held when exported: let go, so the program ends")
        many = len(self.devices) > 1 or self.created or self.ctx != "gpu0"
        if many:  # every context's work finished before the checksums are read
            for d in sorted(self.devices):
                end.append(f"    {self.switch(f'gpu{d}')} CHECK(cudaDeviceSynchronize());")
            for c in self.created:
                end.append(f"    ctx_sync({ident('ctx', c)});")
            end.append(f"    {self.switch(self.ctx)}")
        else:
            end.append("    CHECK(cudaDeviceSynchronize());")
        for name, (kind, size) in self.buffers.items():
            if name in self.unchecked:
                continue
            var = ident("b", name)
            if kind == "device":
                line = (f"{{ unsigned char *t = (unsigned char *)malloc({size}); "
                        f"CHECK(cudaMemcpy(t, {var}, {size}, cudaMemcpyDeviceToHost)); "
                        f'printf("checksum {name} %llu\\n", (unsigned long long)checksum(t, {size})); free(t); }}')
                there = self.buf_ctx.get(name, self.ctx)
                if there != self.ctx:
                    line = f"{self.switch(there)} {line} {self.switch(self.ctx)}"
            else:
                line = f'printf("checksum {name} %llu\\n", (unsigned long long)checksum({var}, {size}));'
            end.append(f"    if ({var}) {{ {line} }}" if name in self.conditional else f"    {line}")
        prelude = PRELUDE
        if "driver" in self.helpers:
            prelude = prelude.replace("// Build and run: nvcc -O2 -o session session.cu",
                                      "// Build and run (CUDA 12.5 or later): nvcc -O2 -o session session.cu")
        return (prelude + "".join(HELPERS[h] for h in self.helpers)
                + "".join(_namespaced(ns, s) for ns, s in self.sources)
                + "\nint main() {\n" + "".join(f"    {f}\n" for f in self.first)
                + "".join(f"    {d}\n" for d in self.decls) + "".join(line + "\n" for line in self.setup)
                + "\n".join(self.body) + "\n" + "\n".join(end) + "\n    return 0;\n}\n")


_SYSTEM_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<[^>\n]*>[^\n]*$", re.M)


def _namespaced(ns: str, source: str) -> str:
    """A user's source in a namespace of its own; its #include <…> lines go before it (headers belong outside)."""
    includes = _SYSTEM_INCLUDE.findall(source)
    body = _SYSTEM_INCLUDE.sub("", source).strip()
    return "\n" + "".join(line.strip() + "\n" for line in includes) + f"namespace {ns} {{\n{body}\n}}  // {ns}\n"


@contextmanager
def inside(text: str):
    """A refusal inside a block names the block too."""
    try:
        yield
    except ShellError as e:
        if e.code == "NOT_EXPORTABLE":
            e.message = f"in `{_short(text)}`: {e.message}"
        raise


def _if_gpus_commands(text: str) -> str:
    return parse_segment(split_commands(text)[0]).args.get("COMMANDS")


def comment(text: str) -> str:
    """A command's text, shortened, inside a C comment."""
    return _short(text).replace("*/", "* /")


def explain(text: str, buffers: dict, events, gpus: dict, device: int, where: dict | None = None) \
        -> tuple[str, str] | None:
    """(C, driver calls) for one command that succeeded, given what was alive before it (`alive`); None when it
    stands for no CUDA (ls, help, show…) or cannot be written alone."""
    w = Writer(buffers, events, gpus, device, where)
    try:
        w.command(text)
    except ShellError:
        return None
    except KeyError:  # something made before that explain's view of the session leaves out
        return None
    if not w.shown:
        return None
    return "\n".join(w.shown), ", ".join(w.drivers) or "(none: the host does it)"


C_PIECE = re.compile(r""""(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|[^,\s"']+|,\s*|\s+|["']""")


def explain_lines(c: str, driver: str, width: int = 0) -> list[str]:
    """`explain on`'s two fields, fitted to the terminal: the C broken only between tokens — after a comma or a
    space, never inside a name, a number or a string — its continuation lines indented under it; the driver calls
    between words."""
    head, pad = "  C:      ", " " * 10
    out = []
    for i, line in enumerate(c.split("\n")):
        cur = (head if i == 0 else pad) + line[:len(line) - len(line.lstrip())]
        more, filled, piece = " " * (len(cur) + 4), False, ""
        for token in C_PIECE.findall(line.lstrip()) + [""]:
            piece += token
            if token and token[0] not in ", \t":  # a line may break only after a comma or a space
                continue
            if width and filled and len(cur) + len(piece.rstrip()) > width:
                out.append(cur.rstrip())
                cur = more
            cur, piece, filled = cur + piece, "", True
        out.append(cur.rstrip())
    driver = "  driver: " + driver
    return out + wrap([driver], width, indent=pad)


def cstr(text: str) -> str:
    """Text as a C string literal (backslashes and quotes escaped): every caller prints it through "%s", so a %
    stays as it is."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

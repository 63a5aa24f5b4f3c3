"""CUDA C for the shell's commands — one writer for both `explain on` (the statements one command stands for)
and `export c` (the session as a program that nvcc builds and that prints the checksums `checksum` printed).
It reads commands as parsed, with the buffers alive before them, so both show the same names, flags and pointer
arithmetic (`b_p0 + 1048576` for `p0[1MB:]`).

Every exported command (a spec with `exported` true) has a writer here, `c_<name>`; a command it cannot write as
C that does what the session did is refused with NOT_EXPORTABLE, naming the command — never left as a comment."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

from .errors import ShellError
from .argkinds import parse_part
from .grammar import split_commands
from .kernels import BUILTIN_SOURCE, BUILTINS, parse_kernels, with_includes
from .launchdims import c_dims, default_grid, dim3, is_1d
from .registry import parse_segment
from .render import wrap

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
template <typename T> static T of_bits(uint64_t z) { return (T)z; }
template <> f16 of_bits<f16>(uint64_t z) { return f16{(uint16_t)z}; }
template <typename T> static void fill_iota(void *p, size_t bytes) {
    T *a = (T *)p; for (size_t i = 0; i < bytes / sizeof(T); i++) a[i] = of_index<T>(i); }
template <typename T> static void fill_value(void *p, size_t bytes, double v) {
    T *a = (T *)p; for (size_t i = 0; i < bytes / sizeof(T); i++) a[i] = of_double<T>(v); }
template <typename T> static void fill_random(void *p, size_t bytes, uint64_t seed, bool fp) {
    T *a = (T *)p;
    for (size_t i = 0; i < bytes / sizeof(T); i++) {
        uint64_t z = splitmix64(seed, i);
        a[i] = fp ? of_double<T>((double)(z >> 11) * 0x1.0p-53) : of_bits<T>(z);
    } }
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
FILL_TYPES = {**CTYPES, "float16": "f16"}
HOST_ALLOC_FLAGS = {"portable": "cudaHostAllocPortable", "mapped": "cudaHostAllocMapped",
                    "writecombined": "cudaHostAllocWriteCombined"}
REGISTER_FLAGS = {"portable": "cudaHostRegisterPortable", "mapped": "cudaHostRegisterMapped",
                  "readonly": "cudaHostRegisterReadOnly"}
DIRS = {"h2d": "cudaMemcpyHostToDevice", "d2h": "cudaMemcpyDeviceToHost", "d2d": "cudaMemcpyDeviceToDevice",
        "h2h": "cudaMemcpyHostToHost"}
EAGER = 'setenv("CUDA_MODULE_LOADING", "EAGER", 1);  // `hold`: no kernel may load (and wait) while streams are held'
HOLD_FLAG = ("if (!hold_flag) { CHECK(cudaHostAlloc((void **)&hold_flag, sizeof(unsigned int), "
             "cudaHostAllocPortable | cudaHostAllocMapped)); *hold_flag = 0; }")
RELEASE = "*(volatile unsigned int *)hold_flag = hold_gen;"


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
             "kernels": {n: k for n, k in session.kernels.items() if not k.builtin and (words is None or n in words)}}
    return ({b.name: ("registered" if b.registered is not None else b.kind, b.size) for b in bufs},
            events, {b.name: b.device for b in bufs if b.device}, session.context.device, where)


class Writer:
    """Turns commands into C, keeping track of what is alive. `body` is the program's; `shown` is what one
    command stands for (without the program's own bookkeeping, such as zeroing new memory as the shell does);
    `drivers` the driver calls behind it. `kernels`: the session's kernels (their sources, for `kernel load`);
    `gpus_here`: the GPUs the session had (whether an `if gpus` block ran); `base`: where relative paths are."""

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
        self.depth = 0  # how many `if gpus` blocks the writer is in
        self.ctx_before_if: list[str] = []  # the context current where each open block began
        self.helpers: list[str] = []
        self.notes: list[str] = []
        self.sources: list[tuple[str, str]] = []  # users' kernels (namespace, source), written before main
        self.user: dict = {n: (k.symbol, k) for n, k in where.get("kernels", {}).items()}  # launch name → (C name, Kernel)
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
            handler = getattr(self, "c_" + name.replace(" ", "_"), None)
            if handler is None:
                raise refuse(seg.text, f"`{name}` has no C writer (cudashell/cemit.py)")
            if self._unnamed(cmd):
                raise refuse(seg.text, "it names nothing the program can declare: made inside `repeat`, "
                             "each round makes another", "give it a name outside the `repeat` (`as NAME`)")
            unknown = self._unknown_buffers(cmd)
            if unknown:
                raise refuse(seg.text, f"the program never made {unknown} (made by a command that failed, or "
                             "inside a `repeat`, or skipped in an `if gpus` block)")
            handler(a, indent, seg.text)

    @staticmethod
    def _unnamed(cmd) -> bool:
        """History names what the shell named (`as NAME`), except inside a `repeat` block: no C name to give."""
        return cmd.spec.name in ("alloc", "stream create") and "NAME" not in cmd.args.values

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
            self.emit(f"// {_comment(item[1])}: the block's commands are written above, as they ran", i)
        else:
            _, n, inner, _text = item
            self._open_if(n, i)
            for sub in inner:
                self._write_item(sub, i + 1)
            self._close_if(i)

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

    # ------------------------------------------------------------------ memory
    def c_alloc(self, a, i, text):
        kind, size = a.get("KIND"), a.get("SIZE")
        name = a.get("NAME")  # history names it (the shell adds `as NAME`)
        var = ident("b", name)
        self.declare(f"unsigned char *{var} = nullptr;")
        flags = " | ".join(HOST_ALLOC_FLAGS[f] for f in sorted(a.flags) if f in HOST_ALLOC_FLAGS) \
            or "cudaHostAllocDefault"
        line, driver = {
            "pageable": (f"{var} = (unsigned char *)calloc({size}, 1);", "mmap (pageable pages)"),
            "pinned": (f"CHECK(cudaHostAlloc((void **)&{var}, {size}, {flags}));", "cuMemHostAlloc"),
            "device": (f"CHECK(cudaMalloc((void **)&{var}, {size}));", "cuMemAlloc_v2"),
            "managed": (f"CHECK(cudaMallocManaged((void **)&{var}, {size}, "
                        f"{'cudaMemAttachHost' if 'host' in a.flags else 'cudaMemAttachGlobal'}));",
                        "cuMemAllocManaged")}[kind]
        here = self.ctx
        gpu = a.get("GPU")
        there = f"gpu{gpu}" if gpu is not None else here
        if there != here:  # another GPU's memory: made with its primary context current
            self.emit(self.switch(there), i, "cuCtxSetCurrent")
        self.emit(line, i, driver)
        if kind != "pageable":  # the shell's memory starts zeroed, as calloc's does
            self._zero(var, kind, size, i)
        if there != here:
            self.emit("CHECK(cudaDeviceSynchronize());", i, replay=True)
            self.emit(self.switch(here), i)
            if kind != "device":
                self.emit("CHECK(cudaDeviceSynchronize());", i, replay=True)
        self.buffers[name] = (kind, size)
        self.buf_ctx[name] = there
        self.buf_make[name] = line
        device = self.ctx_device(there)
        self.devices.add(device)
        if device:
            self.gpu_of[name] = device
        if self.depth:
            self.conditional.add(name)

    def _zero(self, var: str, kind: str, size: int, i: int) -> None:
        """New memory zeroed, as the shell's is. While held the default stream waits for `release` (and a
        synchronous memset of pinned memory would wait for it forever): pinned memory is zeroed by the host,
        GPU memory on a stream of its own."""
        if not self.held:
            self.emit(f"CHECK(cudaMemset({var}, 0, {size}));", i, replay=True)
        elif kind == "pinned":
            self.emit(f"memset({var}, 0, {size});", i, replay=True)
        else:
            self.emit(f"{{ cudaStream_t z; CHECK(cudaStreamCreateWithFlags(&z, cudaStreamNonBlocking)); "
                      f"CHECK(cudaMemsetAsync({var}, 0, {size}, z)); CHECK(cudaStreamSynchronize(z)); "
                      f"CHECK(cudaStreamDestroy(z)); }}", i, replay=True)

    def c_device_use(self, a, i, text):
        self.device = a.get("GPU")
        self.ctx = f"gpu{self.device}"
        self.devices.add(self.device)
        self.emit(self.switch(self.ctx), i, "cuDevicePrimaryCtxRetain, cuCtxSetCurrent")

    def c_register(self, a, i, text):
        name = a.get("NAME")
        flags = " | ".join(REGISTER_FLAGS[f] for f in sorted(a.flags)) or "cudaHostRegisterDefault"
        line = f"CHECK(cudaHostRegister({ident('b', name)}, {self.buffers[name][1]}, {flags}));"
        self.emit(line, i, "cuMemHostRegister_v2")
        self.buffers[name] = ("registered", self.buffers[name][1])
        self.buf_make[name + "\0registered"] = line

    def c_unregister(self, a, i, text):
        name = a.get("NAME")
        self.emit(f"CHECK(cudaHostUnregister({ident('b', name)}));", i, "cuMemHostUnregister")
        self.buffers[name] = ("pageable", self.buffers[name][1])
        self.buf_make.pop(name + "\0registered", None)

    def c_peer(self, a, i, text):
        src, dst, on = a.get("A"), a.get("B"), a.get("SWITCH") == "enable"
        call = f"cudaDeviceEnablePeerAccess({dst}, 0)" if on else f"cudaDeviceDisablePeerAccess({dst})"
        self.devices |= {src, dst}
        (self.peers.add if on else self.peers.discard)((src, dst))
        self.emit(f"{self.switch(f'gpu{src}')} CHECK({call}); {self.switch(self.ctx)}", i,
                  "cuCtxEnablePeerAccess" if on else "cuCtxDisablePeerAccess")

    def c_free(self, a, i, text):
        names = list(self.buffers) if a.get("NAME") == ["all"] else list(dict.fromkeys(a.get("NAME")))
        for name in names:
            kind, _ = self.buffers.pop(name)
            var = ident("b", name)
            if kind == "registered":
                self.emit(f"CHECK(cudaHostUnregister({var}));", i, "cuMemHostUnregister")
            line, driver = {"pageable": (f"free({var});", "munmap"), "registered": (f"free({var});", "munmap"),
                            "pinned": (f"CHECK(cudaFreeHost({var}));", "cuMemFreeHost")}.get(
                                kind, (f"CHECK(cudaFree({var}));", "cuMemFree_v2"))
            self.gpu_of.pop(name, None)
            there = self.buf_ctx.pop(name, self.ctx)
            for key in (name, name + "\0registered"):
                self.buf_make.pop(key, None)
            self.conditional.discard(name)
            if kind == "pageable":  # malloc's memory: no context to be in
                there = self.ctx
            self.emit(f"{self.switch(there)} {line} {self.switch(self.ctx)}"
                      if there != self.ctx else line, i, driver)
            self.emit(f"{var} = nullptr;", i, replay=True)

    def c_fill(self, a, i, text):
        name, value, dtype = a.get("NAME"), a.get("VALUE"), a.get("T", "uint8")
        ctype = FILL_TYPES[dtype]
        var, size = ident("b", name), self.buffers[name][1]
        if value == "iota":
            self.emit(f"fill_iota<{ctype}>({var}, {size});", i)
        elif value == "random":
            self.emit(f"fill_random<{ctype}>({var}, {size}, {a.get('SEED', 0)}ull, "
                      f"{str(dtype.startswith('float')).lower()});", i)
        else:
            self.emit(f"fill_value<{ctype}>({var}, {size}, {value!r});", i)

    def c_show(self, a, i, text):
        pass  # the host reads the memory: nothing for the program to do

    # ------------------------------------------------------------------ copies
    def c_memcpy(self, a, i, text):
        src, dst = a.get("SRC"), a.get("DST")
        nbytes = a.get("SIZE")
        if nbytes is None:
            nbytes = self.length(src) if self.length(src) is not None else self.rest(src) \
                if self.length(dst) is None else self.length(dst)
        direction = a.get("DIR") or _infer(self.buffers[src.name][0], self.buffers[dst.name][0])
        self.maybe_async(a, i, "cudaMemcpy", f"{self.ptr(dst)}, {self.ptr(src)}, {nbytes}, {DIRS[direction]}",
                         "cuMemcpy")

    def c_memset(self, a, i, text):
        part = a.get("NAME")
        nbytes = a.get("SIZE", self.rest(part))
        self.maybe_async(a, i, "cudaMemset", f"{self.ptr(part)}, {a.get('BYTE')}, {nbytes}", "cuMemsetD8")

    def maybe_async(self, a, i, call: str, args: str, driver: str) -> None:
        if "async" in a.flags:
            self.in_ctx(self.ctx_of_stream(a.get("S")), i, lambda: self.emit(
                f"CHECK({call}Async({args}, {self.stream(a.get('S'))}));", i, driver + "Async"))
        else:
            self.emit(f"CHECK({call}({args}));", i, driver + ("_v2" if driver == "cuMemsetD8" else ""))

    # ------------------------------------------------------------------ streams and events
    def c_stream_create(self, a, i, text):
        name = a.get("NAME")
        var = ident("s", name)
        self.declare(f"cudaStream_t {var};")
        prio = a.get("PRIORITY", "0")
        prio_expr = {"high": "greatest", "low": "least"}.get(str(prio).lower(), str(prio))
        line = (f"{{ int least, greatest; CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest)); "
                f"(void)least; (void)greatest; CHECK(cudaStreamCreateWithPriority(&{var}, "
                f"{'cudaStreamNonBlocking' if 'nonblocking' in a.flags else 'cudaStreamDefault'}, {prio_expr})); }}")
        self.emit(line, i, "cuStreamCreateWithPriority")
        self.stream_ctx[name] = self.ctx
        self.stream_make[name] = line
        if self.held:  # held streams are every stream, those made later too
            self.emit(f"k_hold<<<1, 1, 0, {var}>>>(hold_flag, hold_gen); CHECK(cudaGetLastError());", i,
                      "cuLaunchKernel")

    def c_stream_destroy(self, a, i, text):
        s = a.get("S")
        self.in_ctx(self.ctx_of_stream(s), i, lambda: self.emit(
            f"CHECK(cudaStreamDestroy({self.stream(s)}));", i, "cuStreamDestroy_v2"))
        self.stream_ctx.pop(s, None)
        self.stream_make.pop(s, None)

    def c_sync(self, a, i, text):
        if a.get("E"):
            self.emit(f"CHECK(cudaEventSynchronize({ident('e', a.get('E'))}));", i, "cuEventSynchronize")
        elif a.get("S") is not None:
            s = a.get("S")
            self.in_ctx(self.ctx_of_stream(s), i, lambda: self.emit(
                f"CHECK(cudaStreamSynchronize({self.stream(s)}));", i, "cuStreamSynchronize"))
        else:
            self.emit("CHECK(cudaDeviceSynchronize());", i, "cuCtxSynchronize")

    def c_event_record(self, a, i, text):
        name = a.get("E")
        var = ident("e", name)
        if name not in self.events:  # made on first use, in the current context (again after `event destroy`)
            self.events.add(name)
            self.event_ctx[name] = self.ctx
            self.declare(f"cudaEvent_t {var} = nullptr;")
            self.emit(f"if (!{var}) CHECK(cudaEventCreate(&{var}));", i, "cuEventCreate", replay=True)
            self.shown.append(f"CHECK(cudaEventCreate(&{var}));")
        self.in_ctx(self.ctx_of_stream(a.get("S")), i, lambda: self.emit(
            f"CHECK(cudaEventRecord({var}, {self.stream(a.get('S'))}));", i, "cuEventRecord"))

    def c_event_destroy(self, a, i, text):
        name = a.get("E")
        var = ident("e", name)
        self.emit(f"CHECK(cudaEventDestroy({var}));", i, "cuEventDestroy_v2")
        self.emit(f"{var} = nullptr;", i, replay=True)
        self.events.discard(name)

    def c_event_sync(self, a, i, text):
        self.emit(f"CHECK(cudaEventSynchronize({ident('e', a.get('E'))}));", i, "cuEventSynchronize")

    def c_elapsed(self, a, i, text):
        e1, e2 = a.get("E1"), a.get("E2")
        self.emit(f'{{ float ms; CHECK(cudaEventElapsedTime(&ms, {ident("e", e1)}, {ident("e", e2)})); '
                  f'printf("elapsed {e1} {e2} %.3f ms\\n", ms); }}', i, "cuEventElapsedTime")

    def c_wait(self, a, i, text):
        s = a.get("S")
        self.in_ctx(self.ctx_of_stream(s), i, lambda: self.emit(
            f"CHECK(cudaStreamWaitEvent({self.stream(s)}, {ident('e', a.get('E'))}, 0));", i, "cuStreamWaitEvent"))

    def c_callback(self, a, i, text):
        s = a.get("S")
        self.in_ctx(self.ctx_of_stream(s), i, lambda: self.emit(
            f"CHECK(cudaLaunchHostFunc({self.stream(s)}, host_print, (void *){_cstr(a.get('TEXT'))}));", i,
            "cuLaunchHostFunc"))

    def c_echo(self, a, i, text):
        if a.get("TEXT"):
            self.emit(f'printf("%s\\n", {_cstr(a.get("TEXT"))});', i)

    def c_say(self, a, i, text):
        if a.get("TEXT") and a.get("LANG") == self.lang:
            self.emit(f'printf("%s\\n", {_cstr(a.get("TEXT"))});', i)

    def c_sleep(self, a, i, text):
        self.emit(f"std::this_thread::sleep_for(std::chrono::milliseconds({a.get('MS')}));", i,
                  "(none: host time passes)")

    def c_hold(self, a, i, text):
        """Every stream (the current context's default stream too) waits on the gate kernel for `release`."""
        self.helper("hold")
        if EAGER not in self.first:
            self.first.append(EAGER)
        self.declare("unsigned int *hold_flag = nullptr;")
        self.declare("unsigned int hold_gen = 0;")
        self.emit(HOLD_FLAG, i, "cuMemHostAlloc")
        self.emit("hold_gen++;", i)
        for s in ["0", *self.stream_ctx]:
            self.in_ctx(self.ctx_of_stream(s), i, lambda s=s: self.emit(
                f"k_hold<<<1, 1, 0, {self.stream(s)}>>>(hold_flag, hold_gen); CHECK(cudaGetLastError());", i,
                "cuLaunchKernel"))
        self.held = True

    def c_release(self, a, i, text):
        self.emit(RELEASE, i, "(none: a host write of the flag)")
        self.held = False

    # ------------------------------------------------------------------ contexts
    def c_context_create(self, a, i, text):
        name = a.get("NAME")
        if name is None:  # the shell's default name: the first ctxN free
            n = 1
            while f"ctx{n}" in self.created:
                n += 1
            name = f"ctx{n}"
        gpu = a.get("GPU", self.device)
        var = ident("ctx", name)
        self.helper("driver")
        self.declare(f"CUcontext {var} = nullptr;")
        self.emit(f"{var} = ctx_create({gpu});", i, "cuCtxCreate, cuCtxPopCurrent, cuCtxSetCurrent")
        self.created[name] = gpu
        self.driver_on = True
        self.ctx, self.device = name, gpu
        self.devices.add(gpu)

    def c_context_use(self, a, i, text):
        name = a.get("NAME")
        if name not in self.created and not re.fullmatch(r"gpu\d+", name):
            raise refuse(text, f"the program never made context {name}")
        self.helper("driver")
        self.driver_on = True  # a primary after a made context: set through the driver, not cudaSetDevice alone
        self.ctx, self.device = name, self.ctx_device(name)
        self.devices.add(self.device)
        self.emit(self.switch(name), i, "cuCtxSetCurrent")

    def c_context_destroy(self, a, i, text):
        name = a.get("NAME")
        if name not in self.created:
            raise refuse(text, f"the program never made context {name}")
        var = ident("ctx", name)
        self.helper("driver")
        self.emit(f"ctx_sync({var});", i, "cuCtxSynchronize", replay=True)
        del self.created[name]
        if self.ctx == name:  # the shell goes back to GPU 0's primary context
            self.ctx, self.device = "gpu0", 0
        self.emit(self.switch(self.ctx), i, replay=True)
        self.emit(f"ctx_destroy({var}); {var} = nullptr;", i, "cuCtxDestroy_v2")

    # ------------------------------------------------------------------ the session
    def c_if_gpus(self, a, i, text):
        """The block in a runtime check of cudaGetDeviceCount. From history (`replay`) a block that ran is written
        from the commands it ran; here the block's own text: one that ran (explain), or one the session skipped
        (then what it would make is forgotten after it, as the session never made it)."""
        n = a.get("N")
        ran = self.gpus_here is None or self.gpus_here >= n
        if ran:
            self._open_if(n, i)
            with _inside(text):
                self.command(a.get("COMMANDS").replace("\n", ";"), i + 1)
            self._close_if(i)
            return
        keep = {k: (v.copy() if isinstance(v, (dict, set, list)) else v) for k, v in vars(self).items()
                if k not in ("body", "shown", "drivers", "first", "decls", "setup", "helpers", "sources", "user")}
        mark = len(self.body)
        try:
            self._open_if(n, i)
            self.command(a.get("COMMANDS").replace("\n", ";"), i + 1)
            self._close_if(i)
        except ShellError:  # cannot be written without the names the shell would have given: it did nothing here
            del self.body[mark:]
            self.depth = keep["depth"]
            self.emit(f"// {_comment(text)}: skipped in the session ({self.gpus_here} GPU"
                      f"{'s' * (self.gpus_here != 1)}), and here", i)
        vars(self).update(keep)

    def _open_if(self, n: int, i: int) -> None:
        self.emit(f"{{ int gpus = 0; CHECK(cudaGetDeviceCount(&gpus)); if (gpus >= {n}) {{  // if gpus {n}", i,
                  "cuDeviceGetCount")
        self.depth += 1
        self.ctx_before_if = self.ctx_before_if + [self.ctx]

    def _close_if(self, i: int) -> None:
        before = self.ctx_before_if.pop()
        if self.ctx != before:  # with fewer GPUs the block does not run: either way the same context after it
            self.emit(f"{self.switch(self.ctx)}  // as the block left it", i + 1, replay=True)
        self.emit("} }", i)
        self.depth -= 1

    def c_reset(self, a, i, text):
        """cudaDeviceReset on every GPU the session used, then what the shell makes again, each in its context:
        buffers (host contents kept, device contents lost: zeroed, as new memory is), registrations, streams,
        events and peer access; the runtime loads the kernels again."""
        if self.held:
            raise refuse(text, "the work held since `hold` never runs in the session; cudaDeviceReset would wait "
                         "for it forever", "`release` before `reset`")
        if self.created:
            raise refuse(text, f"the shell makes context {', '.join(self.created)} again; cudaDeviceReset resets "
                         "the GPUs' primary contexts alone", "destroy the contexts you made before `reset`")
        missing = [n for n in self.buffers if n not in self.buf_make] + \
            [s for s in self.stream_ctx if s not in self.stream_make]
        if missing:
            raise refuse(text, f"the program does not know how {', '.join(missing)} were made")
        gpus = sorted(self.devices)
        self.emit("{  // reset: a fresh context, and everything made again in it", i)
        j = i + 1
        for d in gpus:
            self.in_ctx(f"gpu{d}", j, lambda: self.emit("CHECK(cudaDeviceSynchronize());", j, "cuCtxSynchronize"))
        for n, (kind, size) in self.buffers.items():
            if kind in ("pinned", "managed"):
                var = ident("b", n)
                self.emit(f"unsigned char *keep_{var} = (unsigned char *)malloc({size}); "
                          f"memcpy(keep_{var}, {var}, {size});", j, replay=True)
        for d in gpus:
            self.in_ctx(f"gpu{d}", j, lambda: self.emit("CHECK(cudaDeviceReset());", j, "cuDevicePrimaryCtxReset"))
        if "hold" in self.helpers:
            self.emit("hold_flag = nullptr;  // freed with the context: the next `hold` makes it again", j,
                      replay=True)
        for n, (kind, size) in self.buffers.items():
            var = ident("b", n)
            if kind in ("pageable", "registered"):  # malloc's pages outlive the context; their pinning does not
                if kind == "registered":
                    self.emit(self.buf_make[n + "\0registered"], j, "cuMemHostRegister_v2")
                continue

            def remake(n=n, kind=kind, size=size, var=var):
                self.emit(self.buf_make[n], j)
                if kind == "device":
                    self.emit(f"CHECK(cudaMemset({var}, 0, {size}));", j, replay=True)
                else:
                    self.emit(f"memcpy({var}, keep_{var}, {size}); free(keep_{var});", j, replay=True)
            self.in_ctx(self.buf_ctx.get(n, self.ctx), j, remake)
        for s_ in self.stream_ctx:
            self.in_ctx(self.stream_ctx[s_], j, lambda s_=s_: self.emit(self.stream_make[s_], j))
        for e in sorted(self.events):
            var = ident("e", e)
            self.in_ctx(self.event_ctx.get(e, self.ctx), j,
                        lambda var=var: self.emit(f"CHECK(cudaEventCreate(&{var}));", j, "cuEventCreate"))
        for src, dst in sorted(self.peers):
            self.emit(f"{self.switch(f'gpu{src}')} CHECK(cudaDeviceEnablePeerAccess({dst}, 0)); "
                      f"{self.switch(self.ctx)}", j, "cuCtxEnablePeerAccess")
        self.emit("}", i)

    # ------------------------------------------------------------------ kernels
    def _user_source(self, source: str, names: dict) -> None:
        """A source goes above main once, in a namespace of its own (two sources may share a name)."""
        found = next((ns for ns, s in self.sources if s == source), None)
        if found is None:
            found = f"user{len(self.sources) + 1}"
            self.sources.append((found, source))
        self.user.update({n: (f"{found}::{k.symbol}", k) for n, k in names.items()})

    def c_kernel_define(self, a, i, text):
        name, source = a.get("NAME"), a.get("SOURCE")
        known = self.kernels.get(name)
        expanded = with_includes(source, known.path) if known is not None and known.path else source
        found = parse_kernels(expanded)
        names = {k.name: k for k in found}
        if name not in names and len(found) == 1:
            names[name] = found[0]
        self._user_source(expanded, names)
        self.emit(f"// kernel define {name}: its source is above main", i)

    def c_kernel_load(self, a, i, text):
        path, mod = a.get("FILE"), a.get("MOD")
        prefix = f"{mod}." if mod else ""
        source, where = self._loaded_source(path, prefix)
        if source is None:
            raise refuse(text, f"cannot read {path} from here", "export from where the session loaded it")
        expanded = with_includes(source, where)
        self._user_source(expanded, {prefix + k.name: k for k in parse_kernels(expanded)})
        self.emit(f"// kernel load {path}: its source is above main", i)

    def _loaded_source(self, path: str, prefix: str) -> tuple[str | None, str | None]:
        """The source the session compiled (its kernels keep it, for `reset`), else the file read now."""
        want = Path(path)
        for n, k in self.kernels.items():
            if not k.builtin and k.path and n.startswith(prefix) and ("." not in n[len(prefix):]) and \
                    Path(k.path).parts[-len(want.parts):] == want.parts:
                return k.source, k.path
        for where in ([want] if want.is_absolute() else [p / want for p in (self.base, Path.cwd()) if p]):
            try:
                return where.read_text(encoding="utf-8"), str(where)
            except (OSError, UnicodeDecodeError):
                continue
        return None, None

    def c_launch(self, a, i, text):
        kernel = BUILTINS.get(a.get("KERNEL"))
        if kernel is None and a.get("KERNEL") in self.user:
            self.in_ctx(self.ctx_of_stream(a.get("S")), i, lambda: self._launch_user(*self.user[a.get("KERNEL")],
                                                                                     a, i, text))
            return
        if kernel is None:
            raise refuse(text, f"no source for kernel {a.get('KERNEL')} (its `kernel define` or `kernel load` is "
                         "not in the session's history)")
        words = a.get("ARG") or []
        parts = {k: parse_part(w) for k, (p, w) in enumerate(zip(kernel.params, words)) if p.is_buffer}
        missing = [part.name for part in parts.values() if part.name not in self.buffers]
        if missing:
            raise refuse(text, f"the program never made {missing[0]}")
        block = a.get("B", dim3(kernel.block))
        n = a.get("ELEMENTS", min(self.rest(part) for part in parts.values()) // 4 if parts else 1)
        grid = a.get("G") or default_grid(n, block)
        args = []
        for k, (p, w) in enumerate(zip(kernel.params, words)):
            if p.is_buffer:
                args.append(f"(float *)({self.ptr(parts[k])})" if parts[k].start else f"(float *){self.ptr(parts[k])}")
            elif p.unit == "us":  # microseconds: in clock ticks, as the kernel counts
                args.append(f"(long long){int(float(w.rstrip('lLiu')))} * clock_khz / 1000")
                self.declare("int clock_khz = 0;")
                self.set_up("CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));")
            else:
                args.append(re.sub(r"[a-zA-Z]+$", "", w) + ("f" if "." in w else ""))
        if kernel.counted:
            args.append(str(n))
        self.in_ctx(self.ctx_of_stream(a.get("S")), i,
                    lambda: self._emit_launch(kernel.symbol, grid, block, a, i, args))

    def _launch_user(self, symbol, kernel, a, i, text):
        words = a.get("ARG") or []
        args, sizes = [], []
        for p, w in zip(kernel.params, words):
            if p.is_buffer:
                part = parse_part(w)
                if part.name not in self.buffers:
                    raise refuse(text, f"the program never made {part.name}")
                self.helper("user_ptr")
                args.append(f"any_ptr{{{self.ptr(part)}}}")
                sizes.append(self.rest(part))
            else:
                args.append(_c_scalar(w, p.dtype))
        block = a.get("B") or dim3(256)
        grid = a.get("G") or default_grid(max(sizes) // 4 if sizes else 1, block)  # as the shell's launch
        self._emit_launch(symbol, grid, block, a, i, args)

    def _emit_launch(self, symbol, grid, block, a, i, args):
        rest = f"{a.get('BYTES', 0)}, {self.stream(a.get('S'))}>>>({', '.join(args)});"
        if is_1d(grid) and is_1d(block):
            self.emit(f"{symbol}<<<{grid[0]}, {block[0]}, {rest}", i, "cuLaunchKernel")
        else:  # C's dim3, in a scope of its own: the next launch declares its own
            self.emit("{", i)
            self.emit(f"    dim3 grid({c_dims(grid)}); dim3 block({c_dims(block)});", i)
            self.emit(f"    {symbol}<<<grid, block, {rest}", i, "cuLaunchKernel")
            self.emit("}", i)
        self.emit("CHECK(cudaGetLastError());", i, replay=True)

    def c_prefetch(self, a, i, text):
        name, where = a.get("NAME"), a.get("WHERE")
        loc = (f"cudaMemLocationTypeDevice, {self.ctx_device(self.ctx_of_stream(a.get('S')))}" if where == "device"
               else "cudaMemLocationTypeHost, 0")
        self.in_ctx(self.ctx_of_stream(a.get("S")), i, lambda: self.emit(
            f"{{ cudaMemLocation loc = {{{loc}}}; CHECK(cudaMemPrefetchAsync({ident('b', name)}, "
            f"{self.buffers[name][1]}, loc, 0, {self.stream(a.get('S'))})); }}", i, "cuMemPrefetchAsync_v2"))

    def c_advise(self, a, i, text):
        name, advice, where = a.get("NAME"), a.get("ADVICE"), a.get("WHERE") or "device"
        what = {"readmostly": "cudaMemAdviseSetReadMostly", "preferred": "cudaMemAdviseSetPreferredLocation",
                "accessed-by": "cudaMemAdviseSetAccessedBy"}[advice]
        loc = f"cudaMemLocationTypeDevice, {self.device}" if where == "device" else "cudaMemLocationTypeHost, 0"
        self.emit(f"{{ cudaMemLocation loc = {{{loc}}}; CHECK(cudaMemAdvise({ident('b', name)}, "
                  f"{self.buffers[name][1]}, {what}, loc)); }}", i, "cuMemAdvise_v2")

    def c_repeat(self, a, i, text):
        self.emit(f"for (int round = 0; round < {a.get('TIMES')}; round++) {{", i)
        with _inside(text):
            self.command(a.get("COMMANDS").replace("\n", ";"), i + 1)
        self.emit("}", i)

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
def _inside(text: str):
    """A refusal inside a block names the block too."""
    try:
        yield
    except ShellError as e:
        if e.code == "NOT_EXPORTABLE":
            e.message = f"in `{_short(text)}`: {e.message}"
        raise


def _if_gpus_commands(text: str) -> str:
    return parse_segment(split_commands(text)[0]).args.get("COMMANDS")


def _comment(text: str) -> str:
    return _short(text).replace("*/", "* /")


def _c_scalar(word: str, dtype: str) -> str:
    """A scalar argument as C writes it: the shell's suffix (`7i`, `2.5f`) gives way to a cast to the parameter's
    type."""
    number = re.sub(r"(ul|[fdilu])$", "", word, flags=re.I)
    return f"({CTYPES.get(dtype) or 'int'}){number}"


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
    if not w.shown or w.notes:
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


def _infer(src_kind: str, dst_kind: str) -> str:
    dev = ("device", "managed")
    return f"{'d' if src_kind in dev else 'h'}2{'d' if dst_kind in dev else 'h'}"


def _cstr(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'

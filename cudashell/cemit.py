"""CUDA C for the shell's commands — one writer for both `explain on` (the statements one command stands for)
and `export c` (the session as a program that nvcc builds and that prints the checksums `checksum` printed).
It reads commands as parsed, with the buffers alive before them, so both show the same names, flags and pointer
arithmetic (`b_p0 + 1048576` for `p0[1MB:]`)."""

from __future__ import annotations

import re

from .grammar import parse_part, split_commands
from .kernels import BUILTIN_SOURCE, BUILTINS, parse_kernels
from .launchdims import c_dims, default_grid, dim3, is_1d
from .registry import parse_segment

PRELUDE = r"""// Written by cudashell `export c`: the session replayed with the CUDA runtime API.
// Build and run: nvcc -O2 -o session session.cu && ./session
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
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
template <typename T> static void fill_iota(void *p, size_t bytes) {
    T *a = (T *)p; for (size_t i = 0; i < bytes / sizeof(T); i++) a[i] = (T)i; }
template <typename T> static void fill_value(void *p, size_t bytes, double v) {
    T *a = (T *)p; for (size_t i = 0; i < bytes / sizeof(T); i++) a[i] = (T)v; }
template <typename T> static void fill_random(void *p, size_t bytes, uint64_t seed, bool fp) {
    T *a = (T *)p;
    for (size_t i = 0; i < bytes / sizeof(T); i++) {
        uint64_t z = splitmix64(seed, i);
        a[i] = fp ? (T)((double)(z >> 11) * 0x1.0p-53) : (T)z;
    } }
static void CUDART_CB host_print(void *text) { printf("callback: %s\n", (const char *)text); }
static uint64_t checksum(const void *p, size_t bytes) {  // the shell's `checksum`
    const unsigned char *b = (const unsigned char *)p; uint64_t s = 0;
    for (size_t i = 0; i < bytes; i++) s += (uint64_t)b[i] * (i % 251 + 1);
    return s; }
"""
CTYPES = {"uint8": "uint8_t", "int8": "int8_t", "uint16": "uint16_t", "int16": "int16_t", "uint32": "uint32_t",
          "int32": "int32_t", "uint64": "uint64_t", "int64": "int64_t", "float16": None, "float32": "float",
          "float64": "double"}
HOST_ALLOC_FLAGS = {"portable": "cudaHostAllocPortable", "mapped": "cudaHostAllocMapped",
                    "writecombined": "cudaHostAllocWriteCombined"}
REGISTER_FLAGS = {"portable": "cudaHostRegisterPortable", "mapped": "cudaHostRegisterMapped",
                  "readonly": "cudaHostRegisterReadOnly"}
DIRS = {"h2d": "cudaMemcpyHostToDevice", "d2h": "cudaMemcpyDeviceToHost", "d2d": "cudaMemcpyDeviceToDevice",
        "h2h": "cudaMemcpyHostToHost"}


def ident(kind: str, name: str) -> str:
    return f"{kind}_" + re.sub(r"\W", "_", name)


def alive(session, words=None) -> tuple[dict, set, dict, int]:
    """What the writer needs to know of a session: its buffers (name → (kind, size), a registered pageable buffer
    as 'registered'), its events, the buffers on another GPU than 0, and the current GPU. Given the `words` of one
    command, only what they name (all of it for `free all`): explaining a command costs the same however many
    buffers the session holds."""
    if words is None or "all" in words:
        bufs, events = list(session.buffers.values()), set(session.events)
    else:
        names = {w.split("[", 1)[0] for w in words}
        bufs = [session.buffers[n] for n in names if n in session.buffers]
        events = {n for n in names if n in session.events}
    return ({b.name: ("registered" if b.registered is not None else b.kind, b.size) for b in bufs},
            events, {b.name: b.device for b in bufs if b.device}, session.context.device)


class Writer:
    """Turns commands into C, keeping track of what is alive. `body` is the program's; `shown` is what one
    command stands for (without the program's own bookkeeping, such as zeroing new memory as the shell does);
    `drivers` the driver calls behind it."""

    def __init__(self, buffers: dict | None = None, events=(), gpus: dict | None = None, device: int = 0):
        self.decls: list[str] = []
        self.setup: list[str] = []  # at the top of main: event creation, attribute queries
        self.body: list[str] = []
        self.shown: list[str] = []
        self.drivers: list[str] = []
        self.buffers: dict[str, tuple[str, int]] = dict(buffers or {})  # name → (kind, size)
        self.events: set[str] = set(events)
        self.gpu_of: dict[str, int] = dict(gpus or {})  # buffers on another GPU than 0
        self.device = device  # the current GPU (`device use N`: cudaSetDevice)
        self.notes: list[str] = []
        self.sources: list[str] = []  # users' kernels, written before main
        self.user: dict = {}  # the name a launch uses → its Kernel (symbol, parameters)

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

    def stream(self, name) -> str:
        return "0" if name in (None, "0", "default") else ident("s", name)

    def command(self, text: str, indent: int = 1) -> None:
        for seg in split_commands(text):
            cmd = parse_segment(seg)
            name, a = cmd.spec.name, cmd.args
            if not cmd.spec.exported:
                continue
            handler = getattr(self, "c_" + name.replace(" ", "_"), None)
            if handler is None or self._unknown_buffers(cmd) or self._unnamed(cmd):
                self.emit(f"// not exported: {seg.text}", indent)
                self.notes.append(seg.text)
                continue
            handler(a, indent, seg.text)

    @staticmethod
    def _unnamed(cmd) -> bool:
        """History names what the shell named (`as NAME`), except inside a `repeat` block: no C name to give."""
        return cmd.spec.name in ("alloc", "stream create") and "NAME" not in cmd.args.values

    def _unknown_buffers(self, cmd) -> bool:
        """A buffer the program never declared: made inside a `repeat` that failed, or never named."""
        for arg in cmd.spec.args + tuple(o.arg for o in cmd.spec.opts):
            if arg.kind not in ("buffer", "part") or arg.name not in cmd.args.values:
                continue
            value = cmd.args.values[arg.name]
            for v in value if isinstance(value, list) else [value]:
                name = v.name if arg.kind == "part" else v
                if name != "all" and name not in self.buffers:
                    return True
        return False

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
        here = self.device
        gpu = a.get("GPU", here)
        if gpu != here:  # another GPU's memory: made with it current
            self.emit(f"CHECK(cudaSetDevice({gpu}));", i, "cuCtxSetCurrent")
        self.emit(line, i, driver)
        if kind in ("pinned", "device", "managed"):  # the shell's memory starts zeroed, as calloc's does
            self.emit(f"CHECK(cudaMemset({var}, 0, {size}));", i, replay=True)
        if gpu != here:
            self.emit("CHECK(cudaDeviceSynchronize());", i, replay=True)
            self.emit(f"CHECK(cudaSetDevice({here}));", i)
            if kind != "device":
                self.emit("CHECK(cudaDeviceSynchronize());", i, replay=True)
        self.buffers[name] = (kind, size)
        if gpu:
            self.gpu_of[name] = gpu

    def c_device_use(self, a, i, text):
        self.device = a.get("GPU")
        self.emit(f"CHECK(cudaSetDevice({self.device}));", i, "cuDevicePrimaryCtxRetain, cuCtxSetCurrent")

    def c_register(self, a, i, text):
        name = a.get("NAME")
        flags = " | ".join(REGISTER_FLAGS[f] for f in sorted(a.flags)) or "cudaHostRegisterDefault"
        self.emit(f"CHECK(cudaHostRegister({ident('b', name)}, {self.buffers[name][1]}, {flags}));", i,
                  "cuMemHostRegister_v2")
        self.buffers[name] = ("registered", self.buffers[name][1])

    def c_unregister(self, a, i, text):
        name = a.get("NAME")
        self.emit(f"CHECK(cudaHostUnregister({ident('b', name)}));", i, "cuMemHostUnregister")
        self.buffers[name] = ("pageable", self.buffers[name][1])

    def c_peer(self, a, i, text):
        src, dst, on = a.get("A"), a.get("B"), a.get("SWITCH") == "enable"
        call = f"cudaDeviceEnablePeerAccess({dst}, 0)" if on else f"cudaDeviceDisablePeerAccess({dst})"
        self.emit(f"CHECK(cudaSetDevice({src})); CHECK({call}); CHECK(cudaSetDevice({self.device}));", i,
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
            gpu = self.gpu_of.pop(name, 0)
            self.emit(f"CHECK(cudaSetDevice({gpu})); {line} CHECK(cudaSetDevice({self.device}));"
                      if gpu != self.device else line, i, driver)

    def c_fill(self, a, i, text):
        name, value, dtype = a.get("NAME"), a.get("VALUE"), a.get("T", "uint8")
        ctype = CTYPES[dtype]
        if ctype is None:
            self.emit(f"// not exported (no float16 in plain C): {text}", i)
            self.notes.append(text)
            return
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
            self.emit(f"CHECK({call}Async({args}, {self.stream(a.get('S'))}));", i, driver + "Async")
        else:
            self.emit(f"CHECK({call}({args}));", i, driver + ("_v2" if driver == "cuMemsetD8" else ""))

    # ------------------------------------------------------------------ streams and events
    def c_stream_create(self, a, i, text):
        var = ident("s", a.get("NAME"))
        self.declare(f"cudaStream_t {var};")
        prio = a.get("PRIORITY", "0")
        prio_expr = {"high": "greatest", "low": "least"}.get(str(prio).lower(), str(prio))
        self.emit(f"{{ int least, greatest; CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest)); "
                  f"(void)least; (void)greatest; CHECK(cudaStreamCreateWithPriority(&{var}, "
                  f"{'cudaStreamNonBlocking' if 'nonblocking' in a.flags else 'cudaStreamDefault'}, {prio_expr})); }}",
                  i, "cuStreamCreateWithPriority")

    def c_stream_destroy(self, a, i, text):
        self.emit(f"CHECK(cudaStreamDestroy({self.stream(a.get('S'))}));", i, "cuStreamDestroy_v2")

    def c_sync(self, a, i, text):
        if a.get("E"):
            self.emit(f"CHECK(cudaEventSynchronize({ident('e', a.get('E'))}));", i, "cuEventSynchronize")
        elif a.get("S") is not None:
            self.emit(f"CHECK(cudaStreamSynchronize({self.stream(a.get('S'))}));", i, "cuStreamSynchronize")
        else:
            self.emit("CHECK(cudaDeviceSynchronize());", i, "cuCtxSynchronize")

    def c_event_record(self, a, i, text):
        var = ident("e", a.get("E"))
        if a.get("E") not in self.events:
            self.events.add(a.get("E"))
            self.declare(f"cudaEvent_t {var};")
            self.set_up(f"CHECK(cudaEventCreate(&{var}));")
            self.drivers.append("cuEventCreate")
        self.emit(f"CHECK(cudaEventRecord({var}, {self.stream(a.get('S'))}));", i, "cuEventRecord")

    def c_event_sync(self, a, i, text):
        self.emit(f"CHECK(cudaEventSynchronize({ident('e', a.get('E'))}));", i, "cuEventSynchronize")

    def c_elapsed(self, a, i, text):
        e1, e2 = a.get("E1"), a.get("E2")
        self.emit(f'{{ float ms; CHECK(cudaEventElapsedTime(&ms, {ident("e", e1)}, {ident("e", e2)})); '
                  f'printf("elapsed {e1} {e2} %.3f ms\\n", ms); }}', i, "cuEventElapsedTime")

    def c_wait(self, a, i, text):
        self.emit(f"CHECK(cudaStreamWaitEvent({self.stream(a.get('S'))}, {ident('e', a.get('E'))}, 0));", i,
                  "cuStreamWaitEvent")

    def c_callback(self, a, i, text):
        self.emit(f"CHECK(cudaLaunchHostFunc({self.stream(a.get('S'))}, host_print, (void *){_cstr(a.get('TEXT'))}));",
                  i, "cuLaunchHostFunc")

    def c_echo(self, a, i, text):
        if a.get("TEXT"):
            self.emit(f'printf("%s\\n", {_cstr(a.get("TEXT"))});', i)

    def c_say(self, a, i, text):
        if a.get("TEXT") and a.get("LANG") == "en":
            self.emit(f'printf("%s\\n", {_cstr(a.get("TEXT"))});', i)

    # ------------------------------------------------------------------ kernels
    def _user_source(self, source: str, names: dict) -> None:
        if source not in self.sources:
            self.sources.append(source)
        self.user.update(names)

    def c_kernel_define(self, a, i, text):
        source = a.get("SOURCE")
        found = parse_kernels(source)
        names = {k.name: k for k in found}
        if a.get("NAME") not in names and len(found) == 1:
            names[a.get("NAME")] = found[0]
        self._user_source(source, names)
        self.emit(f"// kernel define {a.get('NAME')}: its source is above main", i)

    def c_kernel_load(self, a, i, text):
        path = a.get("FILE")
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        except OSError:
            self.emit(f"// not exported (cannot read {path} from here): {text}", i)
            self.notes.append(text)
            return
        prefix = f"{a.get('MOD')}." if a.get("MOD") else ""
        self._user_source(f'#include "{path}"', {prefix + k.name: k for k in parse_kernels(source)})
        self.emit(f"// kernel load {path}: included above main", i)

    def c_launch(self, a, i, text):
        kernel = BUILTINS.get(a.get("KERNEL"))
        if kernel is None and a.get("KERNEL") in self.user:
            self._launch_user(self.user[a.get("KERNEL")], a, i, text)
            return
        if kernel is None:
            self.emit(f"// not exported (a user kernel whose source this program lacks): {text}", i)
            self.notes.append(text)
            return
        words = a.get("ARG") or []
        parts = {k: parse_part(w) for k, (p, w) in enumerate(zip(kernel.params, words)) if p.is_buffer}
        if any(part.name not in self.buffers for part in parts.values()):
            self.emit(f"// not exported: {text}", i)
            self.notes.append(text)
            return
        block = a.get("B", dim3(1 if kernel.name == "spin" else 256))
        n = a.get("ELEMENTS", min(self.rest(part) for part in parts.values()) // 4 if parts else 1)
        grid = a.get("G") or default_grid(n, block)
        args = []
        for k, (p, w) in enumerate(zip(kernel.params, words)):
            if p.is_buffer:
                args.append(f"(float *)({self.ptr(parts[k])})" if parts[k].start else f"(float *){self.ptr(parts[k])}")
            elif kernel.name == "spin":
                args.append(f"(long long){int(float(w.rstrip('lLiu')))} * clock_khz / 1000")
                self.declare("int clock_khz = 0;")
                self.set_up("CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));")
            else:
                args.append(re.sub(r"[a-zA-Z]+$", "", w) + ("f" if "." in w else ""))
        if kernel.name != "spin":
            args.append(str(n))
        self._emit_launch(kernel.symbol, grid, block, a, i, args)

    def _launch_user(self, kernel, a, i, text):
        words = a.get("ARG") or []
        args = []
        for p, w in zip(kernel.params, words):
            if p.is_buffer:
                part = parse_part(w)
                if part.name not in self.buffers:
                    self.emit(f"// not exported: {text}", i)
                    self.notes.append(text)
                    return
                args.append(f"({CTYPES.get(p.dtype) or 'unsigned char'} *)({self.ptr(part)})")
            else:
                args.append(_c_scalar(w, p.dtype))
        self._emit_launch(kernel.symbol, a.get("G") or dim3(1), a.get("B") or dim3(256), a, i, args)

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
        loc = "cudaMemLocationTypeDevice, 0" if where == "device" else "cudaMemLocationTypeHost, 0"
        self.emit(f"{{ cudaMemLocation loc = {{{loc}}}; CHECK(cudaMemPrefetchAsync({ident('b', name)}, "
                  f"{self.buffers[name][1]}, loc, 0, {self.stream(a.get('S'))})); }}", i, "cuMemPrefetchAsync_v2")

    def c_advise(self, a, i, text):
        name, advice, where = a.get("NAME"), a.get("ADVICE"), a.get("WHERE") or "device"
        what = {"readmostly": "cudaMemAdviseSetReadMostly", "preferred": "cudaMemAdviseSetPreferredLocation",
                "accessed-by": "cudaMemAdviseSetAccessedBy"}[advice]
        loc = "cudaMemLocationTypeDevice, 0" if where == "device" else "cudaMemLocationTypeHost, 0"
        self.emit(f"{{ cudaMemLocation loc = {{{loc}}}; CHECK(cudaMemAdvise({ident('b', name)}, "
                  f"{self.buffers[name][1]}, {what}, loc)); }}", i, "cuMemAdvise_v2")

    def c_repeat(self, a, i, text):
        self.emit(f"for (int round = 0; round < {a.get('TIMES')}; round++) {{", i)
        self.command(a.get("COMMANDS").replace("\n", ";"), i + 1)
        self.emit("}", i)

    # ------------------------------------------------------------------ the program
    def program(self) -> str:
        end = ["    CHECK(cudaDeviceSynchronize());"]
        for name, (kind, size) in self.buffers.items():
            var = ident("b", name)
            if kind == "device":
                end.append(f"    {{ unsigned char *t = (unsigned char *)malloc({size}); "
                           f"CHECK(cudaMemcpy(t, {var}, {size}, cudaMemcpyDeviceToHost)); "
                           f'printf("checksum {name} %llu\\n", (unsigned long long)checksum(t, {size})); free(t); }}')
            else:
                end.append(f'    printf("checksum {name} %llu\\n", (unsigned long long)checksum({var}, {size}));')
        return (PRELUDE + "".join("\n" + s.strip() + "\n" for s in self.sources) + "\nint main() {\n" + "".join(f"    {d}\n" for d in self.decls) + "".join(
            line + "\n" for line in self.setup) + "\n".join(self.body) + "\n" + "\n".join(end) + "\n    return 0;\n}\n")


def _c_scalar(word: str, dtype: str) -> str:
    """A scalar argument as C writes it: the shell's suffix (`7i`, `2.5f`) gives way to a cast to the parameter's
    type."""
    number = re.sub(r"(ul|[fdilu])$", "", word, flags=re.I)
    return f"({CTYPES.get(dtype, 'int')}){number}"


def explain(text: str, buffers: dict, events, gpus: dict, device: int) -> tuple[str, str] | None:
    """(C, driver calls) for one command that succeeded, given what was alive before it (`alive`); None when it
    stands for no CUDA (ls, help, show…)."""
    w = Writer(buffers, events, gpus, device)
    w.command(text)
    if not w.shown or w.notes:
        return None
    return "\n".join(w.shown), ", ".join(w.drivers) or "(none: the host does it)"


def _infer(src_kind: str, dst_kind: str) -> str:
    dev = ("device", "managed")
    return f"{'d' if src_kind in dev else 'h'}2{'d' if dst_kind in dev else 'h'}"


def _cstr(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'

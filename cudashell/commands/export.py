"""export c FILE.cu: the session so far as a self-contained CUDA C program (runtime API, error checks,
the same allocations, flags, copies, kernels, streams and events), printing the checksums `checksum`
prints and the times `elapsed` printed."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ShellError
from ..grammar import Arg, split_commands
from ..kernels import BUILTIN_SOURCE, BUILTINS
from ..registry import command, parse_segment
from ..results import Result
from .meta import META

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
DIRS = {"h2d": "cudaMemcpyHostToDevice", "d2h": "cudaMemcpyDeviceToHost", "d2d": "cudaMemcpyDeviceToDevice",
        "h2h": "cudaMemcpyHostToHost"}
SKIPPED = META | {"ls", "info", "device", "set", "time", "explain", "timeline", "trace export", "profile", "streams",
                  "stream query", "event query", "history", "save", "run", "demo", "expect ok", "expect error",
                  "expect equal", "expect faster", "compare", "checksum", "calibrate", "doctor", "kernels",
                  "bench memcpy", "bench alloc", "bench zerocopy", "bench overlap", "export c"}


def ident(kind: str, name: str) -> str:
    return f"{kind}_" + re.sub(r"\W", "_", name)


class Writer:
    """Turns the session's successful commands into C, keeping track of what is alive."""

    def __init__(self):
        self.decls: list[str] = []
        self.body: list[str] = []
        self.buffers: dict[str, tuple[str, int]] = {}  # name → (kind, size)
        self.events: set[str] = set()
        self.notes: list[str] = []

    def emit(self, line: str, indent: int = 1) -> None:
        self.body.append("    " * indent + line)

    def declare(self, line: str) -> None:
        if line not in self.decls:
            self.decls.append(line)

    def stream(self, name) -> str:
        return "0" if name in (None, "0", "default") else ident("s", name)

    def command(self, text: str, indent: int = 1) -> None:
        for seg in split_commands(text):
            cmd = parse_segment(seg)
            name, a = cmd.spec.name, cmd.args
            handler = getattr(self, "c_" + name.replace(" ", "_"), None)
            if name in SKIPPED or name in ("echo", "say"):
                if name in ("echo", "say") and a.get("TEXT") and (name == "echo" or a.get("LANG") == "en"):
                    self.emit(f'printf("%s\\n", {_cstr(a.get("TEXT"))});', indent)
                continue
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
            if arg.kind != "buffer" or arg.name not in cmd.args.values:
                continue
            value = cmd.args.values[arg.name]
            if any(n != "all" and n not in self.buffers for n in (value if isinstance(value, list) else [value])):
                return True
        return False

    # ------------------------------------------------------------------ memory
    def c_alloc(self, a, i, text):
        kind, size = a.get("KIND"), a.get("SIZE")
        name = a.get("NAME")  # history names it (the shell adds `as NAME`)
        var = ident("b", name)
        self.declare(f"unsigned char *{var} = nullptr;")
        flags = " | ".join({"portable": "cudaHostAllocPortable", "mapped": "cudaHostAllocMapped",
                            "writecombined": "cudaHostAllocWriteCombined"}[f] for f in sorted(a.flags)
                           if f in ("portable", "mapped", "writecombined")) or "cudaHostAllocDefault"
        line = {"pageable": f"{var} = (unsigned char *)calloc({size}, 1);",
                "pinned": f"CHECK(cudaHostAlloc((void **)&{var}, {size}, {flags}));",
                "device": f"CHECK(cudaMalloc((void **)&{var}, {size}));",
                "managed": f"CHECK(cudaMallocManaged((void **)&{var}, {size}, "
                           f"{'cudaMemAttachHost' if 'host' in a.flags else 'cudaMemAttachGlobal'}));"}[kind]
        self.emit(line, i)
        if kind in ("pinned", "device", "managed"):  # the shell's memory starts zeroed, as calloc's does
            self.emit(f"CHECK(cudaMemset({var}, 0, {size}));", i)
            if kind != "device":
                self.emit("CHECK(cudaDeviceSynchronize());", i)
        self.buffers[name] = (kind, size)

    def c_register(self, a, i, text):
        name = a.get("NAME")
        flags = " | ".join({"portable": "cudaHostRegisterPortable", "mapped": "cudaHostRegisterMapped",
                            "readonly": "cudaHostRegisterReadOnly"}[f] for f in sorted(a.flags)) or "cudaHostRegisterDefault"
        self.emit(f"CHECK(cudaHostRegister({ident('b', name)}, {self.buffers[name][1]}, {flags}));", i)
        self.buffers[name] = ("registered", self.buffers[name][1])

    def c_unregister(self, a, i, text):
        name = a.get("NAME")
        self.emit(f"CHECK(cudaHostUnregister({ident('b', name)}));", i)
        self.buffers[name] = ("pageable", self.buffers[name][1])

    def c_free(self, a, i, text):
        names = list(self.buffers) if a.get("NAME") == ["all"] else list(dict.fromkeys(a.get("NAME")))
        for name in names:
            kind, _ = self.buffers.pop(name)
            var = ident("b", name)
            if kind == "registered":
                self.emit(f"CHECK(cudaHostUnregister({var}));", i)
            self.emit({"pageable": f"free({var});", "registered": f"free({var});",
                       "pinned": f"CHECK(cudaFreeHost({var}));"}.get(kind, f"CHECK(cudaFree({var}));"), i)

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
            self.emit(f"fill_random<{ctype}>({var}, {size}, {a.get('SEED', 0)}ull, {str(dtype.startswith('float')).lower()});", i)
        else:
            self.emit(f"fill_value<{ctype}>({var}, {size}, {value!r});", i)

    def c_show(self, a, i, text):
        pass

    # ------------------------------------------------------------------ copies
    def c_memcpy(self, a, i, text):
        src, dst = a.get("SRC"), a.get("DST")
        nbytes = a.get("SIZE", self.buffers[src][1])
        direction = a.get("DIR") or _infer(self.buffers[src][0], self.buffers[dst][0])
        self.maybe_async(a, i, "cudaMemcpy", f"{ident('b', dst)}, {ident('b', src)}, {nbytes}, {DIRS[direction]}")

    def c_memset(self, a, i, text):
        name = a.get("NAME")
        nbytes = a.get("SIZE", self.buffers[name][1])
        self.maybe_async(a, i, "cudaMemset", f"{ident('b', name)}, {a.get('BYTE')}, {nbytes}")

    def maybe_async(self, a, i, call: str, args: str) -> None:
        if "async" in a.flags:
            self.emit(f"CHECK({call}Async({args}, {self.stream(a.get('S'))}));", i)
        else:
            self.emit(f"CHECK({call}({args}));", i)

    # ------------------------------------------------------------------ streams and events
    def c_stream_create(self, a, i, text):
        var = ident("s", a.get("NAME"))
        self.declare(f"cudaStream_t {var};")
        prio = a.get("PRIORITY", "0")
        prio_expr = {"high": "greatest", "low": "least"}.get(str(prio).lower(), str(prio))
        self.emit(f"{{ int least, greatest; CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest)); "
                  f"(void)least; (void)greatest; CHECK(cudaStreamCreateWithPriority(&{var}, "
                  f"{'cudaStreamNonBlocking' if 'nonblocking' in a.flags else 'cudaStreamDefault'}, {prio_expr})); }}", i)

    def c_stream_destroy(self, a, i, text):
        self.emit(f"CHECK(cudaStreamDestroy({self.stream(a.get('S'))}));", i)

    def c_sync(self, a, i, text):
        if a.get("E"):
            self.emit(f"CHECK(cudaEventSynchronize({ident('e', a.get('E'))}));", i)
        elif a.get("S") is not None:
            self.emit(f"CHECK(cudaStreamSynchronize({self.stream(a.get('S'))}));", i)
        else:
            self.emit("CHECK(cudaDeviceSynchronize());", i)

    def c_event_record(self, a, i, text):
        var = ident("e", a.get("E"))
        if a.get("E") not in self.events:
            self.events.add(a.get("E"))
            self.declare(f"cudaEvent_t {var};")
            self.body.insert(0, f"    CHECK(cudaEventCreate(&{var}));")
        self.emit(f"CHECK(cudaEventRecord({var}, {self.stream(a.get('S'))}));", i)

    def c_event_sync(self, a, i, text):
        self.emit(f"CHECK(cudaEventSynchronize({ident('e', a.get('E'))}));", i)

    def c_elapsed(self, a, i, text):
        e1, e2 = a.get("E1"), a.get("E2")
        self.emit(f'{{ float ms; CHECK(cudaEventElapsedTime(&ms, {ident("e", e1)}, {ident("e", e2)})); '
                  f'printf("elapsed {e1} {e2} %.3f ms\\n", ms); }}', i)

    def c_wait(self, a, i, text):
        self.emit(f"CHECK(cudaStreamWaitEvent({self.stream(a.get('S'))}, {ident('e', a.get('E'))}, 0));", i)

    def c_callback(self, a, i, text):
        self.emit(f"CHECK(cudaLaunchHostFunc({self.stream(a.get('S'))}, host_print, (void *){_cstr(a.get('TEXT'))}));", i)

    # ------------------------------------------------------------------ kernels
    def c_launch(self, a, i, text):
        kernel = BUILTINS.get(a.get("KERNEL"))
        if kernel is None:
            self.emit(f"// not exported (a user kernel: add its source): {text}", i)
            self.notes.append(text)
            return
        words = a.get("ARG") or []
        bufs = [w for p, w in zip(kernel.params, words) if p.is_buffer]
        block = a.get("B", 1 if kernel.name == "spin" else 256)
        n = a.get("ELEMENTS", min(self.buffers[b][1] for b in bufs) // 4 if bufs else 1)
        grid = a.get("G", max(1, -(-n // block)))
        args = []
        for p, w in zip(kernel.params, words):
            if p.is_buffer:
                args.append(f"(float *){ident('b', w)}")
            elif kernel.name == "spin":
                args.append(f"(long long){int(float(w.rstrip('lLiu')))} * clock_khz / 1000")
                self.declare("int clock_khz = 0;")
            else:
                args.append(re.sub(r"[a-zA-Z]+$", "", w) + ("f" if "." in w else ""))
        if kernel.name != "spin":
            args.append(str(n))
        if kernel.name == "spin":
            self.body.insert(0, "    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));")
        self.emit(f"{kernel.symbol}<<<{grid}, {block}, {a.get('BYTES', 0)}, {self.stream(a.get('S'))}>>>"
                  f"({', '.join(args)});", i)
        self.emit("CHECK(cudaGetLastError());", i)

    def c_prefetch(self, a, i, text):
        name, where = a.get("NAME"), a.get("WHERE")
        loc = "cudaMemLocationTypeDevice, 0" if where == "device" else "cudaMemLocationTypeHost, 0"
        self.emit(f"{{ cudaMemLocation loc = {{{loc}}}; CHECK(cudaMemPrefetchAsync({ident('b', name)}, "
                  f"{self.buffers[name][1]}, loc, 0, {self.stream(a.get('S'))})); }}", i)

    def c_advise(self, a, i, text):
        name, advice, where = a.get("NAME"), a.get("ADVICE"), a.get("WHERE") or "device"
        what = {"readmostly": "cudaMemAdviseSetReadMostly", "preferred": "cudaMemAdviseSetPreferredLocation",
                "accessed-by": "cudaMemAdviseSetAccessedBy"}[advice]
        loc = "cudaMemLocationTypeDevice, 0" if where == "device" else "cudaMemLocationTypeHost, 0"
        self.emit(f"{{ cudaMemLocation loc = {{{loc}}}; CHECK(cudaMemAdvise({ident('b', name)}, "
                  f"{self.buffers[name][1]}, {what}, loc)); }}", i)

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
        return (PRELUDE + "\nint main() {\n" + "".join(f"    {d}\n" for d in self.decls) +
                "\n".join(self.body) + "\n" + "\n".join(end) + "\n    return 0;\n}\n")


def _infer(src_kind: str, dst_kind: str) -> str:
    dev = ("device", "managed")
    return f"{'d' if src_kind in dev else 'h'}2{'d' if dst_kind in dev else 'h'}"


def _cstr(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'


@command("export c", "scripts", "write the session so far as a self-contained CUDA C program", "export c session.cu",
         "(the CUDA runtime API: cudaHostAlloc, cudaMemcpyAsync, kernel<<<…>>>, cudaEventRecord, …)",
         args=(Arg("FILE", "file"),),
         details="The successful commands, in order, with error checks; built-in kernels included; `repeat` becomes "
                 "a loop; `elapsed` prints its time; at the end every live buffer's checksum, the same the "
                 "`checksum` command prints. User kernels are left as comments.")
def export_c(session, backend, args):
    w = Writer()
    for entry in session.history:
        if entry.ok:
            w.command(entry.text)
    path = Path(args.get("FILE"))
    try:
        path.write_text(w.program())
    except OSError as e:
        raise ShellError("IO_ERROR", f"cannot write {path}: {e.strerror}", None, args.col("FILE")) from None
    return Result("message", {"text": f"wrote {path}: {len(w.body)} statements"
                              + (f"; not exported: {len(w.notes)} (see the comments)" if w.notes else ""),
                              "path": str(path), "skipped": w.notes})


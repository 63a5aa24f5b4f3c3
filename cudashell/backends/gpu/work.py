"""Work: copies, memsets, kernels (compiled by PyCUDA's nvcc, loaded per context) and host functions, each
timed through `Measurement._timed`."""

from __future__ import annotations

import ctypes as C
import functools
import os
import re
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from ...errors import OUTSIDE_HINT, ShellError, held_error
from ...model import syncrules as R
from ...model.kernels import (
    BUILTIN_SOURCE,
    BUILTINS,
    ModuleSymbol,
    c_linkage,
    with_includes,
)
from ..base import PLAIN_LAUNCH, Timing
from ..bindings import HOST_FN, call, cu, host_fn, launch_args
from .common import CTYPE, CudaAlloc, _host_array


SRC_ACCESS_ORDER = {"stream": "CU_MEMCPY_SRC_ACCESS_ORDER_STREAM",
                    "during-call": "CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL",
                    "any": "CU_MEMCPY_SRC_ACCESS_ORDER_ANY"}


@functools.cache
def _driver_version() -> int:
    """cuDriverGetVersion, once: 13000 for CUDA 13.0."""
    return int(call("cuDriverGetVersion"))


@functools.cache
def compiler_folders(arch: str) -> tuple[Path, ...]:
    """The folders nvcc's preprocessor searches for `#include <…>`: CUDA's own headers and the host compiler's."""
    run = subprocess.run(["nvcc", "-E", f"-arch={arch}", "-Xcompiler", "-v", "-x", "cu", os.devnull, "-o", os.devnull],
                         capture_output=True, text=True)
    lines = run.stderr.splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith("#include <...> search starts here")),
                 len(lines))
    return tuple(Path(line.strip()).resolve() for line in lines[start + 1:] if line.startswith(" "))


_DEPENDENCY_SPLIT = re.compile(r"(?<!\\)\s+")
_NAMED_IN_ERROR = re.compile(r"^(?:In file included from|\s+from)?\s*(.+?):\d+(?::\d+)?[:,]", re.M)


def confine_dependencies(text: str, include_dirs: list[str], arch: str, root: Path, allowed: list[str]) -> None:
    """Grading: every file nvcc reads for `text` — listed by `nvcc -M` before the compile, whose error messages
    could quote it — lies in `root`, in one of `allowed` or in the compiler's own folders, else the source is
    OUTSIDE_SUBMISSION. `__has_include` is refused too: it tells whether a file exists, wherever it is."""
    folders = (root.resolve(), *(Path(a).resolve() for a in allowed), *compiler_folders(arch))
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "kernel.cu"
        source.write_text(text, encoding="utf-8")
        run = subprocess.run(["nvcc", "-M", f"-arch={arch}", *(f"-I{d}" for d in include_dirs), source.name], cwd=tmp,
                             capture_output=True, text=True)
        if run.returncode == 0:  # `kernel.o : kernel.cu \` and one file a line after it, spaces escaped
            words = _DEPENDENCY_SPLIT.split(run.stdout.replace("\\\n", " ").split(":", 1)[-1].strip())
            files = [w.replace("\\ ", " ") for w in words if w]
        else:  # what the preprocessor stopped at: the files its messages name
            files = _NAMED_IN_ERROR.findall(run.stderr)
        for name in files:
            path = (Path(tmp) / name).resolve()
            if path == source.resolve():
                continue
            if not any(path.is_relative_to(f) for f in folders):
                raise ShellError("OUTSIDE_SUBMISSION", f"the kernel's source reads {path}, which is outside the "
                                 f"submission's folder {root}", OUTSIDE_HINT)
            if path.is_relative_to(root.resolve()) and "__has_include" in path.read_text(errors="replace"):
                raise ShellError("OUTSIDE_SUBMISSION", f"{path} uses __has_include, which could test for a file "
                                 "outside the submission's folder", OUTSIDE_HINT)
        if "__has_include" in text:
            raise ShellError("OUTSIDE_SUBMISSION", "the kernel's source uses __has_include, which could test for a "
                             "file outside the submission's folder", OUTSIDE_HINT)


def _linkage_hint(name: str) -> str:
    """A kernel nvcc named the C++ way (c_linkage reads kernel heads as written, not through macros)."""
    return (f"the shell gives C linkage to a kernel written `__global__ void {name}(`; through a macro, write "
            f"`extern \"C\"` before it yourself")


class Work:
    """The GpuSide's work (a mixin: its state is made in GpuSide.__init__)."""

    root: Path | None = None  # grading: the submission's folder, outside which no kernel's source may read

    @staticmethod
    def _cls(buf) -> str:
        return R.memory_class(buf.kind, buf.registered is not None)

    def _untimed(self, name: str, args: tuple, rule: R.Rule) -> Timing:
        """A call that queues no GPU work (zero bytes): the driver returns at once."""
        t0 = time.perf_counter()
        call(name, *args)
        host = time.perf_counter() - t0
        return Timing(0.0, host, False, self.timing_label, rule=rule.why, basis="rule")

    def _memcpy_call(self, src, src_off, dst, dst_off, nbytes, stream, async_):
        s_ptr = (src.host_ptr if src.host_ptr is not None else src.device_ptr) + src_off
        d_ptr = (dst.host_ptr if dst.host_ptr is not None else dst.device_ptr) + dst_off
        rule = R.memcpy_rule(self._cls(src), self._cls(dst), async_, nbytes)
        name, args = ("cuMemcpyAsync", (d_ptr, s_ptr, nbytes, stream)) if async_ else \
            ("cuMemcpy", (d_ptr, s_ptr, nbytes))
        return name, args, rule

    def memcpy(self, src, src_off, dst, dst_off, nbytes, stream, async_):
        """Through the driver for every pair, host-to-host too (cuMemcpy under UVA), so stream order holds."""
        name, args, rule = self._memcpy_call(src, src_off, dst, dst_off, nbytes, stream, async_)
        if nbytes == 0:
            return self._untimed(name, args, rule)
        here = self._stream_ctx(stream if async_ else None)
        others = {b.handle.device for b in (src, dst) if b.kind == "device"} - {here.device}
        if others:  # another GPU's memory: the copy is not all on our stream
            with self._in(here):
                return self._between_gpus(args[:3], others.pop())
        return self._timed(stream if async_ else None, name, args, rule, nbytes)

    def _memcpy_batch_call(self, copies, stream, order):
        """cuMemcpyBatchAsync's arguments: each copy's pointers (host pointer where there is one, as cuMemcpy takes
        them under UVA), one attribute for all copies (its source-access order), and the rule for the whole call."""
        if not hasattr(cu, "cuMemcpyBatchAsync") or _driver_version() < 12080:
            raise ShellError("CUDA_ERROR_NOT_SUPPORTED", f"cuMemcpyBatchAsync needs CUDA 12.8 or later (this driver: "
                             f"{_driver_version() // 1000}.{_driver_version() % 1000 // 10}; these bindings "
                             f"{'have' if hasattr(cu, 'cuMemcpyBatchAsync') else 'lack'} it)",
                             "copy one by one: `memcpy … async stream S`")
        dsts, srcs, sizes, rules = [], [], [], []
        for src, src_off, dst, dst_off, nbytes in copies:
            srcs.append(cu.CUdeviceptr((src.host_ptr if src.host_ptr is not None else src.device_ptr) + src_off))
            dsts.append(cu.CUdeviceptr((dst.host_ptr if dst.host_ptr is not None else dst.device_ptr) + dst_off))
            sizes.append(nbytes)
            rules.append((self._cls(src), self._cls(dst), nbytes))
        attr = cu.CUmemcpyAttributes()
        attr.srcAccessOrder = getattr(cu.CUmemcpySrcAccessOrder, SRC_ACCESS_ORDER[order])
        return (dsts, srcs, sizes, len(sizes), [attr], [0], 1, stream), R.batch_rule(rules, order)

    def memcpy_batch(self, copies, stream, order):
        """One driver call for every copy, timed as one queued piece of work; the driver's refusals are its own."""
        args, rule = self._memcpy_batch_call(copies, stream, order)
        return self._timed(stream, "cuMemcpyBatchAsync", args, rule, sum(args[2]))

    def _between_gpus(self, args: tuple, other: int) -> Timing:
        """A copy to or from another GPU's memory: cuMemcpy, then both GPUs synchronised, timed on the host —
        the events of one GPU's stream see only its part (on the H200 pair they said 52 µs for 256 MiB staged)."""
        if self.held:
            raise held_error("a copy between GPUs (timed to its end)")
        call("cuCtxSynchronize")  # the work queued before it, out of its time
        start, t0 = self._stamp(), time.perf_counter()
        call("cuMemcpy", *args)
        call("cuCtxSynchronize")
        with self._in(self._primary(other)):
            call("cuCtxSynchronize")
        seconds = time.perf_counter() - t0
        return Timing(seconds, seconds, True, self.timing_label, None, start, start + seconds,
                      rule=R.BETWEEN_GPUS.why, basis="observed", issued=start)

    def _memset_call(self, buf, offset, value, nbytes, stream, async_):
        ptr = (buf.device_ptr if buf.device_ptr is not None else buf.host_ptr) + offset
        rule = R.memset_rule(self._cls(buf), async_, nbytes)
        name, args = ("cuMemsetD8Async", (ptr, value, nbytes, stream)) if async_ else \
            ("cuMemsetD8", (ptr, value, nbytes))
        return name, args, rule

    def memset(self, buf, offset, value, nbytes, stream, async_):
        name, args, rule = self._memset_call(buf, offset, value, nbytes, stream, async_)
        if nbytes == 0:
            return self._untimed(name, args, rule)
        return self._timed(stream if async_ else None, name, args, rule)

    def _functions(self, source: str, names: list[str], extern_c: bool, path: str | None = None) -> dict[str, int]:
        """The kernels of `source` in the current context, compiled and loaded there the first time (a module
        is its context's: another context's function is CUDA_ERROR_INVALID_HANDLE, seen on the H100). A loaded
        file's `#include "x.cuh"` finds files beside it. While grading (`self.root`, set by load_kernels), what
        the source reads is confined to the submission's folder before nvcc compiles it."""
        fns = self.cur.functions.get(source)
        if fns is None:
            mod = self._module(source, extern_c, path)
            fns = self.cur.functions[source] = {name: int(call("cuModuleGetFunction", mod, name.encode(),
                                                               hint=_linkage_hint(name) if extern_c else None))
                                                for name in names}
        return fns

    def _module(self, source: str, extern_c: bool, path: str | None) -> int:
        """A module of `source` newly loaded in the current context (nvcc's cubin comes from PyCUDA's cache when
        the source was compiled before): its own functions and its own variables, as cuModuleLoadData makes them."""
        from pycuda.compiler import _find_pycuda_include_path
        from pycuda.compiler import (
            compile as nvcc_compile,  # PyCUDA's nvcc driver, with its cubin cache
        )
        from pycuda.driver import CompileError

        dirs = [str(Path(path).resolve().parent)] if path else []
        text = c_linkage(with_includes(source, path)) if extern_c else source  # kernels from a .cuh too
        arch = "sm_" + self.info.compute_capability.replace(".", "")  # given, PyCUDA needs no context
        if self.root is not None:  # the folders PyCUDA gives nvcc: the file's and its own
            confine_dependencies(text, [*dirs, _find_pycuda_include_path()], arch, self.root,
                                 [_find_pycuda_include_path()])
        try:
            cubin = nvcc_compile(text, no_extern_c=True, include_dirs=dirs, arch=arch)
        except CompileError as e:  # nvcc's own words, first error first
            first = next((line for line in (e.stderr or str(e)).splitlines() if "error" in line), str(e))
            raise ShellError("USAGE", f"nvcc refused the source: {first.strip()}",
                             "the simulator's `kernel define` shows file:line:col for the same source") from None
        mod = int(call("cuModuleLoadData", cubin))
        self.cur.modules.append(mod)
        return mod

    def _symbols(self, mod: int, source: str, path: str | None) -> list[ModuleSymbol]:
        """The module's variables (named by the front end's reading of the source), each where cuModuleGetGlobal
        finds it. One in a namespace has a mangled name the shell does not derive: it is not listed."""
        from ...simt.variables import module_variables

        found = []
        for var in module_variables(source, path, self.root):  # the parse the signatures made (cached)
            if var.namespaced:
                continue
            for name in var.module_names:
                try:
                    dptr, size = call("cuModuleGetGlobal", mod, name.encode())
                except ShellError:
                    continue
                a = CudaAlloc("managed" if var.space == "managed" else "device", int(size), dptr=int(dptr),
                              device=self.cur.device, ctx=self.cur.key)
                if var.space == "managed":
                    a.array = _host_array(int(dptr), int(size))
                found.append(ModuleSymbol(var.name, var.space, int(size), int(dptr), var.dtype, a))
                break
        return found

    def _builtin(self, kernel) -> int:
        if BUILTIN_SOURCE not in self.cur.functions:
            fns = self._functions(BUILTIN_SOURCE, [k.symbol for k in BUILTINS.values()], extern_c=False)
            # one empty launch now, so lazy loading is not billed to the user's first launch (not while held:
            # its wait would never end)
            args, _keepalive = launch_args(fns["k_fill"], (1, 1, 1), (1, 1, 1), None, C.c_uint64(0), C.c_float(0),
                                           C.c_int(0))
            call("cuLaunchKernel", *args)
            if not self.held:
                call("cuCtxSynchronize")
        return self.cur.functions[BUILTIN_SOURCE][kernel.symbol]

    def _launch_call(self, kernel, args, count, grid, block, shared, stream, options=PLAIN_LAUNCH):
        if options.show_access:  # its capabilities say so: the command refuses it first
            raise ShellError("USAGE", "show-access needs a backend that watches every access: the simulator")
        if kernel.builtin:
            fn = self._builtin(kernel)
        elif kernel.handle in self.cur.loaded:  # its own module's function (its own variables), in this context
            fn = kernel.handle
        else:  # loaded in another context: the source's module in this one
            fn = self._functions(kernel.source, [k.symbol for k in self._signatures(kernel.source, kernel.path or None)],
                                 True, kernel.path)[kernel.symbol]
        values = []
        for param, arg in zip(kernel.params, args):
            if param.is_buffer:  # `unchecked`: a pointer the GPU cannot reach goes as C would pass it
                buf = arg.buf
                values.append(C.c_uint64((buf.device_ptr if buf.device_ptr is not None else buf.host_ptr)
                                         + arg.offset))
            elif param.unit == "us":  # microseconds: in clock ticks, as the kernel counts
                values.append(C.c_int64(int(arg) * self.clock_khz // 1000))
            else:
                values.append(CTYPE[param.dtype](arg.item()))
        if kernel.builtin and kernel.counted:
            values.append(C.c_int(count))
        return launch_args(fn, grid, block, stream, *values, shared=shared)

    def launch(self, kernel, args, count, grid, block, shared, stream, options=PLAIN_LAUNCH):
        with self._in(self._stream_ctx(stream)):
            call, _keepalive = self._launch_call(kernel, args, count, grid, block, shared, stream, options)
            return self._timed(stream, "cuLaunchKernel", call, R.QUEUED)

    def _signatures(self, source: str, path: str | None):
        """The kernels' parameters as the simulator reads them (its front end, clang: imported at the first
        kernel load, and cached by source, so a launch in another context reads them again for free)."""
        from ...simt.signatures import read_kernels

        return read_kernels(source, path, self.root)

    def load_kernels(self, source, path=None, root=None):
        if self.held:
            raise held_error("loading a module, which may wait for the device,")
        if root is not None:  # grading: this worker's every compile from now on, a relaunch's in a new context too
            self.root = Path(root)
        kernels = self._signatures(source, path)
        mod = self._module(source, True, path)  # each load its own module: fresh variables, as the driver makes
        fns = {k.symbol: int(call("cuModuleGetFunction", mod, k.symbol.encode(), hint=_linkage_hint(k.symbol)))
               for k in kernels}
        self.cur.loaded.update(fns.values())
        return ([replace(k, handle=fns[k.symbol], source=source, path=path or "") for k in kernels],
                self._symbols(mod, source, path))

    def host_callback(self, stream, text, label):
        def fire(_):
            with self.lock:
                self.fired.append({"text": text, "stream": label, "at": self._stamp()})

        fn = HOST_FN(fire)
        self.callback_refs.append(fn)
        t0 = time.perf_counter()
        self._issue("cuLaunchHostFunc", stream, host_fn(fn), 0)
        return self._queued_timing(t0)

    def host_noop(self, stream):
        t0 = time.perf_counter()
        self._issue("cuLaunchHostFunc", *self._noop_call(stream))
        return self._queued_timing(t0)

    def _queued_timing(self, t0: float) -> Timing:
        """A call that only queued work and returned (cuLaunchHostFunc): it did not hold the host for it."""
        host = time.perf_counter() - t0
        return Timing(0.0, host, False, self.timing_label, rule=R.QUEUED.why, basis="rule")

    def _noop_call(self, stream) -> tuple:
        """libc's free(NULL) does nothing, in C: a host function with no interpreter to wake."""
        return stream, host_fn(C.CDLL(None).free), 0

    def fired_callbacks(self):
        with self.lock:
            fired, self.fired = self.fired, []
        return fired

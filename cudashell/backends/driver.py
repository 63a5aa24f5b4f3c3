"""A thin ctypes shim over libcuda.so.1 for what PyCUDA lacks or gets wrong: host registration (broken in
PyCUDA under numpy 2), pointer attributes, host flags, stream priorities, managed prefetch/advise — and,
because PyCUDA cannot wrap a stream it did not create, the copies, memsets, events and launches that must
run on those streams. Symbols are the versioned ones CUDA 13's cuda.h maps to. Every call checks its
CUresult and raises ShellError with the driver's name for it."""

from __future__ import annotations

import ctypes as C

from ..errors import ShellError

CUDA_SUCCESS, CUDA_ERROR_NOT_READY = 0, 600
# cuPointerGetAttribute
POINTER_MEMORY_TYPE, POINTER_IS_MANAGED = 2, 8
MEMORYTYPE = {1: "host", 2: "device", 3: "array", 4: "unified"}
# cuMemHostRegister
REGISTER_PORTABLE, REGISTER_DEVICEMAP, REGISTER_READ_ONLY = 1, 2, 8
STREAM_NON_BLOCKING = 1
STREAM_WAIT_VALUE_GEQ = 0
EVENT_DEFAULT = 0
# managed memory
ADVISE = {"readmostly": 1, "preferred": 3, "accessed-by": 5}
RANGE_READ_MOSTLY, RANGE_PREFERRED_LOCATION, RANGE_LAST_PREFETCH_LOCATION = 1, 2, 4
LOCATION_DEVICE, LOCATION_HOST = 1, 2
DEVICE_CPU = -1


HOST_FN = C.CFUNCTYPE(None, C.c_void_p)


class CUmemLocation(C.Structure):
    _fields_ = [("type", C.c_int), ("id", C.c_int)]


_SIGNATURES = {
    "cuGetErrorName": [C.c_int, C.POINTER(C.c_char_p)],
    "cuGetErrorString": [C.c_int, C.POINTER(C.c_char_p)],
    "cuMemHostRegister_v2": [C.c_void_p, C.c_size_t, C.c_uint],
    "cuMemHostUnregister": [C.c_void_p],
    "cuMemHostGetDevicePointer_v2": [C.POINTER(C.c_uint64), C.c_void_p, C.c_uint],
    "cuMemHostGetFlags": [C.POINTER(C.c_uint), C.c_void_p],
    "cuPointerGetAttribute": [C.c_void_p, C.c_int, C.c_uint64],
    "cuMemGetInfo_v2": [C.POINTER(C.c_size_t), C.POINTER(C.c_size_t)],
    "cuCtxGetStreamPriorityRange": [C.POINTER(C.c_int), C.POINTER(C.c_int)],
    "cuStreamCreateWithPriority": [C.POINTER(C.c_void_p), C.c_uint, C.c_int],
    "cuStreamDestroy_v2": [C.c_void_p],
    "cuStreamSynchronize": [C.c_void_p],
    "cuStreamQuery": [C.c_void_p],
    "cuCtxSynchronize": [],
    "cuEventCreate": [C.POINTER(C.c_void_p), C.c_uint],
    "cuEventRecord": [C.c_void_p, C.c_void_p],
    "cuEventQuery": [C.c_void_p],
    "cuEventSynchronize": [C.c_void_p],
    "cuEventElapsedTime_v2": [C.POINTER(C.c_float), C.c_void_p, C.c_void_p],
    "cuEventDestroy_v2": [C.c_void_p],
    "cuMemcpy": [C.c_uint64, C.c_uint64, C.c_size_t],  # unified addressing: any pair of pointers
    "cuMemcpyAsync": [C.c_uint64, C.c_uint64, C.c_size_t, C.c_void_p],
    "cuMemcpyHtoD_v2": [C.c_uint64, C.c_void_p, C.c_size_t],
    "cuMemcpyDtoH_v2": [C.c_void_p, C.c_uint64, C.c_size_t],
    "cuMemcpyDtoD_v2": [C.c_uint64, C.c_uint64, C.c_size_t],
    "cuMemcpyHtoDAsync_v2": [C.c_uint64, C.c_void_p, C.c_size_t, C.c_void_p],
    "cuMemcpyDtoHAsync_v2": [C.c_void_p, C.c_uint64, C.c_size_t, C.c_void_p],
    "cuMemcpyDtoDAsync_v2": [C.c_uint64, C.c_uint64, C.c_size_t, C.c_void_p],
    "cuMemsetD8_v2": [C.c_uint64, C.c_ubyte, C.c_size_t],
    "cuMemsetD8Async": [C.c_uint64, C.c_ubyte, C.c_size_t, C.c_void_p],
    "cuModuleLoadData": [C.POINTER(C.c_void_p), C.c_char_p],
    "cuModuleGetFunction": [C.POINTER(C.c_void_p), C.c_void_p, C.c_char_p],
    "cuModuleUnload": [C.c_void_p],
    "cuLaunchKernel": [C.c_void_p, C.c_uint, C.c_uint, C.c_uint, C.c_uint, C.c_uint, C.c_uint, C.c_uint,
                       C.c_void_p, C.POINTER(C.c_void_p), C.POINTER(C.c_void_p)],
    "cuStreamWaitEvent": [C.c_void_p, C.c_void_p, C.c_uint],
    "cuStreamWaitValue32_v2": [C.c_void_p, C.c_uint64, C.c_uint32, C.c_uint],
    "cuLaunchHostFunc": [C.c_void_p, C.c_void_p, C.c_void_p],
    "cuDeviceGetAttribute": [C.POINTER(C.c_int), C.c_int, C.c_int],
    "cuMemPrefetchAsync_v2": [C.c_uint64, C.c_size_t, CUmemLocation, C.c_uint, C.c_void_p],
    "cuMemAdvise_v2": [C.c_uint64, C.c_size_t, C.c_int, CUmemLocation],
    "cuMemRangeGetAttribute": [C.c_void_p, C.c_size_t, C.c_int, C.c_uint64, C.c_size_t],
    # several GPUs
    "cuDeviceGetCount": [C.POINTER(C.c_int)],
    "cuDeviceGet": [C.POINTER(C.c_int), C.c_int],
    "cuDeviceGetName": [C.c_char_p, C.c_int, C.c_int],
    "cuDeviceGetPCIBusId": [C.c_char_p, C.c_int, C.c_int],
    "cuDeviceTotalMem_v2": [C.POINTER(C.c_size_t), C.c_int],
    "cuDeviceCanAccessPeer": [C.POINTER(C.c_int), C.c_int, C.c_int],
    "cuDeviceGetP2PAttribute": [C.POINTER(C.c_int), C.c_int, C.c_int, C.c_int],
    "cuDevicePrimaryCtxRetain": [C.POINTER(C.c_void_p), C.c_int],
    "cuDevicePrimaryCtxRelease_v2": [C.c_int],
    "cuCtxGetCurrent": [C.POINTER(C.c_void_p)],
    "cuCtxSetCurrent": [C.c_void_p],
    "cuCtxCreate_v4": [C.POINTER(C.c_void_p), C.c_void_p, C.c_uint, C.c_int],  # CUDA 13: (ctx, params, flags, dev)
    "cuCtxPopCurrent_v2": [C.POINTER(C.c_void_p)],
    "cuCtxDestroy_v2": [C.c_void_p],
    "cuCtxEnablePeerAccess": [C.c_void_p, C.c_uint],
    "cuCtxDisablePeerAccess": [C.c_void_p],
    "cuMemAlloc_v2": [C.POINTER(C.c_uint64), C.c_size_t],
    "cuMemFree_v2": [C.c_uint64],
    "cuMemcpyPeerAsync": [C.c_uint64, C.c_void_p, C.c_uint64, C.c_void_p, C.c_size_t, C.c_void_p],
}
P2P_ATOMICS = 3  # CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED
PEER_ALREADY_ENABLED = 704  # CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED


class Driver:
    """libcuda's functions with their signatures; `call(name, *args)` raises on any error."""

    def __init__(self, lib: C.CDLL | None = None):
        self.lib = lib or C.CDLL("libcuda.so.1")
        self.fn = {}
        for name, argtypes in _SIGNATURES.items():
            f = getattr(self.lib, name)
            f.argtypes, f.restype = argtypes, C.c_int
            self.fn[name] = f
        self._names: dict[str, str] | None = None

    def error_name(self, code: int) -> str:
        s = C.c_char_p()
        if self.fn["cuGetErrorName"](code, C.byref(s)) != CUDA_SUCCESS or not s.value:
            return f"CUDA_ERROR_{code}"
        return s.value.decode()

    def error_string(self, code: int) -> str:
        s = C.c_char_p()
        if self.fn["cuGetErrorString"](code, C.byref(s)) != CUDA_SUCCESS or not s.value:
            return "unknown error"
        return s.value.decode()

    def raw(self, name: str, *args) -> int:
        """Call without raising: for queries whose 'error' is an answer (not ready, not registered)."""
        return self.fn[name](*args)

    def call(self, name: str, *args, hint: str | None = None) -> None:
        self.check(self.fn[name](*args), name, hint)

    def check(self, res: int, name: str, hint: str | None = None) -> None:
        if res != CUDA_SUCCESS:
            raise ShellError(self.error_name(res), f"{name} failed: {self.error_string(res)}", hint)

    def name_for_description(self, description: str) -> str | None:
        """PyCUDA reports 'cuX failed: <cuGetErrorString text>'; map the text back to the error's name."""
        if self._names is None:
            self._names = {}
            for code in range(1, 1000):
                text = self.error_string(code)
                if text != "unknown error":
                    self._names.setdefault(text, self.error_name(code))
        return self._names.get(description.strip())

    # ----------------------------------------------------------- small typed helpers
    def out_uint64(self, name: str, *args) -> int | str:
        v = C.c_uint64()
        res = self.raw(name, C.byref(v), *args)
        return v.value if res == CUDA_SUCCESS else self.error_name(res)

    def host_flags(self, ptr: int) -> int | str:
        v = C.c_uint()
        res = self.raw("cuMemHostGetFlags", C.byref(v), C.c_void_p(ptr))
        return v.value if res == CUDA_SUCCESS else self.error_name(res)

    def pointer_attribute(self, attr: int, ptr: int) -> int | str:
        v = C.c_uint() if attr == POINTER_MEMORY_TYPE else C.c_int()
        res = self.raw("cuPointerGetAttribute", C.byref(v), attr, ptr)
        return v.value if res == CUDA_SUCCESS else self.error_name(res)

    def range_attribute(self, attr: int, ptr: int, size: int) -> int | str:
        v = C.c_int()
        res = self.raw("cuMemRangeGetAttribute", C.byref(v), C.sizeof(v), attr, ptr, size)
        return v.value if res == CUDA_SUCCESS else self.error_name(res)

    def mem_info(self) -> tuple[int, int]:
        free, total = C.c_size_t(), C.c_size_t()
        self.call("cuMemGetInfo_v2", C.byref(free), C.byref(total))
        return free.value, total.value

    def priority_range(self) -> tuple[int, int]:
        least, greatest = C.c_int(), C.c_int()
        self.call("cuCtxGetStreamPriorityRange", C.byref(least), C.byref(greatest))
        return least.value, greatest.value

    def stream_create(self, nonblocking: bool, priority: int) -> int:
        h = C.c_void_p()
        self.call("cuStreamCreateWithPriority", C.byref(h), STREAM_NON_BLOCKING if nonblocking else 0, priority)
        return h.value

    def event(self) -> int:
        h = C.c_void_p()
        self.call("cuEventCreate", C.byref(h), EVENT_DEFAULT)
        return h.value

    def event_done(self, ev: int) -> bool:
        res = self.raw("cuEventQuery", ev)
        if res in (CUDA_SUCCESS, CUDA_ERROR_NOT_READY):
            return res == CUDA_SUCCESS
        raise ShellError(self.error_name(res), f"cuEventQuery failed: {self.error_string(res)}")

    def stream_done(self, stream: int | None) -> bool:
        res = self.raw("cuStreamQuery", stream)
        if res in (CUDA_SUCCESS, CUDA_ERROR_NOT_READY):
            return res == CUDA_SUCCESS
        raise ShellError(self.error_name(res), f"cuStreamQuery failed: {self.error_string(res)}")

    def elapsed(self, start: int, end: int) -> float:
        ms = C.c_float()
        self.call("cuEventElapsedTime_v2", C.byref(ms), start, end)
        return ms.value / 1e3

    def load_module(self, image: bytes) -> int:
        mod = C.c_void_p()
        self.call("cuModuleLoadData", C.byref(mod), image)
        return mod.value

    def function(self, mod: int, name: str) -> int:
        fn = C.c_void_p()
        self.call("cuModuleGetFunction", C.byref(fn), mod, name.encode())
        return fn.value

    @staticmethod
    def launch_args(fn: int, grid: tuple, block: tuple, stream: int | None, *params, shared: int = 0) -> tuple:
        """cuLaunchKernel's arguments for a grid and a block of (x, y, z); the ctypes values must stay alive
        until the call, so the returned tuple holds them (as the array of their addresses does not)."""
        ptrs = (C.c_void_p * len(params))(*[C.addressof(p) for p in params])
        return (fn, *grid, *block, shared, stream, ptrs, None), params

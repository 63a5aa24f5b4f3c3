"""NVIDIA's driver bindings (`cuda.bindings.driver`, the cuda-bindings package) for what PyCUDA lacks or cannot
report: host registration (broken in PyCUDA under numpy 2), pointer and range attributes, streams with priorities,
host functions, managed prefetch/advice, the copies, memsets, events and launches on those streams — and the
allocations, whose failures PyCUDA reports only as text. Every bindings call returns (CUresult, values…): `call`
gives the values or raises ShellError named by the CUresult enum. Handles (streams, events, contexts, modules,
functions, device pointers) travel as plain ints: the bindings take them so, and ints cross the worker's pipe."""

from __future__ import annotations

import ctypes as C

from cuda.bindings import driver as cu

from ..errors import ShellError

OK = cu.CUresult.CUDA_SUCCESS
NOT_READY = cu.CUresult.CUDA_ERROR_NOT_READY
HOST_FN = C.CFUNCTYPE(None, C.c_void_p)  # a Python host function, as C calls it (kept alive until it ran)


def error(err: cu.CUresult, name: str, hint: str | None = None) -> ShellError:
    res, text = cu.cuGetErrorString(err)
    return ShellError(err.name, f"{name} failed: {text.decode() if res is OK and text else 'unknown error'}", hint)


def call(name: str, *args, hint: str | None = None):
    """The driver function `name`: what it returns (None, one value, or a tuple), or its error raised by name."""
    res = getattr(cu, name)(*args)
    if res[0] is not OK:
        raise error(res[0], name, hint)
    return None if len(res) == 1 else res[1] if len(res) == 2 else res[1:]


def check(err: cu.CUresult, name: str) -> None:
    """For the hot paths, which call the bindings directly and look at the CUresult alone."""
    if err is not OK:
        raise error(err, name)


def done(name: str, handle: int | None) -> bool:
    """cuStreamQuery / cuEventQuery: finished, not yet, or the error (a dead context's) raised."""
    err = getattr(cu, name)(handle)[0]
    if err is OK or err is NOT_READY:
        return err is OK
    raise error(err, name)


def answer(name: str, *args, convert=int) -> object:
    """A query whose refusal is itself the answer a user reads (`info` on a pointer the driver does not know):
    the value, converted, or the error's name."""
    try:
        return convert(call(name, *args))
    except ShellError as e:
        return e.code


def text(raw: bytes) -> str:
    """A C string the bindings hand back in its whole buffer."""
    return raw.split(b"\0", 1)[0].decode()


def location(where: str, device: int) -> cu.CUmemLocation:
    loc = cu.CUmemLocation()
    loc.type = (cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST if where == "host"
                else cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE)
    loc.id = 0 if where == "host" else device
    return loc


def launch_args(fn: int, grid: tuple, block: tuple, stream: int | None, *params, shared: int = 0) -> tuple:
    """cuLaunchKernel's arguments for a grid and a block of (x, y, z), the parameters as C's void *[]; the ctypes
    values and that array must outlive the call, so the second item holds them."""
    ptrs = (C.c_void_p * max(1, len(params)))(*[C.addressof(p) for p in params])
    return (fn, *grid, *block, shared, stream or 0, C.addressof(ptrs), 0), (params, ptrs)


def host_fn(fn) -> cu.CUhostFn:
    return cu.CUhostFn(C.cast(fn, C.c_void_p).value)


def mismatch(driver_cuda_major: int) -> str | None:
    """Why the installed cuda-bindings cannot drive this driver, if it cannot: a major version newer than the
    driver's CUDA asks for symbols the driver lacks (pin it as the cupti extra is: cuda-bindings==<major>.*)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major = int(version("cuda-bindings").split(".")[0])
    except PackageNotFoundError:  # a source build: trust its import
        return None
    if major > driver_cuda_major:
        return (f"cuda-bindings {major} needs a CUDA {major} driver, this one is CUDA {driver_cuda_major} "
                f"(pip install 'cuda-bindings=={driver_cuda_major}.*')")
    return None

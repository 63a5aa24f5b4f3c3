"""Several GPUs, from inside the GPU worker: what the driver says of each device and of each pair (peer access,
native atomics), the link between them as `nvidia-smi topo -m` names it (NV18, PIX, SYS…), and copies from one
GPU's memory to another's, timed by events — with peer access enabled both ways, or staged through the host."""

from __future__ import annotations

import ctypes as C
import mmap
import re
import shutil
import subprocess
from contextlib import contextmanager

from ..errors import ShellError
from ..machine import bind_to_node, pcie_link
from .driver import P2P_ATOMICS, PEER_ALREADY_ENABLED, Driver

TOPO_WORDS = {"X": "self", "SYS": "PCIe across CPU sockets (SYS)", "NODE": "PCIe within a NUMA node (NODE)",
              "PHB": "PCIe through the host bridge (PHB)", "PXB": "PCIe through switches (PXB)",
              "PIX": "PCIe through one switch (PIX)"}


def _int(drv: Driver, name: str, *args) -> int:
    v = C.c_int()
    drv.call(name, C.byref(v), *args)
    return v.value


def devices(drv: Driver) -> list[dict]:
    out = []
    for i in range(_int(drv, "cuDeviceGetCount")):
        dev = _int(drv, "cuDeviceGet", i)
        name, bus, mem = C.create_string_buffer(256), C.create_string_buffer(32), C.c_size_t()
        drv.call("cuDeviceGetName", name, 256, dev)
        drv.call("cuDeviceGetPCIBusId", bus, 32, dev)
        drv.call("cuDeviceTotalMem_v2", C.byref(mem), dev)
        major, minor = (_int(drv, "cuDeviceGetAttribute", attr, dev) for attr in (75, 76))
        bus_id = bus.value.decode()
        link = pcie_link(bus_id)
        out.append({"ordinal": i, "name": name.value.decode(), "pci_bus_id": bus_id,
                    "numa_node": link["numa_node"] if link else None, "total_mem": mem.value,
                    "compute_capability": f"{major}.{minor}"})
    return out


def topo_links() -> dict[tuple[int, int], str]:
    """(a, b) → how nvidia-smi names the link ("NV18", "SYS"…), or nothing where nvidia-smi is missing."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    try:
        text = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_topo(text)


def parse_topo(text: str) -> dict[tuple[int, int], str]:
    """The GPU-to-GPU block of `nvidia-smi topo -m` (rows `GPU0  X  NV18 …`; the CPU/NUMA columns after it)."""
    rows = [line.split() for line in text.splitlines() if re.match(r"^GPU\d+\s", line)]  # the header is indented
    links = {}
    for row in rows:
        a = int(row[0][3:])
        for b, word in enumerate(row[1:1 + len(rows)]):
            links[(a, b)] = word
    return links


def peers(drv: Driver, count: int) -> tuple[list[dict], str]:
    links = topo_links()
    out = []
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            word = links.get((a, b))
            link = (f"NVLink ({word})" if word.startswith("NV") else TOPO_WORDS.get(word, word)) if word else "?"
            out.append({"src": a, "dst": b, "access": bool(_int(drv, "cuDeviceCanAccessPeer", a, b)),
                        "link": link, "atomics": bool(_int(drv, "cuDeviceGetP2PAttribute", P2P_ATOMICS, a, b))})
    return out, "nvidia-smi topo -m" if links else "the driver (nvidia-smi not found: link unknown)"


def device_count(drv: Driver) -> int:
    return _int(drv, "cuDeviceGetCount")


def check_pair(drv: Driver, src: int, dst: int) -> None:
    """Two different GPUs the driver has, or its CUDA_ERROR_INVALID_DEVICE."""
    count = device_count(drv)
    if not (0 <= src < count and 0 <= dst < count) or src == dst:
        raise ShellError("CUDA_ERROR_INVALID_DEVICE", f"no pair of GPUs {src} → {dst} among {count}")


@contextmanager
def _primaries(drv: Driver, ordinals):
    """Each device's primary context, retained for the whole block (released, it would be destroyed with the memory
    made in it); the caller's context is current again afterwards."""
    before, ctxs = C.c_void_p(), {}
    drv.call("cuCtxGetCurrent", C.byref(before))
    try:
        for n in ordinals:
            ctxs[n] = C.c_void_p()
            drv.call("cuDevicePrimaryCtxRetain", C.byref(ctxs[n]), n)
        yield ctxs
    finally:
        drv.raw("cuCtxSetCurrent", before)
        for n in ctxs:
            drv.raw("cuDevicePrimaryCtxRelease_v2", n)


def peer_copy(drv: Driver, src: int, dst: int, nbytes: int, reps: int, peer: bool) -> float:
    """Seconds per copy, as cudaMemcpyPeerAsync gives it: `reps` copies back to back on a stream of the
    source's primary context, between two events (one warm-up copy first)."""
    check_pair(drv, src, dst)
    with _primaries(drv, (src, dst)) as ctx:
        made, enabled = [], []  # (context, pointer) to free; (context, peer context) to disable
        try:
            for n in (dst, src):
                ptr = C.c_uint64()
                drv.call("cuCtxSetCurrent", ctx[n])
                drv.call("cuMemAlloc_v2", C.byref(ptr), nbytes)
                made.append((ctx[n], ptr))
            if peer:  # both ways, as cudaDeviceEnablePeerAccess on each side does
                for me, other in ((dst, src), (src, dst)):
                    drv.call("cuCtxSetCurrent", ctx[me])
                    res = drv.raw("cuCtxEnablePeerAccess", ctx[other], 0)
                    if res not in (0, PEER_ALREADY_ENABLED):
                        drv.check(res, "cuCtxEnablePeerAccess", "this pair of GPUs cannot reach each other directly")
                    enabled.append((ctx[me], ctx[other]))
            drv.call("cuCtxSetCurrent", ctx[src])
            a, b = made[1][1].value, made[0][1].value
            return _timed(drv, lambda stream: drv.call("cuMemcpyPeerAsync", b, ctx[dst], a, ctx[src], nbytes,
                                                        C.c_void_p(stream)), reps)
        finally:
            for me, other in enabled:
                drv.raw("cuCtxSetCurrent", me)
                drv.raw("cuCtxDisablePeerAccess", other)
            for c, ptr in made:
                drv.raw("cuCtxSetCurrent", c)
                drv.raw("cuMemFree_v2", ptr)


def _timed(drv: Driver, copy, reps: int) -> float:
    """Seconds per `copy(stream)`, `reps` back to back between two events on a new stream of the current context."""
    stream, start, end = drv.stream_create(False, 0), drv.event(), drv.event()
    try:
        copy(stream)  # warm-up: the first copy pays for mappings
        drv.call("cuEventRecord", C.c_void_p(start), C.c_void_p(stream))
        for _ in range(reps):
            copy(stream)
        drv.call("cuEventRecord", C.c_void_p(end), C.c_void_p(stream))
        drv.call("cuEventSynchronize", C.c_void_p(end))
        return drv.elapsed(start, end) / reps
    finally:
        drv.raw("cuStreamSynchronize", C.c_void_p(stream))
        for ev in (start, end):
            drv.raw("cuEventDestroy_v2", C.c_void_p(ev))
        drv.raw("cuStreamDestroy_v2", C.c_void_p(stream))


def host_copy(drv: Driver, device: int, node: int | None, nbytes: int, reps: int, to_device: bool) -> float:
    """Seconds per copy between host memory on NUMA node `node` (None: wherever the kernel puts it) and GPU `device`:
    anonymous pages bound to the node (mbind) and touched there, pinned in place (cuMemHostRegister), then `reps`
    cuMemcpy{HtoD,DtoH}Async back to back on a stream of the GPU's primary context, between two events."""
    with _primaries(drv, (device,)) as ctx:
        drv.call("cuCtxSetCurrent", ctx[device])
        host = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        view = C.c_char.from_buffer(host)
        addr = C.addressof(view)
        dptr, registered = C.c_uint64(), False
        try:
            if node is not None:
                try:
                    bind_to_node(addr, nbytes, node)
                except OSError as e:
                    raise ShellError("NUMA_BIND", str(e), "the kernel would not place the pages there") from None
            C.memset(addr, 1, nbytes)  # the pages come to exist now, on that node
            drv.call("cuMemHostRegister_v2", C.c_void_p(addr), nbytes, 0)
            registered = True
            drv.call("cuMemAlloc_v2", C.byref(dptr), nbytes)
            copy = (("cuMemcpyHtoDAsync_v2", dptr.value, C.c_void_p(addr)) if to_device
                    else ("cuMemcpyDtoHAsync_v2", C.c_void_p(addr), dptr.value))
            return _timed(drv, lambda stream: drv.call(*copy, nbytes, C.c_void_p(stream)), reps)
        finally:
            if dptr.value:
                drv.raw("cuMemFree_v2", dptr)
            if registered:
                drv.raw("cuMemHostUnregister", C.c_void_p(addr))
            del view  # the buffer's export, or mmap refuses to close
            host.close()


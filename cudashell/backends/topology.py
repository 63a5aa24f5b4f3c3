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
from ..model.machine import bind_to_node, pcie_link
from .bindings import OK, call, cu, error, text

P2P_ATOMICS = cu.CUdevice_P2PAttribute.CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED
PEER_ALREADY_ENABLED = cu.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED

TOPO_WORDS = {"X": "self", "SYS": "PCIe across CPU sockets (SYS)", "NODE": "PCIe within a NUMA node (NODE)",
              "PHB": "PCIe through the host bridge (PHB)", "PXB": "PCIe through switches (PXB)",
              "PIX": "PCIe through one switch (PIX)"}


def devices() -> list[dict]:
    out = []
    for i in range(call("cuDeviceGetCount")):
        dev = call("cuDeviceGet", i)
        major, minor, engines, pageable = (call("cuDeviceGetAttribute", attr, dev) for attr in (
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT,
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS))
        bus_id = text(call("cuDeviceGetPCIBusId", 32, dev))
        link = pcie_link(bus_id)
        out.append({"ordinal": i, "name": text(call("cuDeviceGetName", 256, dev)), "pci_bus_id": bus_id,
                    "numa_node": link["numa_node"] if link else None, "total_mem": call("cuDeviceTotalMem", dev),
                    "compute_capability": f"{major}.{minor}", "async_engine_count": engines,
                    "pageable_memory_access": bool(pageable)})
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


def peers(count: int) -> tuple[list[dict], str]:
    links = topo_links()
    out = []
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            word = links.get((a, b))
            link = (f"NVLink ({word})" if word.startswith("NV") else TOPO_WORDS.get(word, word)) if word else "?"
            out.append({"src": a, "dst": b, "access": bool(call("cuDeviceCanAccessPeer", a, b)),
                        "link": link, "atomics": bool(call("cuDeviceGetP2PAttribute", P2P_ATOMICS, a, b))})
    return out, "nvidia-smi topo -m" if links else "the driver (nvidia-smi not found: link unknown)"


def device_count() -> int:
    return call("cuDeviceGetCount")


def check_pair(src: int, dst: int) -> None:
    """Two different GPUs the driver has, or its CUDA_ERROR_INVALID_DEVICE."""
    count = device_count()
    if not (0 <= src < count and 0 <= dst < count) or src == dst:
        raise ShellError("CUDA_ERROR_INVALID_DEVICE", f"no pair of GPUs {src} → {dst} among {count}")


@contextmanager
def _primaries(ordinals):
    """Each device's primary context, retained for the whole block (released, it would be destroyed with the memory
    made in it); the caller's context is current again afterwards."""
    before, ctxs = call("cuCtxGetCurrent"), {}
    try:
        for n in ordinals:
            ctxs[n] = int(call("cuDevicePrimaryCtxRetain", n))
        yield ctxs
    finally:
        cu.cuCtxSetCurrent(before)
        for n in ctxs:
            cu.cuDevicePrimaryCtxRelease(n)


def peer_copy(src: int, dst: int, nbytes: int, reps: int, peer: bool) -> float:
    """Seconds per copy, as cudaMemcpyPeerAsync gives it: `reps` copies back to back on a stream of the
    source's primary context, between two events (one warm-up copy first)."""
    check_pair(src, dst)
    with _primaries((src, dst)) as ctx:
        made, enabled = [], []  # (context, pointer) to free; (context, peer context) to disable
        try:
            for n in (dst, src):
                call("cuCtxSetCurrent", ctx[n])
                made.append((ctx[n], int(call("cuMemAlloc", nbytes))))
            if peer:  # both ways, as cudaDeviceEnablePeerAccess on each side does
                for me, other in ((dst, src), (src, dst)):
                    call("cuCtxSetCurrent", ctx[me])
                    err = cu.cuCtxEnablePeerAccess(ctx[other], 0)[0]
                    if err is not OK and err is not PEER_ALREADY_ENABLED:
                        raise error(err, "cuCtxEnablePeerAccess", "this pair of GPUs cannot reach each other directly")
                    enabled.append((ctx[me], ctx[other]))
            call("cuCtxSetCurrent", ctx[src])
            a, b = made[1][1], made[0][1]
            return _timed(lambda stream: call("cuMemcpyPeerAsync", b, ctx[dst], a, ctx[src], nbytes, stream), reps)
        finally:
            for me, other in enabled:
                cu.cuCtxSetCurrent(me)
                cu.cuCtxDisablePeerAccess(other)
            for c, ptr in made:
                cu.cuCtxSetCurrent(c)
                cu.cuMemFree(ptr)


def _timed(copy, reps: int) -> float:
    """Seconds per `copy(stream)`, `reps` back to back between two events on a new stream of the current context."""
    stream = int(call("cuStreamCreateWithPriority", 0, 0))
    start, end = (int(call("cuEventCreate", 0)) for _ in range(2))
    try:
        copy(stream)  # warm-up: the first copy pays for mappings
        call("cuEventRecord", start, stream)
        for _ in range(reps):
            copy(stream)
        call("cuEventRecord", end, stream)
        call("cuEventSynchronize", end)
        return call("cuEventElapsedTime", start, end) / 1e3 / reps
    finally:
        cu.cuStreamSynchronize(stream)
        for ev in (start, end):
            cu.cuEventDestroy(ev)
        cu.cuStreamDestroy(stream)


def host_copy(device: int, node: int | None, nbytes: int, reps: int, to_device: bool) -> float:
    """Seconds per copy between host memory on NUMA node `node` (None: wherever the kernel puts it) and GPU `device`:
    anonymous pages bound to the node (mbind) and touched there, pinned in place (cuMemHostRegister), then `reps`
    cuMemcpy{HtoD,DtoH}Async back to back on a stream of the GPU's primary context, between two events."""
    with _primaries((device,)) as ctx:
        call("cuCtxSetCurrent", ctx[device])
        host = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        view = C.c_char.from_buffer(host)
        addr = C.addressof(view)
        dptr, registered = 0, False
        try:
            if node is not None:
                try:
                    bind_to_node(addr, nbytes, node)
                except OSError as e:
                    raise ShellError("NUMA_BIND", str(e), "the kernel would not place the pages there") from None
            C.memset(addr, 1, nbytes)  # the pages come to exist now, on that node
            call("cuMemHostRegister", addr, nbytes, 0)
            registered = True
            dptr = int(call("cuMemAlloc", nbytes))
            copy = ("cuMemcpyHtoDAsync", dptr, addr) if to_device else ("cuMemcpyDtoHAsync", addr, dptr)
            return _timed(lambda stream: call(*copy, nbytes, stream), reps)
        finally:
            if dptr:
                cu.cuMemFree(dptr)
            if registered:
                cu.cuMemHostUnregister(addr)
            del view  # the buffer's export, or mmap refuses to close
            host.close()


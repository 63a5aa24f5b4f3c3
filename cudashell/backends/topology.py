"""Several GPUs, from inside the GPU worker: what the driver says of each device and of each pair (peer access,
native atomics), the link between them as `nvidia-smi topo -m` names it (NV18, PIX, SYS…), and copies from one
GPU's memory to another's, timed by events — with peer access enabled both ways, or staged through the host."""

from __future__ import annotations

import ctypes as C
import re
import shutil
import subprocess
from contextlib import contextmanager

from ..errors import ShellError
from ..machine import pcie_link
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
    rows = [line.split() for line in text.splitlines() if re.match(r"^\s*GPU\d+\s", line)]
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


@contextmanager
def _primary(drv: Driver, ordinal: int):
    """A device's primary context made current; the caller's context is current again afterwards."""
    before, ctx = C.c_void_p(), C.c_void_p()
    drv.call("cuCtxGetCurrent", C.byref(before))
    drv.call("cuDevicePrimaryCtxRetain", C.byref(ctx), ordinal)
    try:
        drv.call("cuCtxSetCurrent", ctx)
        yield ctx
    finally:
        drv.raw("cuCtxSetCurrent", before)
        drv.raw("cuDevicePrimaryCtxRelease_v2", ordinal)


def peer_copy(drv: Driver, src: int, dst: int, nbytes: int, reps: int, peer: bool) -> float:
    """Seconds per copy, as cudaMemcpyPeerAsync gives it: `reps` copies back to back on a stream of the
    source's primary context, between two events (one warm-up copy first)."""
    count = _int(drv, "cuDeviceGetCount")
    if not (0 <= src < count and 0 <= dst < count) or src == dst:
        raise ShellError("CUDA_ERROR_INVALID_DEVICE", f"no pair of GPUs {src} → {dst} among {count}")
    with _primary(drv, dst) as dctx:
        b = C.c_uint64()
        drv.call("cuMemAlloc_v2", C.byref(b), nbytes)
    try:
        with _primary(drv, src) as sctx:
            a = C.c_uint64()
            drv.call("cuMemAlloc_v2", C.byref(a), nbytes)
            try:
                return _timed_copies(drv, sctx, dctx, dst, a.value, b.value, nbytes, reps, peer)
            finally:
                drv.raw("cuMemFree_v2", a)
    finally:
        with _primary(drv, dst):
            drv.raw("cuMemFree_v2", b)


def _timed_copies(drv, sctx, dctx, dst, a, b, nbytes, reps, peer) -> float:
    if peer:  # both ways, as cudaDeviceEnablePeerAccess on each side would
        _enable(drv, dctx)
        with _primary(drv, dst):
            _enable(drv, sctx)
    try:
        stream, start, end = drv.stream_create(False, 0), drv.event(), drv.event()
        copy = ("cuMemcpyPeerAsync", b, dctx, a, sctx, nbytes, C.c_void_p(stream))
        drv.call(*copy)  # warm-up: the first copy pays for mappings
        drv.call("cuEventRecord", C.c_void_p(start), C.c_void_p(stream))
        for _ in range(reps):
            drv.call(*copy)
        drv.call("cuEventRecord", C.c_void_p(end), C.c_void_p(stream))
        drv.call("cuEventSynchronize", C.c_void_p(end))
        seconds = drv.elapsed(start, end) / reps
        for ev in (start, end):
            drv.raw("cuEventDestroy_v2", C.c_void_p(ev))
        drv.raw("cuStreamDestroy_v2", C.c_void_p(stream))
        return seconds
    finally:
        if peer:
            drv.raw("cuCtxDisablePeerAccess", dctx)
            with _primary(drv, dst):
                drv.raw("cuCtxDisablePeerAccess", sctx)


def _enable(drv: Driver, other) -> None:
    res = drv.raw("cuCtxEnablePeerAccess", other, 0)
    if res not in (0, PEER_ALREADY_ENABLED):
        drv.check(res, "cuCtxEnablePeerAccess", "this pair of GPUs cannot reach each other directly")

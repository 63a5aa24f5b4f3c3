"""Facts about the host's memory path, read from /sys and /proc: the PCIe link, NUMA, memlock, huge pages,
IOMMU and virtualisation. Each reader returns None where the system does not say."""

from __future__ import annotations

import os
import re
import resource
from pathlib import Path

# GT/s per lane → payload bytes/s per lane: 8b/10b encoding for Gen1/2, 128b/130b from Gen3
GEN_BY_RATE = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def pcie_peak(gen: int, width: int) -> float:
    """Bytes per second per direction: Gen5 x16 = 63.0 GB/s."""
    rate = {v: k for k, v in GEN_BY_RATE.items()}[gen]
    encoding = 8 / 10 if gen <= 2 else 128 / 130
    return rate * 1e9 * encoding * width / 8


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def pcie_link(bus_id: str) -> dict | None:
    """Current and maximum generation and width of a PCI device's link (sysfs)."""
    dev = Path("/sys/bus/pci/devices") / bus_id.lower()
    out = {}
    for key in ("current_link_speed", "max_link_speed"):
        text = _read(dev / key)
        m = re.match(r"([\d.]+) GT/s", text or "")
        if not m:
            return None
        out[key.replace("_link_speed", "_gen")] = GEN_BY_RATE.get(float(m.group(1)))
    for key in ("current_link_width", "max_link_width"):
        text = _read(dev / key)
        if not text or not text.isdigit():
            return None
        out[key.replace("_link_", "_")] = int(text)
    out["numa_node"] = int(_read(dev / "numa_node") or -1)
    return out


def memlock_limit() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return None if soft == resource.RLIM_INFINITY else soft


def meminfo() -> dict:
    out = {}
    for line in (_read(Path("/proc/meminfo")) or "").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def host_memory_total() -> int:
    """The host's RAM in bytes (MemTotal); 0 where /proc/meminfo does not say."""
    return meminfo().get("MemTotal", 0)


def transparent_hugepages() -> str | None:
    text = _read(Path("/sys/kernel/mm/transparent_hugepage/enabled"))
    m = re.search(r"\[(\w+)\]", text or "")
    return m.group(1) if m else None


def iommu() -> dict:
    groups = Path("/sys/kernel/iommu_groups")
    cmdline = _read(Path("/proc/cmdline")) or ""
    return {"groups": len(list(groups.iterdir())) if groups.is_dir() else 0,
            "cmdline": " ".join(w for w in cmdline.split() if "iommu" in w) or None}


def virtualised() -> bool:
    return " hypervisor" in (_read(Path("/proc/cpuinfo")) or "")


def cpu_numa_node() -> int | None:
    """The NUMA node of the CPU this process runs on."""
    try:
        cpu = os.sched_getaffinity(0)
    except AttributeError:
        return None
    first = min(cpu)
    for node in Path("/sys/devices/system/node").glob("node*"):
        if (node / f"cpu{first}").exists():
            return int(node.name[4:])
    return None


def memory_nodes() -> list[int]:
    """The NUMA nodes that have memory (/sys/devices/system/node/has_memory: `0`, `0-1`); [] where it does not say."""
    text = _read(Path("/sys/devices/system/node/has_memory"))
    nodes = []
    for part in (text or "").strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            nodes += range(int(lo), int(hi or lo) + 1)
    return nodes


MPOL_BIND, MPOL_MF_STRICT, MPOL_MF_MOVE, SYS_MBIND_X86_64 = 2, 1, 2, 237


def bind_to_node(addr: int, nbytes: int, node: int) -> None:
    """Put the pages of [addr, addr + nbytes) on NUMA node `node` (mbind, MPOL_BIND), before they are touched: host
    memory near or far from a GPU. Raises OSError where the kernel refuses."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    mask = ctypes.c_ulong(1 << node)
    if libc.syscall(SYS_MBIND_X86_64, ctypes.c_void_p(addr), ctypes.c_ulong(nbytes), MPOL_BIND, ctypes.byref(mask),
                    ctypes.c_ulong(64), MPOL_MF_STRICT | MPOL_MF_MOVE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mbind to node {node}: {os.strerror(err)}")


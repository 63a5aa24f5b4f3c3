"""doctor: the machine's memory path, each finding with what it means for the user's copies."""

from __future__ import annotations

from typing import TypedDict

from ..language.registry import command
from ..model import machine
from ..output.render import fit
from ..output.results import Result
from ..sizes import format_size


def _finding(level: str, topic: str, value, meaning: str) -> dict:
    text = ("yes" if value else "no") if isinstance(value, bool) else str(value)
    return {"level": level, "topic": topic, "value": text, "meaning": meaning}


def findings(backend) -> list[dict]:
    info, out, modeled = backend.info, [], backend.capabilities.models_time
    out.append(_finding("info", "GPU", f"{info.name}, compute {info.compute_capability}, "
                        f"{format_size(info.total_mem)}, PCI {info.pci_bus_id}",
                        "the device every figure below belongs to" + (" (simulated)" if modeled else "")))
    versions = {k: v for k, v in backend.versions().items() if k != "CUPTI"}
    out.append(_finding("info", "driver / CUDA", ", ".join(f"{k} {v}" for k, v in versions.items()),
                        "the driver decides pinning, UVA and copy-engine behaviour"))
    if not modeled:  # a GPU's: CUPTI's records, or the events around each call
        out.append(_finding("ok", "engine times", backend.tracing,
                            "timeline, trace export and profile show when each engine really ran an operation")
                   if backend.tracing else
                   _finding("warn", "engine times", "CUDA events only", backend.tracing_why + "; a copy queued "
                            "behind another is charged for its wait"))
    paths = backend.memory_paths()
    link = paths["pcie"]
    if link and link.get("current_gen"):
        peak = machine.pcie_peak(link["current_gen"], link["current_width"])
        full = machine.pcie_peak(link["max_gen"], link["max_width"]) if link.get("max_gen") else peak
        now = f"Gen{link['current_gen']} x{link['current_width']} (max Gen{link['max_gen']} x{link['max_width']})"
        if peak < full:
            out.append(_finding("warn", "PCIe link", now,
                                f"pinned copies top out near {peak / 1e9:.1f} GB/s instead of {full / 1e9:.1f}; an idle GPU "
                                "may also lower its link speed until work arrives — check again under load"))
        else:
            out.append(_finding("ok", "PCIe link", now, f"pinned copies can reach ~{0.86 * peak / 1e9:.0f} GB/s of "
                                f"{peak / 1e9:.1f} GB/s per direction"))
    else:
        out.append(_finding("info", "PCIe link", "unknown", "sysfs does not describe this device's link"))
    gpu_node, cpu_node = (link or {}).get("numa_node"), machine.cpu_numa_node()
    if gpu_node is not None and gpu_node >= 0 and cpu_node is not None:
        same = gpu_node == cpu_node
        out.append(_finding("ok" if same else "warn", "NUMA", f"GPU on node {gpu_node}, shell on node {cpu_node}",
                            "pinned memory is local to the GPU" if same else
                            "pinned buffers land on the shell's node and cross the socket link: run under "
                            f"`numactl --cpunodebind={gpu_node} --membind={gpu_node}`"))
    else:
        out.append(_finding("info", "NUMA", "one node, or not reported", "no cross-socket copies to worry about"))
    limit = machine.memlock_limit()
    pin, why = backend.pin_limit()
    out.append(_finding("info" if limit is None else "warn", "memlock",
                        "unlimited" if limit is None else format_size(limit),
                        f"cudashell pins at most {format_size(pin)} ({why}); CUDA's own pinning is not bound by "
                        "RLIMIT_MEMLOCK, but other pinning programs (RDMA, mlock) are"))
    mem = machine.meminfo()
    thp = machine.transparent_hugepages()
    out.append(_finding("info", "huge pages", f"{mem.get('HugePages_Total', 0)} reserved, transparent: {thp or 'n/a'}",
                        "pageable copies are staged by the driver either way; huge pages mostly speed up "
                        "cudaHostRegister of big ranges (fewer pages to lock)"))
    iommu = machine.iommu()
    virt = machine.virtualised()
    out.append(_finding("warn" if iommu["groups"] or virt else "ok", "IOMMU / virtualisation",
                        f"{iommu['groups']} IOMMU groups{', ' + iommu['cmdline'] if iommu['cmdline'] else ''}"
                        f"{', under a hypervisor' if virt else ''}",
                        "DMA goes through address translation: small copies pay more latency and pinning costs "
                        "more" if iommu["groups"] or virt else "DMA reaches host memory directly"))
    attrs = [
        ("canMapHostMemory", info.can_map_host_memory, "pinned memory can be mapped into the device's address space"),
        ("unifiedAddressing", info.unified_addressing, "UVA: one address space — every pinned buffer's device "
         "pointer is its host pointer" if info.unified_addressing else "no UVA: only mapped memory is reachable, "
         "through a separate device pointer"),
        ("pageableMemoryAccess", info.pageable_memory_access, "kernels may read plain malloc memory" if
         info.pageable_memory_access else "kernels cannot touch malloc'd memory: register or copy it first"),
        ("concurrentManagedAccess", info.concurrent_managed_access, "host and device may touch managed memory at "
         "once; pages migrate on fault and prefetch works"),
        ("asyncEngineCount", info.async_engine_count, f"{info.async_engine_count} copy engine(s): "
         + ("H2D and D2H copies overlap each other and kernels" if info.async_engine_count >= 2
            else "copies in both directions share one engine")),
    ]
    out += [_finding("ok" if value else "warn", name, value, meaning) for name, value, meaning in attrs]
    return out


@command("doctor", "session", "explain this machine's memory path: link, NUMA, pinning limits, IOMMU, attributes",
         "doctor", "cuDeviceGetAttribute, cuDriverGetVersion; /sys and /proc", exported=False)
def doctor(session, backend, args):
    return Doctor({"findings": findings(backend), "backend": backend.name})


# ------------------------------------------------------------------ the results of these commands
class DoctorDataFindingsItem(TypedDict):
    level: str
    topic: str
    value: str
    meaning: str


class DoctorData(TypedDict):
    findings: list[DoctorDataFindingsItem]
    backend: str


class Doctor(Result, kind="doctor"):
    Data = DoctorData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        mark = {"ok": "✓", "warn": "!", "info": "·"}
        rows = [[mark[f["level"]], f["topic"], f["value"], f["meaning"]] for f in d["findings"]]
        return [fit(rows, ["", "what", "found", "what it means for your copies"], tablefmt, width or 160)]

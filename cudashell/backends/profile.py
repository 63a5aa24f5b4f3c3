"""The figures the simulator models with. Defaults are what we measured on the H100 (PCIe Gen5 x16,
../shared/device/README.md); `--sim-profile` loads a JSON file (as `calibrate` will write) or a
built-in name, e.g. `no-uva` for the pre-UVA rule that only mapped memory is reachable."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from ..errors import ShellError

GB = 1e9


@dataclass(frozen=True)
class Profile:
    name: str = "H100 80GB HBM3 (simulated)"
    compute_capability: str = "9.0"
    pci_bus_id: str = "0000:00:00.0"
    device_memory: int = 80 * (1 << 30)
    host_memory: int = 128 * (1 << 30)
    unified_addressing: bool = True
    can_map_host_memory: bool = True
    pageable_memory_access: bool = False
    managed_memory: bool = True
    concurrent_managed_access: bool = True
    async_engine_count: int = 3
    concurrent_kernels: bool = True
    pcie_gen: int = 5
    pcie_width: int = 16
    hbm_peak: float = 3350 * GB  # bytes/s, read + write
    priority_least: int = 0
    priority_greatest: int = -5
    # bandwidths in bytes/s
    pinned_h2d: float = 54.4 * GB
    pinned_d2h: float = 55.0 * GB
    writecombined_h2d: float = 54.1 * GB
    pageable_h2d: float = 8.5 * GB
    pageable_d2h: float = 9.8 * GB
    d2d: float = 2900 * GB  # counting read + write, as bandwidth tests report it
    h2h: float = 12 * GB
    memset: float = 2000 * GB
    kernel_device_read: float = 1200 * GB  # what a streaming kernel gets from HBM
    kernel_zero_copy_read: float = 49 * GB  # what it gets from pinned host memory over PCIe
    # latencies and costs in seconds
    copy_latency: float = 7.3e-6  # one small synchronous copy
    launch_latency: float = 4.0e-6
    async_call: float = 2.0e-6  # the host cost of queueing async work
    pinned_alloc_per_mib: float = 0.55e-3
    register_per_mib: float = 0.25e-3
    device_alloc: float = 60e-6
    # simulator storage budget: real bytes it may hold in RAM (untouched pages cost nothing)
    storage_budget: int = 4 * (1 << 30)

    @classmethod
    def load(cls, spec: str | None) -> "Profile":
        if not spec or spec == "h100":
            return cls()
        if spec in BUILTIN:
            return BUILTIN[spec]
        path = Path(spec)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ShellError("BAD_PROFILE", f"cannot load simulator profile {spec}: {e}",
                             f"built-in profiles: h100, {', '.join(BUILTIN)}; or a JSON file") from None
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ShellError("BAD_PROFILE", f"{spec}: unknown keys {', '.join(unknown)}")
        return replace(cls(), **data)

    def memory_paths(self) -> dict:
        link = {"current_gen": self.pcie_gen, "current_width": self.pcie_width, "max_gen": self.pcie_gen,
                "max_width": self.pcie_width, "numa_node": 0}
        return {"pcie": link, "hbm_peak": self.hbm_peak}

    def as_dict(self) -> dict:
        return asdict(self)


BUILTIN = {
    "one-copy-engine": Profile(name="H100 with one copy engine (simulated, like GPUs before Kepler)",
                               async_engine_count=1),
    "no-uva": Profile(name="32-bit system without UVA (simulated, for teaching)", unified_addressing=False,
                      managed_memory=False, concurrent_managed_access=False),
}

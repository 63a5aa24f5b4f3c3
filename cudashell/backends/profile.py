"""The figures the simulator models with. The default profile is `calibrate`'s output on the H100 (PCIe
Gen5 x16), shipped in profiles/h100.json; its sync, allocation and free figures (sync_latency, device_alloc,
device_free, register_per_mib, pinned_free_per_mib, unregister_per_mib) come from a later calibrate there, on
2026-11-25; its host data figures (host_*) and the stream-ordered allocator's (pool_*, but pool_first_map: a pool
calibrate makes first mapped in 5.8 ms, where the default pool's first mapping in a process took 11.3) from one on
2026-11-26. The dataclass defaults are rounder figures for a
profile file that leaves some out. `--sim-profile` loads a JSON file (as `calibrate` writes) or a built-in name, e.g.
`no-uva` for the pre-UVA rule that only mapped memory is reachable."""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field, fields, replace
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
    address_bits: int = 48  # the process's pointers: 48 (x86-64's virtual addresses) or 32 (a 32-bit system)
    can_map_host_memory: bool = True
    pageable_memory_access: bool = False
    managed_memory: bool = True
    concurrent_managed_access: bool = True
    async_engine_count: int = 3
    concurrent_kernels: bool = True
    # Hyper-Q (compute capability 3.5 on): each stream has its own hardware queue, so work waiting for its stream does
    # not hold an engine from other streams' ready work; without it one queue ran each engine's work in issue order
    hyper_q: bool = True
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
    # users' kernels: statements the interpreter counts per active warp, and shared-memory wavefronts, per second
    # (132 SMs × 4 schedulers × 1.755 GHz, about four instructions a statement; one wavefront per SM per clock)
    kernel_floor: float = 0.0  # a small streaming kernel beyond launch and bytes, as calibrate measures it (H100: 0)
    kernel_warp_instructions: float = 2.3e11
    kernel_shared_wavefronts: float = 2.3e11
    # constant memory: the further passes a warp request of n distinct addresses takes (n - 1), per second; a
    # broadcast costs only its instruction (nvcc hoists uniform loads: ULDC). Measured on the H100
    # (design/memory-model-facts.md): a 33-tap stencil over 262,144 threads ran 7.9 us reading its coefficients as
    # broadcasts and 75 us with 32 distinct addresses a warp: 31 x 33 x 8192 passes in 67 us. (A loop of 1024
    # dependent constant reads a thread, latency-bound, gave half that rate: 4,836 against 610 us.)
    kernel_constant_replays: float = 1.25e11
    # latencies and costs in seconds
    copy_latency: float = 7.3e-6  # what one small copy occupies its engine
    # a 2-D or 3-D copy: what each row narrower than a 32-byte sector adds to a contiguous copy of its bytes. The
    # H100 (pinned → device, 4096 rows; design/memory-model-facts.md) took 16.9 µs for rows of 4 B against about
    # 6.5 µs for 16 KiB in one piece: 2.5 ns a row; rows of 64, 512 and 4096 B ran within 20 % of the contiguous
    # copy of their bytes (8.8, 40.8, 308 µs), so wider rows cost nothing of their own (64 MiB in rows of 4 KiB to
    # 1 MiB: 54.5–54.7 GB/s, as contiguous; benchmarks/ref_batch.cu). `calibrate` measures it (4 B rows)
    copy_narrow_row: float = 2.5e-9
    # what a blocking call costs the host beyond the work: the round trip from the GPU's end of it to the host
    # going on (cudaStreamSynchronize, a synchronous copy). calibrate measures it as an empty kernel's launch +
    # sync less the launch call and the kernel; files of an older calibrate hold 0 (their method found none). The
    # H100 gave 3.7 µs
    sync_latency: float = 2.0e-6
    engine_switch: float = 0.0  # what a stream adds when its next operation runs on another engine
    launch_latency: float = 4.0e-6
    async_call: float = 2.0e-6  # the host cost of queueing async work
    shell_overhead: float = 0.0  # the shell's own host time per command (parse, record, render), from calibrate
    pinned_alloc_per_mib: float = 0.55e-3
    register_per_mib: float = 0.25e-3
    device_alloc: float = 60e-6
    # freeing, after the device sync cudaFree and cudaHostUnregister make (calibrate measures them as `bench alloc`
    # does, the host clock around the call). The H100 gave a third of pinning's cost to unpin (188 µs/MiB against
    # 564–624) and 613 µs a cudaFree; that is modeled as a fixed cost per call, whatever the size (as cudaFree
    # roughly is); the defaults are rounder
    device_free: float = 40e-6
    pinned_free_per_mib: float = 0.13e-3
    unregister_per_mib: float = 0.06e-3
    # the stream-ordered allocator's host time (H100, CUDA 13: design/memory-model-facts.md): a block freed on the
    # same stream taken again (1.7 µs); memory a pool kept idle at threshold max (64 MiB: 3.3 µs); memory a pool maps,
    # a fixed cost the first time (11.3 ms for a first 64 MiB, 12.5 ms for 1 GiB), a smaller one again after a
    # synchronize gave it back (109 µs for 64 MiB, 315 µs for 256 MiB, 1.28 ms for 1 GiB), and per MiB mapped.
    # `calibrate` measures them on a pool of its own
    pool_reuse: float = 1.7e-6
    pool_warm: float = 3.3e-6
    pool_first_map: float = 11.2e-3
    pool_map_again: float = 31e-6
    pool_map_per_mib: float = 1.22e-6
    # the host's own data work (`fill`, `compare`, `checksum`, `show`: the shell's host loop, backends/hostdata.py), per
    # host-memory kind: bytes/s it reads (as `compare` reads) and writes (as a constant `fill` writes); what
    # `checksum`'s arithmetic and `fill random`'s generator (bytes of 64-bit words: an integer fill's bytes are the
    # words', a float takes one word an element) add beyond those. calibrate measures them on the GPU's host. A
    # write-combined read is uncached on bare-metal x86 (slow); on the H100 host here, a virtual machine, it measured as
    # cached pinned memory did (calibrate, 2026-11-26: reads 16.1 GB/s both, pageable 15.5; h100.json holds that run's
    # figures). The defaults, and h200.json's until calibrate runs on an H200, are this development machine's figures
    # for that loop (AMD EPYC, 2026-11-26, benchmarks/host_data.py: compare 6-9 GB/s of compared bytes, checksum 1.4
    # times NumPy's sum of the same bytes, which ran 3.5 GB/s unloaded, fill random 352 M uint64/s), no GPU there, so
    # write-combined is given pinned's
    host_read_pageable: float = 12 * GB
    host_read_pinned: float = 12 * GB
    host_read_writecombined: float = 12 * GB
    host_write_pageable: float = 10 * GB
    host_write_pinned: float = 10 * GB
    host_write_writecombined: float = 10 * GB
    host_checksum: float = 8 * GB
    host_random: float = 2.4 * GB
    staging_rate: float = 10 * GB  # the host's memcpy of pageable bytes into the driver's staging buffer
    staging_latency: float = 15e-6
    # several GPUs: how many, and how each pair is joined (all pairs alike); rates per direction, cudaMemcpyPeer
    gpus: int = 1
    peer_access: bool = True
    peer_link: str = "NVLink"
    peer_rate: float = 390 * GB  # peer access enabled: the copy engines over the link
    peer_staged_rate: float = 37.7 * GB  # peer access off: the driver stages through host memory
    peer_latency: float = 10e-6
    # measured copy times by size, from `calibrate`: {"pinned h2d": [[bytes, seconds], ...], ...};
    # where a curve is missing, latency + size / bandwidth
    copy_curves: dict = field(default_factory=dict)
    # simulator storage budget: real bytes it may hold in RAM (untouched pages cost nothing)
    storage_budget: int = 4 * (1 << 30)

    @classmethod
    def load(cls, spec: str | None) -> "Profile":
        if not spec or spec == "h100":
            return calibrated()
        if spec in BUILTIN:
            return replace(calibrated(), **BUILTIN[spec])
        path = Path(spec)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ShellError("BAD_PROFILE", f"cannot load simulator profile {spec}: {e}",
                             f"built-in profiles: h100, {', '.join(BUILTIN)}; or a JSON file") from None
        if not isinstance(data, dict):
            kind = {list: "list", str: "string", bool: "true or false", type(None): "null"}.get(type(data), "number")
            raise ShellError("BAD_PROFILE", f"{spec}: a profile is a JSON object of settings, not a {kind}",
                             f"`calibrate out FILE` writes one; built-in profiles: h100, {', '.join(BUILTIN)}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ShellError("BAD_PROFILE", f"{spec}: unknown keys {', '.join(unknown)}")
        base = cls()
        for key, value in data.items():
            wrong = _wrong_value(key, value, getattr(base, key))
            if wrong:
                raise ShellError("BAD_PROFILE", f"{spec}: {key} = {json.dumps(value)} — it must be {wrong}",
                                 "`calibrate out FILE` writes a profile with every value in place")
        return replace(base, **data)

    def copy_seconds(self, path: str, nbytes: int) -> float:
        """How long a copy of `nbytes` takes on a path ("pinned h2d", "pageable d2h", "d2d", "h2h", …):
        piecewise linear between calibrated points, toward the small-copy latency below the first, at the
        last segment's rate above the last."""
        points = sorted(self.copy_curves.get(path) or ())
        if len(points) < 2:
            return self.copy_latency + nbytes / self._rate(path)
        if nbytes <= points[0][0]:
            n0, t0 = points[0]
            return self.copy_latency + (t0 - self.copy_latency) * nbytes / n0
        i = next((i for i, (n, _) in enumerate(points) if nbytes <= n), len(points) - 1)
        (n1, t1), (n2, t2) = points[max(i, 1) - 1], points[max(i, 1)]
        return t1 + (t2 - t1) * (nbytes - n1) / (n2 - n1)

    def host_seconds(self, op: str, parts: list[tuple[str, int]], draws: int = 0) -> float:
        """How long the host's data work takes: `op` (read, compare, checksum, fill, fill random) over `parts`, (host
        memory kind, bytes) each — pageable, pinned, writecombined, or device (read through a pageable copy first).
        `fill random` makes `draws` 64-bit words besides: one each 8 bytes of an integer dtype, one a float."""
        seconds = 0.0
        for kind, nbytes in parts:
            if op.startswith("fill"):
                seconds += nbytes / getattr(self, f"host_write_{kind}")
            elif kind == "device":
                seconds += self.copy_seconds("pageable d2h", nbytes) + nbytes / self.host_read_pageable
            else:
                seconds += nbytes / getattr(self, f"host_read_{kind}")
        if op == "checksum":
            seconds += sum(n for _, n in parts) / self.host_checksum
        elif op == "fill random":
            seconds += 8 * draws / self.host_random
        return seconds

    def _rate(self, path: str) -> float:
        return {"pinned h2d": self.pinned_h2d, "pinned d2h": self.pinned_d2h, "pageable h2d": self.pageable_h2d,
                "pageable d2h": self.pageable_d2h, "writecombined h2d": self.writecombined_h2d,
                "writecombined d2h": self.pinned_d2h, "d2d": self.d2d / 2, "h2h": self.h2h}[path]

    def memory_paths(self) -> dict:
        link = {"current_gen": self.pcie_gen, "current_width": self.pcie_width, "max_gen": self.pcie_gen,
                "max_width": self.pcie_width, "numa_node": 0}
        return {"pcie": link, "hbm_peak": self.hbm_peak}

    def as_dict(self) -> dict:
        return asdict(self)


# figures with a default above 0 that a measurement may still find to be 0 (an older calibrate's sync_latency)
MAY_BE_ZERO = frozenset({"sync_latency"})


def _wrong_value(key: str, value, default) -> str | None:
    """What a profile value must be, if it is not (a string where a bandwidth goes would fail only at the first copy,
    a negative time would run the clock backwards). None when it fits: the default's type, and its sign."""
    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v not in (float("inf"), -float("inf"))

    if key == "address_bits":
        return None if value in (32, 48) and not isinstance(value, bool) else "32 or 48"
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "true or false"
    if isinstance(default, str):
        return None if isinstance(value, str) else "a string"
    if isinstance(default, int):
        if not isinstance(value, int) or isinstance(value, bool):
            return "a whole number"
        return None if value >= 0 or key.startswith("priority_") else "0 or more"
    if isinstance(default, float):
        if not number(value):
            return "a number"
        if default > 0 and value <= 0 and key not in MAY_BE_ZERO:
            return "a number above 0 (a rate or a time)"
        return None if value >= 0 else "0 or more"
    if isinstance(default, dict):  # copy_curves: {"pinned h2d": [[bytes, seconds], …]}
        ok = isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(pts, list) and all(
                isinstance(pt, list) and len(pt) == 2 and all(number(x) and x >= 0 for x in pt) for pt in pts)
            for k, pts in value.items())
        return None if ok else 'a map of copy path to [[bytes, seconds], …] with numbers 0 or more'
    return None


CALIBRATED = Path(__file__).parent.parent / "profiles" / "h100.json"


@functools.cache
def calibrated() -> Profile:
    """The default: what `calibrate` measured on the H100 (benchmarks/sim_fidelity.py checks it there)."""
    return replace(Profile(), **json.loads(CALIBRATED.read_text()))


BUILTIN = {  # changes to the calibrated H100
    "one-copy-engine": {"name": "H100 with one copy engine (simulated: asyncEngineCount 1, no Hyper-Q)",
                        "async_engine_count": 1, "hyper_q": False},
    "two-h200": {"name": "H200 (simulated; two joined by NVLink, figures measured on the H200 pair)", "gpus": 2,
                 "device_memory": 141 * (1 << 30), "pinned_h2d": 55.3 * GB, "pinned_d2h": 55.3 * GB,
                 "peer_link": "NVLink (NV18)", "peer_rate": 390 * GB, "peer_staged_rate": 37.7 * GB},
    "two-gpus-no-uva": {"name": "two GPUs without UVA (simulated, for teaching portable pinned memory)", "gpus": 2,
                        "unified_addressing": False, "managed_memory": False, "concurrent_managed_access": False},
    "no-uva": {"name": "32-bit system without UVA (simulated, for teaching)", "unified_addressing": False,
               "address_bits": 32,
               "managed_memory": False, "concurrent_managed_access": False},
}

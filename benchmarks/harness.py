"""What the device benchmarks share: running a shell command and taking its JSON result, and binding to the
CPUs next to the GPU.

Benchmarks run on the CPUs next to the GPU: pinned memory is placed on the NUMA node of the thread that
touches it first, and a buffer on the far node copies at a fraction of the link's rate (on the H100 machine a
run where it landed there read 39 GB/s instead of 54). The shell's worker and the C reference inherit the
binding, so both sides of every ratio sit on the same node."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path


def run(shell, out: io.StringIO, line: str) -> dict:
    """Execute a line in a JSON-mode shell writing to `out`; the last command's result (it must succeed)."""
    start = out.tell()
    shell.execute(line)
    out.seek(start)
    obj = json.loads(out.read().splitlines()[-1])
    assert obj["ok"], obj
    return obj["result"]


def parse_cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def bind() -> str:
    """Bind this process (and what it starts) to the CPUs local to GPU 0; says what it did."""
    try:
        import pycuda.driver as cuda

        cuda.init()
        bus = cuda.Device(0).pci_bus_id().lower()
        text = (Path("/sys/bus/pci/devices") / bus / "local_cpulist").read_text()
        cpus = parse_cpulist(text) & os.sched_getaffinity(0)
    except Exception as e:  # no sysfs entry, no PyCUDA: run where the scheduler puts us
        return f"not bound to the GPU's CPUs ({type(e).__name__}: {e})"
    if not cpus:
        return "not bound: none of the GPU's local CPUs is available"
    os.sched_setaffinity(0, cpus)
    return f"bound to the {len(cpus)} CPUs local to GPU 0 ({text.strip()})"

"""What only a real GPU can show: real addresses and flag bits, page migration, context teardown, leaks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import Cush, gpu_missing, make_backend

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(gpu_missing()), reason=f"no GPU: {gpu_missing()}")]


@pytest.fixture
def gpu():
    c = Cush(make_backend("cuda"))
    yield c
    c.shell.close()


def test_the_driver_reports_devicemap_on_everything_pinned_under_uva(gpu):
    assert gpu.backend.info.unified_addressing and gpu.backend.info.can_map_host_memory
    gpu.ok("alloc pinned 1MB wc; alloc pageable 1MB as r1; register r1 portable; alloc pageable 1MB as ro")
    gpu.ok("register ro readonly")
    flags = {n: gpu.ok(f"info {n}")["driver"]["host_flags"] for n in ("p0", "r1", "ro")}
    assert flags == {"p0": 6, "r1": 3, "ro": 2}
    for n in ("p0", "r1", "ro"):
        row = gpu.buffer(n)
        assert row["host_ptr"] == row["device_ptr"]


def test_real_pointers_are_not_the_simulators(gpu):
    from cudashell.backends.addresses import BASES

    row = gpu.ok("alloc device 1MB")["buffer"]
    assert int(row["device_ptr"], 16) % 256 == 0
    assert int(row["device_ptr"], 16) != BASES["device"][1]


def test_pageable_pointer_is_unknown_to_the_driver_until_registered(gpu):
    gpu.ok("alloc pageable 64KB")
    assert gpu.ok("info h0")["driver"]["memory_type"] == "CUDA_ERROR_INVALID_VALUE"
    gpu.ok("register h0")
    assert gpu.ok("info h0")["driver"]["memory_type"] == "host"


def test_free_all_returns_device_memory_and_unregisters(gpu):
    backend = gpu.backend
    gpu.ok("alloc device 4KB as warm; memset warm 0; free warm")  # the first work starts CUPTI: its buffers stay
    free_before, _ = backend.mem_info()
    gpu.ok("alloc device 256MB; alloc managed 64MB; alloc pinned 64MB mapped; alloc pageable 64MB; register h0")
    gpu.ok("alloc pinned 4KB as a; alloc pinned 4KB as b; alloc device 4KB as c; launch sum a b c; sync")
    assert backend.mem_info()[0] < free_before - (250 << 20)
    gpu.ok("unregister h0")
    assert gpu.ok("info h0")["driver"]["host_flags"] == "CUDA_ERROR_INVALID_VALUE"  # no range remains registered
    gpu.ok("register h0; free all")
    assert abs(backend.mem_info()[0] - free_before) <= (4 << 20)


def test_teardown_with_buffers_still_allocated_ends_the_worker_cleanly():
    c = Cush(make_backend("cuda"))
    c.ok("alloc device 64MB; alloc pinned 8MB; alloc pageable 1MB; register h0; stream create")
    proc = c.backend.proc
    left = c.shell.close()
    assert len(left) == 3
    assert proc.returncode == 0  # it popped its context and left on its own: nothing was killed


def test_exit_after_a_kernel_fault_is_clean():
    script = ("alloc pageable 4KB as ro; register ro readonly; alloc device 4KB as a; launch sum a a ro; sync;"
              " alloc device 4KB")
    r = subprocess.run([sys.executable, "-m", "cudashell", "--backend", "cuda", "--keep-going", "-c", script],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in r.stderr
    assert "context stack was not empty" not in r.stderr and "Traceback" not in r.stderr


def test_cli_exit_releases_everything():
    r = subprocess.run([sys.executable, "-m", "cudashell", "--backend", "cuda", "-c",
                        "alloc pinned 1MB mapped; alloc device 1MB; memcpy p0 d0; device"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "measured" in r.stdout and "context stack" not in r.stderr


def test_a_malloc_the_host_refuses_is_the_hosts_failure(gpu):
    """As on the simulator: pageable memory that does not fit is HOST_OUT_OF_MEMORY, not a driver error or a bug."""
    error = gpu.fails("alloc pageable 2^50")  # a PiB: more than RAM and swap, which mmap refuses
    assert error["code"] == "HOST_OUT_OF_MEMORY" and error["message"].startswith("malloc: ")
    gpu.ok("alloc pageable 1MB")  # the session goes on

"""What only the simulator has: profiles (no UVA, and the 32-bit one whose addresses and host memory run out as the
host's would), lazy storage (a copy reserves only the RAM it makes), modeled timings, determinism."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from dataclasses import replace

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.errors import ShellError
from tests.conftest import Cush

MIB = 1 << 20


@contextmanager
def session(profile: str | None = None):
    """A simulator shell on a built-in profile (the default one unless named), closed when the block ends."""
    c = Cush(SimBackend(Profile.load(profile)))
    try:
        yield c
    finally:
        c.shell.close()


def test_without_uva_only_mapped_memory_is_reachable_through_another_pointer():
    with session("no-uva") as c:
        plain = c.ok("alloc pinned 4KB")["buffer"]
        mapped = c.ok("alloc pinned 4KB mapped")["buffer"]
        assert plain["device_ptr"] is None
        assert mapped["device_ptr"] and mapped["device_ptr"] != mapped["host_ptr"]
        assert c.ok("info p0")["driver"]["host_flags"] == 0
        assert c.ok("info p1")["driver"]["host_flags"] == 2
        c.ok("alloc device 4KB")
        err = c.fails("launch sum p0 p1 d0")
        assert err["code"] == "NOT_DEVICE_ACCESSIBLE" and "mapped" in err["hint"]
        assert c.ok("launch sum p1 p1 d0")["n"] == 1024


def test_huge_untouched_buffers_cost_no_ram_and_the_limits_hold():
    with session() as c:
        backend = c.backend
        c.ok("alloc device 64GiB; alloc pageable 100GiB")
        c.ok("memcpy h2d h0 d0 1GiB")  # zero pages copied stay unmaterialised
        assert backend.budget.used == 0
        assert c.fails("alloc device 17GiB")["code"] == "CUDA_ERROR_OUT_OF_MEMORY"
        err = c.fails("fill h0 7")  # 100 GiB of real bytes: refused, never exhausting the host
        assert err["code"] == "SIM_BUDGET" and "budget" in err["message"]  # the simulator's limit, named apart


def test_pointers_are_aligned_and_deterministic():
    runs = []
    for _ in range(2):
        with session() as c:
            c.ok("alloc pageable 100; alloc pinned 3000; alloc device 10; alloc device 10; alloc managed 1MB")
            runs.append([(b["host_ptr"], b["device_ptr"]) for b in c.ok("ls")["buffers"]])
    assert runs[0] == runs[1]
    d0, d1 = int(runs[0][2][1], 16), int(runs[0][3][1], 16)
    assert d0 % 512 == 0 and d1 % 512 == 0 and d1 > d0
    assert int(runs[0][1][0], 16) % 4096 == 0


def test_modeled_timings_follow_the_profile():
    with session() as c:
        c.ok("alloc pinned 256MB; alloc pageable 256MB; alloc device 256MB")
        pinned = c.ok("memcpy p0 d0")
        pageable = c.ok("memcpy h0 d0")
        assert pinned["timing"] == "modeled"
        assert 50 < pinned["gbps"] < 56 and 7 < pageable["gbps"] < 10
        small = c.ok("memcpy p0 d0 4")  # one synchronous 4-byte copy: 7.3 µs in C on the H100, 6.6–10.8 via PyCUDA
        assert 5e-6 < small["host_seconds"] < 15e-6 and small["seconds"] < small["host_seconds"]
        alloc = c.ok("alloc pinned 64MB")  # cudaHostAlloc of 64 MiB: 35 ms in C
        assert 0.02 < alloc["seconds"] < 0.05


def test_legacy_default_stream_waits_for_blocking_streams_not_nonblocking_ones():
    with session() as c:
        c.ok("alloc pinned 512MB; alloc device 512MB; alloc device 4KB as small; alloc pinned 4KB as ps")
        c.ok("stream create; stream create nonblocking")
        c.ok("memcpy p0 d0 async stream 1")
        waited = c.ok("memcpy small ps")["host_seconds"]  # D2H: its copy engine is free
        assert waited > 5e-3  # the sync copy on the default stream waited for stream 1's 512 MB
        c.ok("memcpy p0 d0 async stream 2")
        assert c.ok("memcpy small ps")["host_seconds"] < 1e-4  # a nonblocking stream is not waited for
        assert c.ok("memcpy ps small")["host_seconds"] > 5e-3  # but an H2D copy queues behind it on the engine


def test_profile_from_json_file_and_bad_profiles(tmp_path):
    p = tmp_path / "lab.json"
    p.write_text(json.dumps({"name": "Lab GPU", "pinned_h2d": 25e9}))
    assert Profile.load(str(p)).pinned_h2d == 25e9
    p.write_text(json.dumps({"bogus": 1}))
    with pytest.raises(ShellError) as e:
        Profile.load(str(p))
    assert e.value.code == "BAD_PROFILE"


# ------------------------------------------------------------------ the 32-bit profile: pointers, addresses, host memory
def test_the_32_bit_profile_has_32_bit_pointers_and_runs_out_of_addresses():
    c = Cush(SimBackend(Profile.load("no-uva")))
    ptrs = []
    for line in ["alloc pageable 1MB", "alloc pinned 1MB mapped", "alloc pinned 64MB", "alloc device 4KB",
                 "alloc device 64MB"]:
        b = c.ok(line)["buffer"]
        ptrs += [p for p in (b["host_ptr"], b["device_ptr"]) if p]
    assert ptrs and all(re.fullmatch(r"0x[0-9a-f]{8}", p) for p in ptrs), ptrs
    assert c.fails("alloc device 3GB")["code"] == "CUDA_ERROR_OUT_OF_MEMORY"
    assert c.fails("alloc pinned 1GB mapped")["code"] == "CUDA_ERROR_OUT_OF_MEMORY"
    assert len(c.ok("ls")["buffers"]) == 5  # the refused ones left nothing behind
    assert re.fullmatch(r"0x[0-9a-f]{12}", Cush(SimBackend()).ok("alloc device 1MB")["buffer"]["device_ptr"])


def test_a_pageable_allocation_past_the_32_bit_range_is_the_hosts_failure():
    c = Cush(SimBackend(Profile.load("no-uva")))
    try:
        c.ok("alloc pageable 512MB")  # of the 624 MiB of addresses malloc has here
        error = c.fails("alloc pageable 256MB")
        assert error["code"] == "HOST_OUT_OF_MEMORY"
        assert error["message"].startswith("malloc: 256 MiB does not fit in the pageable addresses left in this "
                                           "32-bit address space")
        assert len(c.ok("ls")["buffers"]) == 1
    finally:
        c.shell.close()


def test_pageable_memory_past_the_hosts_memory_is_the_hosts_failure():
    c = Cush(SimBackend(replace(Profile.load(None), host_memory=1 << 30)))
    try:
        error = c.fails("alloc pageable 2GB")
        assert error["code"] == "HOST_OUT_OF_MEMORY" and "host memory" in error["message"]
        c.ok("set pinlimit 4GB")
        assert c.fails("alloc pinned 2GB")["code"] == "CUDA_ERROR_OUT_OF_MEMORY"  # cudaHostAlloc's: the driver's
    finally:
        c.shell.close()


# ------------------------------------------------------------------ a copy reserves only the RAM it makes
def on_budget(mib: int) -> Cush:
    return Cush(SimBackend(replace(Profile.load(None), storage_budget=mib * MIB)))


def test_a_chunk_aligned_copy_of_whole_chunks_needs_no_new_ram():
    c = on_budget(8)
    try:
        c.ok("alloc pinned 6MB as p; alloc device 6MB as d; alloc device 6MB as e; fill p 1")
        c.ok("memcpy p d")
        c.ok("memcpy p e async; sync")
        sums = c.ok("checksum p d e")["checksums"]
        assert sums["p"] == sums["d"] == sums["e"] != 0
        assert c.backend.budget.used == 6 * MIB
    finally:
        c.shell.close()


def test_a_copy_reserves_the_partial_chunks_it_makes_and_refuses_what_does_not_fit():
    c = on_budget(8)
    try:
        c.ok("alloc pinned 6MB as p; alloc device 6MB as d; fill p 1")
        c.ok("memcpy p[512KB:+1MB] d[512KB:]")  # two parts of chunks, each copied into a chunk of d's own
        assert c.backend.budget.used == 8 * MIB
        c.ok("alloc device 6MB as e")
        error = c.fails("memcpy p[512KB:+1MB] e[512KB:]")
        assert error["code"] == "SIM_BUDGET"
        assert c.ok("checksum e")["checksums"]["e"] == 0 and c.backend.budget.used == 8 * MIB
    finally:
        c.shell.close()


def test_an_unaligned_copy_reserves_only_where_its_source_has_bytes():
    c = on_budget(2)
    try:
        c.ok("alloc pinned 6MB as p; alloc device 6MB as d; memset p[0:+1MB] 1")
        c.ok("memcpy p[1KB:+5MB] d")  # only d's first chunk gets bytes
        assert c.backend.budget.used == 2 * MIB
        assert c.ok("compare p[1KB:+5MB] d[0:+5MB]")["equal"]
    finally:
        c.shell.close()

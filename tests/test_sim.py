"""What only the simulator has: profiles (no UVA), lazy storage, modeled timings, determinism."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.errors import ShellError
from tests.conftest import Cush


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

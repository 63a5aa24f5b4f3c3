"""What the H100 showed differently in scenarios the simulator already ran (issue 35, item 6): a first prefetch of
host-written managed memory to the device holds the host, and pageable memory is page-aligned, no more."""

from __future__ import annotations

import pytest

from cudashell.model import syncrules as R
from tests.conftest import Cush, make_backend, text_run

MIB = 1 << 20


def host_ptr(cush, name: str) -> int:
    return int(cush.buffer(name)["host_ptr"], 16)


# ------------------------------------------------------------------ prefetch
def test_a_first_prefetch_of_host_written_pages_to_the_device_holds_the_host_later_ones_do_not(sim):
    sim.ok("alloc managed 4MB as m; fill m 1")
    first = sim.ok("prefetch m device")
    assert first["blocking"] is True and first["host_seconds"] >= first["seconds"]
    assert first["sync_rule"] == R.prefetch_rule("device", True).why
    assert sim.ok("prefetch m device")["blocking"] is True  # already there, not yet back: the H100 still held it
    assert sim.ok("prefetch m host")["blocking"] is False
    again = sim.ok("prefetch m device")
    assert again["blocking"] is False and again["host_seconds"] < 10e-6


def test_a_first_prefetch_to_the_device_blocks_and_one_after_a_round_trip_does_not_on_both_backends(cush):
    cush.ok("alloc managed 4MB as m; fill m 1")
    assert cush.ok("prefetch m device")["blocking"] is True
    cush.ok("prefetch m host; sync")
    assert cush.ok("prefetch m device")["blocking"] is False
    cush.ok("sync")
    assert cush.ok("show m count 1")["values"] == [1]


def test_a_prefetch_of_pages_the_host_never_touched_returns_at_once(sim):
    sim.ok("alloc managed 4MB as u")
    assert sim.ok("prefetch u device")["blocking"] is False


def test_the_prefetch_line_says_whether_the_host_blocked():
    text = text_run(["alloc managed 4MB as m", "fill m 1", "prefetch m device"])
    assert "prefetch m → device" in text and "host blocked" in text and "(modeled)" in text


@pytest.mark.gpu
def test_prefetch_host_time_on_the_gpu_first_and_later(capsys):
    """Prints what the H100 does, for the coordinator's record: host time of a first and a second prefetch of 4 MiB
    to the device, one to the host and one back (measured 2026-11-26, C probe: 0.43, 0.19, 0.006, 0.004 ms)."""
    c = Cush(make_backend("cuda"))
    try:
        c.ok("alloc managed 4MB as m; fill m 1; sync")
        rows = [(what, c.ok(f"prefetch m {where}")) for what, where in
                (("first to device", "device"), ("second to device", "device"), ("to host", "host"),
                 ("back to device", "device"))]
        c.ok("sync")
        with capsys.disabled():
            for what, r in rows:
                print(f"\nprefetch {what}: host {r['host_seconds'] * 1e3:.3f} ms, GPU "
                      f"{(r['seconds'] or 0) * 1e3:.3f} ms, blocking {r['blocking']} ({r['blocking_basis']})")
        first, _, _, back = (r for _, r in rows)
        assert first["host_seconds"] > 10 * back["host_seconds"]  # the first one waited for the pages to move
    finally:
        c.shell.close()


# ------------------------------------------------------------------ pageable alignment
def test_pageable_memory_is_page_aligned_but_64kib_alignment_is_not_given(sim):
    sim.ok("alloc pageable 100 as a; alloc pageable 64KB as b; alloc pageable 4MB as c")
    ptrs = [host_ptr(sim, n) for n in "abc"]
    assert all(p % 4096 == 0 for p in ptrs)
    assert all(p % (64 << 10) for p in ptrs) and all(p % (2 * MIB) for p in ptrs)


def test_pageable_memory_is_page_aligned_on_both_backends(cush):
    cush.ok("alloc pageable 100 as a; alloc pageable 1MB as b; alloc pageable 64MB as c")
    assert all(host_ptr(cush, n) % 4096 == 0 for n in "abc")  # mmap's pages (backends/gpu/memory.py)

"""The contract: scenarios that run unchanged on the simulator and on the GPU and assert the same semantic
facts about asynchrony — bytes as the GPU has left them when the host looks, who blocks the host, busy and
idle streams, callback order, implicit synchronisation, address reuse and alignment, the driver's errors and
faults. Where timing matters, a long `spin` kernel holds the queue so the answer is robust on a real GPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cudashell.model import syncrules as R
from tests.conftest import first

GATE = "launch spin 30000"  # 30 ms: far longer than anything the shell does between two commands
MIB = 1 << 20


def ptr(cush, name, which="device_ptr"):
    return int(cush.buffer(name)[which], 16)


# ------------------------------------------------------------------ data lands when the work completes
def test_an_async_copy_reads_its_pinned_source_when_it_runs_not_when_issued(cush):
    cush.ok("alloc pinned 4KB as p; alloc device 4KB as d; alloc pinned 4KB as back; fill p 1")
    cush.ok(f"{GATE}; memcpy p d async; fill p 2; sync; memcpy d back")
    assert first(cush, "back") == 2


def test_show_before_sync_prints_the_old_bytes_and_says_why(cush):
    cush.ok("alloc pinned 4KB as p; alloc device 4KB as d; fill p 3; memset d 7; sync")
    cush.ok(f"{GATE}; memcpy d p async")
    early = cush.ok("show p count 1")
    assert early["values"] == [3] and early["pending"] == {"p": ["0"]}
    cush.ok("sync")
    late = cush.ok("show p count 1")
    assert late["values"] == [7] and late["pending"] == {}


@pytest.mark.parametrize("size", ["4KB", "64KB", "1MB"])
def test_a_small_pageable_async_copy_is_staged_at_issue(cush, size):
    cush.ok(f"alloc pageable {size} as h; alloc device {size} as d; alloc pinned {size} as back; fill h 1")
    res = cush.ok(f"{GATE}; memcpy h d async")
    assert res["blocking"] is False
    cush.ok("fill h 2; sync; memcpy d back")
    assert first(cush, "back") == 1  # the driver copied the source into staging memory before returning


def test_a_kernel_changes_memory_when_it_completes(cush):
    cush.ok("alloc pinned 4KB as z; fill z 0 dtype float32")
    cush.ok(f"{GATE}; launch increment z")
    assert first(cush, "z", "float32") == 0.0
    assert cush.buffer("z")["state"] == "pending on stream 0"
    cush.ok("sync")
    assert first(cush, "z", "float32") == 1.0 and cush.buffer("z")["state"] == "ready"


def test_an_async_memset_lands_after_the_queue(cush):
    cush.ok("alloc pinned 4KB as p; fill p 5; stream create")
    cush.ok("launch spin 30000 stream 1; memset p 9 async stream 1")
    assert first(cush, "p") == 5
    cush.ok("sync stream 1")
    assert first(cush, "p") == 9


def test_pending_marks_clear_after_event_sync(cush):
    cush.ok("alloc pinned 4KB as p; alloc device 4KB as d; stream create")
    cush.ok("launch spin 20000 stream 1; memcpy p d async stream 1; event record done stream 1")
    assert cush.buffer("d")["state"] == "pending on stream 1"
    cush.ok("event sync done")
    assert cush.buffer("d")["state"] == "ready" and cush.buffer("p")["state"] == "ready"


# ------------------------------------------------------------------ busy and idle
def test_a_sync_device_to_device_copy_does_not_wait(cush):
    cush.ok("alloc device 4KB as a; alloc device 4KB as b")
    res = cush.ok(f"{GATE}; memcpy a b")
    assert res["blocking"] is False
    assert cush.ok("stream query 0")["idle"] is False


def test_a_sync_memset_of_device_memory_does_not_wait(cush):
    cush.ok("alloc device 1MB as a")
    res = cush.ok(f"{GATE}; memset a 0")
    assert res["blocking"] is False
    assert cush.ok("stream query 0")["idle"] is False


def test_kernels_on_two_streams_run_at_the_same_time(cush):
    cush.ok("stream create; stream create; launch spin 1 stream 1; sync")
    cush.ok("launch spin 40000 stream 1; launch spin 40000 stream 2")
    waited = cush.ok("sync")["host_seconds"]
    assert 0.025 < waited < 0.06  # one spin's time, not two


@pytest.mark.parametrize("work", ["memset d 0 1MB async stream 2", "memcpy d e 1MB async stream 2",
                                  "launch increment d stream 2"])
def test_work_on_another_stream_finishes_while_a_kernel_spins(cush, work):
    cush.ok("alloc device 1MB as d; alloc device 1MB as e; stream create; stream create")
    cush.ok(f"launch spin 60000 stream 1; {work}; sleep 10")
    assert cush.ok("stream query 2")["idle"] is True
    assert cush.ok("stream query 1")["idle"] is False


def test_the_legacy_default_stream_waits_for_blocking_streams(cush):
    cush.ok("stream create; launch spin 30000 stream 1")
    assert cush.ok("stream query 0")["idle"] is False
    assert cush.ok("sync stream 0")["host_seconds"] > 0.02


def test_a_nonblocking_stream_is_exempt(cush):
    cush.ok("stream create nonblocking; launch spin 30000 stream 1; sleep 1")
    assert cush.ok("stream query 0")["idle"] is True
    assert cush.ok("sync stream 0")["host_seconds"] < 0.01
    assert cush.ok("stream query 1")["idle"] is False


def test_streams_lists_busy_streams(cush):
    cush.ok("stream create; launch spin 30000 stream 1")
    rows = {r["name"]: r["idle"] for r in cush.ok("streams")["streams"]}
    assert rows == {"0": False, "1": False}
    cush.ok("sync")
    assert all(r["idle"] for r in cush.ok("streams")["streams"])


# ------------------------------------------------------------------ callbacks
def test_callbacks_fire_in_completion_order_not_issue_order(cush):
    cush.ok("stream create as a; stream create as b")
    cush.ok("launch spin 80000 stream a; callback a behind-a; launch spin 30000 stream b; callback b behind-b")
    objs = cush.run("sync")
    assert [o["result"]["text"] for o in objs if o["cmd"] == "(callback)"] == ["behind-b", "behind-a"]


def test_a_callback_behind_a_kernel_waits_for_it(cush):
    cush.ok("stream create; launch spin 30000 stream 1")
    assert [o for o in cush.run("callback 1 later") if o["cmd"] == "(callback)"] == []
    assert [o["result"]["text"] for o in cush.run("sync") if o["cmd"] == "(callback)"] == ["later"]


# ------------------------------------------------------------------ who blocks the host: the one table
SETUP = ("alloc pageable 8MB as h; alloc pinned 8MB as p; alloc device 8MB as d; alloc device 8MB as e; "
         "alloc managed 8MB as m; alloc pageable 8MB as h2; stream create")
CASES = [  # (command, src class, dst class, async, bytes) — memset: (command, target, None, async, bytes)
    ("memcpy p d 64KB", "pinned", "device", False, 64 << 10),
    ("memcpy p d 64KB async stream 1", "pinned", "device", True, 64 << 10),
    ("memcpy d p 1MB async stream 1", "device", "pinned", True, MIB),
    ("memcpy d h 64KB async stream 1", "device", "pageable", True, 64 << 10),
    ("memcpy h d 64KB async stream 1", "pageable", "device", True, 64 << 10),
    ("memcpy h d 8MB async stream 1", "pageable", "device", True, 8 * MIB),
    ("memcpy h d 64KB", "pageable", "device", False, 64 << 10),
    ("memcpy d e 1MB", "device", "device", False, MIB),
    ("memcpy d m 1MB", "device", "managed", False, MIB),
    ("memcpy p h 1MB async stream 1", "pinned", "pageable", True, MIB),
    ("memcpy h h2 64KB", "pageable", "pageable", False, 64 << 10),
    ("memcpy p d 0", "pinned", "device", False, 0),
    ("memset d 1 1MB", "device", None, False, MIB),
    ("memset p 1 1MB", "pinned", None, False, MIB),
    ("memset m 1 1MB", "managed", None, False, MIB),
    ("memset p 1 1MB async stream 1", "pinned", None, True, MIB),
]


@pytest.mark.parametrize("line,src,dst,async_,nbytes", CASES, ids=[c[0] for c in CASES])
def test_who_blocks_follows_the_drivers_documented_rules(cush, line, src, dst, async_, nbytes):
    rule = R.memcpy_rule(src, dst, async_, nbytes) if dst else R.memset_rule(src, async_, nbytes)
    cush.ok(SETUP)
    cush.ok("launch spin 30000 stream 1" if async_ else GATE)
    res = cush.ok(line)
    assert res["sync_rule"] == rule.why
    assert res["blocking"] is rule.blocks, (line, res)
    assert (res["host_seconds"] > 0.02) is rule.blocks
    if cush.backend.name == "cuda" and nbytes:
        assert res["blocking_basis"] == "observed"


@pytest.mark.parametrize("line", ["prefetch m device stream 1", "callback 1 hello", "event record e stream 1",
                                  "launch increment d stream 1"])
def test_queued_work_never_holds_the_host(cush, line):
    cush.ok(SETUP)
    cush.ok("launch spin 30000 stream 1")
    t0 = cush.backend.clock()
    cush.ok(line)
    assert cush.backend.clock() - t0 < 0.01
    assert cush.ok("stream query 1")["idle"] is False


# ------------------------------------------------------------------ implicit synchronisation
@pytest.mark.parametrize("kind", ["device", "pinned", "managed"])
def test_free_waits_for_the_device(cush, kind):
    cush.ok(f"stream create; alloc {kind} 1MB as x; launch spin 30000 stream 1")
    res = cush.ok("free x")
    assert res["host_seconds"] > 0.02 and res["sync_rule"] == R.FREE_SYNCS.why
    assert cush.ok("stream query 1")["idle"] is True


def test_free_of_pageable_memory_does_not_wait(cush):
    cush.ok(f"alloc pageable 1MB as x; {GATE}")
    assert cush.ok("free x")["host_seconds"] < 0.01


def test_unregister_waits_for_the_device(cush):
    cush.ok(f"alloc pageable 64KB as x; register x; {GATE}")
    t0 = cush.backend.clock()
    cush.ok("unregister x")
    assert cush.backend.clock() - t0 > 0.02


def test_destroying_a_busy_stream_lets_its_work_finish(cush):
    cush.ok("stream create; launch spin 30000 stream 1; callback 1 still-fires; event record e stream 1")
    assert cush.ok("stream destroy 1")["busy"] is True
    objs = cush.run("sync")
    assert [o["result"]["text"] for o in objs if o["cmd"] == "(callback)"] == ["still-fires"]
    assert cush.ok("event query e")["done"] is True


@pytest.mark.parametrize("flag", ["", "nonblocking"])
def test_a_device_sync_waits_for_work_on_a_destroyed_stream(cush, flag):
    cush.ok(f"stream create {flag}; launch spin 30000 stream 1; stream destroy 1")
    assert cush.ok("sync")["host_seconds"] > 0.02


# ------------------------------------------------------------------ allocation realism
@pytest.mark.parametrize("keep,stale", [(True, 171), (False, 0)])
def test_a_freed_device_block_comes_back_with_its_old_bytes_while_its_pool_lives(cush, keep, stale):
    cush.ok("alloc pinned 4KB as r" + ("; alloc device 4KB as keep" if keep else ""))
    cush.ok("alloc device 4KB as a; memset a 171; sync")
    before = ptr(cush, "a")
    cush.ok("free a; alloc device 4KB as b; memcpy b r")
    assert ptr(cush, "b") == before
    assert first(cush, "r") == stale  # cudaMalloc does not clear memory; an emptied pool goes back cleared


@pytest.mark.parametrize("kind", ["pinned", "managed", "device"])
def test_small_allocations_are_carved_at_512_bytes(cush, kind):
    cush.ok(f"alloc {kind} 100 as a; alloc {kind} 100 as b")
    assert ptr(cush, "b") - ptr(cush, "a") == 512


def test_large_device_allocations_are_2mib_aligned(cush):
    cush.ok("alloc device 3MB as a; alloc device 3MB as b")
    assert ptr(cush, "a") % (2 * MIB) == 0 and ptr(cush, "b") % (2 * MIB) == 0
    assert ptr(cush, "b") - ptr(cush, "a") in (4 * MIB, -4 * MIB)


@pytest.mark.parametrize("kind,size", [("pinned", "64KB"), ("device", "64MB"), ("managed", "1MB")])
def test_the_next_allocation_of_the_same_size_reuses_the_freed_address(cush, kind, size):
    cush.ok(f"alloc {kind} {size} as a")
    before = ptr(cush, "a")
    cush.ok(f"free a; alloc {kind} {size} as b")
    assert ptr(cush, "b") == before


# ------------------------------------------------------------------ the stream-ordered allocator
def test_a_stream_ordered_allocation_is_used_and_freed_in_its_streams_order(cush):
    cush.ok("stream create; alloc pinned 64KB as back")
    made = cush.ok("alloc device 64KB async stream 1 as x")
    assert made["call"] == "cudaMallocAsync" and made["stream"] == "1" and made["sync_rule"] == R.QUEUED.why
    assert made["buffer"]["device_ptr"] is not None  # the driver hands the address back at once
    cush.ok("memset x 7 async stream 1; memcpy x back async stream 1; sync")
    assert first(cush, "back") == 7
    freed = cush.ok("free x async stream 1")
    assert freed["stream"] == "1" and freed["sync_rule"] is None and freed["freed"][0]["name"] == "x"
    assert [b["name"] for b in cush.ok("ls")["buffers"]] == ["back"]  # gone from the session when issued
    assert cush.fails("show x")["code"] == "NO_SUCH_BUFFER"


def test_a_stream_ordered_allocation_is_pending_until_its_stream_reaches_it(cush):
    # the pool warmed first, and not synchronized after (at threshold 0 a sync gives its memory back): the first
    # cudaMallocAsync maps memory, host time that is no wait for the stream, but would blur the figure below
    cush.ok("stream create; alloc device 4KB async stream 1 as w; free w async stream 1; launch spin 30000 stream 1")
    t0 = cush.backend.clock()
    made = cush.ok("alloc device 4KB async stream 1 as x")
    assert made["blocking"] is False and cush.backend.clock() - t0 < 0.01  # cudaMallocAsync does not wait
    assert cush.buffer("x")["state"] == "pending on stream 1"
    t0 = cush.backend.clock()
    assert cush.ok("free x async stream 1")["sync_rule"] is None  # nor does cudaFreeAsync
    assert cush.backend.clock() - t0 < 0.01 and cush.ok("stream query 1")["idle"] is False
    cush.ok("sync stream 1")


def test_a_block_freed_in_stream_order_comes_back_on_the_same_stream(cush):
    cush.ok("stream create; alloc device 1MB async stream 1 as a")
    before = ptr(cush, "a")
    cush.ok("free a async stream 1; alloc device 1MB async stream 1 as b")
    assert ptr(cush, "b") == before  # the H100 gave the same address back, in 1.7 µs


def test_memory_freed_in_stream_order_is_reused_on_that_stream_before_the_stream_reaches_the_free(cush):
    # two 70 GiB allocations do not fit in an 80 GB H100 at once: there the second fits only in the first's memory
    made = cush.ok("alloc device 70GB async as a")
    before = ptr(cush, "a")
    cush.ok(f"{GATE}; free a async")
    again = cush.ok("alloc device 70GB async as b")
    assert ptr(cush, "b") == before
    assert again["host_seconds"] < 1e-3 < made["host_seconds"]  # the pool's own memory: nothing mapped again
    if cush.backend.timing_label == "modeled":
        assert again["host_seconds"] == pytest.approx(reuse(cush))
    cush.ok("sync")


def reuse(sim) -> float:
    """The host time of a cudaMallocAsync the pool serves from memory it holds: the whole call (the pool's figure,
    at least what any async call costs)."""
    return max(sim.backend.profile.pool_reuse, sim.backend.profile.async_call)


def test_memory_freed_in_stream_order_waits_for_its_stream_before_another_stream_reuses_it(sim):
    # internal dependencies off: else the driver makes stream s wait for the free, and takes the block (below)
    sim.ok("pool set default reuse internal off; pool set default threshold max")
    sim.ok("stream create nonblocking as s; alloc device 70GB async as a")
    before = ptr(sim, "a")
    sim.ok(f"{GATE}; free a async")
    refused = sim.fails("alloc device 70GB async stream s as b")
    assert refused["code"] == "CUDA_ERROR_OUT_OF_MEMORY"  # stream s is not ordered after the free
    sim.ok("sync")  # the free seen done: the pool's idle memory (kept: threshold max), for any stream
    assert sim.ok("alloc device 70GB async stream s as b")["host_seconds"] == pytest.approx(warm(sim))
    assert ptr(sim, "b") == before


def test_with_internal_dependencies_another_stream_takes_a_pending_free_by_waiting_for_it(sim):
    sim.ok("stream create nonblocking as s; alloc device 70GB async as a")
    before = ptr(sim, "a")
    sim.ok(f"{GATE}; free a async")
    sim.ok("alloc device 70GB async stream s as b")  # no room to map: the driver orders s after the free
    assert ptr(sim, "b") == before and sim.ok("stream query s")["idle"] is False  # s waits for the 30 ms kernel
    sim.ok("sync")


def warm(sim) -> float:
    """The host time of a cudaMallocAsync served from a pool's idle memory (64 MiB, threshold max: 3.3 µs)."""
    return max(sim.backend.profile.pool_warm, sim.backend.profile.async_call)


def test_a_block_reused_on_its_stream_costs_the_pools_figure_and_keeps_its_addresses_until_freed(sim):
    sim.ok("alloc device 8MB async as a")
    sim.ok(f"{GATE}; free a async")
    assert sim.ok("alloc device 3MB async as b")["host_seconds"] == pytest.approx(reuse(sim))
    assert sim.ok("alloc device 5MB async as c")["host_seconds"] == pytest.approx(warm(sim))  # b's rest is idle
    sim.ok("sync; free b; free c")
    sim.ok("alloc device 8MB as d")  # cudaMalloc: the lowest free addresses again, b's whole block among them
    assert ptr(sim, "d") == 0x7F8F_0000_0000


def test_a_sync_free_of_a_stream_ordered_allocation_is_cudafree(cush):
    cush.ok("alloc device 64KB async as x; sync")
    assert cush.ok("free x")["sync_rule"] == R.FREE_SYNCS.why


def test_stream_ordered_allocation_is_refused_before_the_driver_is_asked(sim, monkeypatch):
    error = sim.fails("alloc pinned 1MB async")
    assert error["code"] == "USAGE" and "'async' does not apply to pinned memory" in error["message"]
    assert sim.fails("alloc device 1MB stream 1")["code"] == "USAGE"  # `stream` needs `async`
    sim.ok("alloc device 1MB as x; alloc pinned 1MB as p")
    monkeypatch.setattr(sim.backend, "free_async", lambda *a: pytest.fail("the backend was asked"))
    monkeypatch.setattr(sim.backend, "alloc_async", lambda *a: pytest.fail("the backend was asked"))
    assert sim.fails("free x async stream 9")["code"] == "NO_SUCH_STREAM"
    assert sim.fails("alloc device 1MB async stream 9")["code"] == "NO_SUCH_STREAM"
    assert sim.fails("free x p async")["code"] == "KIND_MISMATCH"  # cudaFreeAsync frees device memory
    assert [b["name"] for b in sim.ok("ls")["buffers"]] == ["x", "p"]


# ------------------------------------------------------------------ the driver's errors and flags
def test_the_gpu_may_not_write_a_readonly_registration(cush):
    cush.ok("alloc pageable 64KB as r; register r readonly; alloc device 64KB as d; fill r 4")
    assert cush.fails("memcpy d r")["code"] == "CUDA_ERROR_INVALID_VALUE"
    assert cush.fails("memcpy d r async")["code"] == "CUDA_ERROR_INVALID_VALUE"
    assert cush.fails("memset r 0")["code"] == "CUDA_ERROR_INVALID_VALUE"
    assert first(cush, "r") == 4
    cush.ok("memcpy r d")  # reading it is fine


@pytest.mark.parametrize("line", ["launch increment d shared 49153", "launch increment d shared 300KB",
                                  "launch spin 1 grid 2^31", "launch increment d block 1025",
                                  "launch increment d block 32,33", "launch increment d block 1,1,65",
                                  "launch increment d block 1,1025", "launch increment d block 0",
                                  "launch increment d grid 0", "launch increment d grid 4,0",
                                  "launch increment d grid 1,65536", "launch spin 1 grid 1,1,65536"])
def test_launch_limits_are_the_drivers(cush, line):
    cush.ok("alloc pinned 4KB as d; fill d 0 dtype float32")
    assert cush.fails(line)["code"] == "CUDA_ERROR_INVALID_VALUE"
    assert cush.buffer("d")["state"] == "ready" and first(cush, "d", "float32") == 0.0  # nothing ran
    cush.ok("launch increment d shared 48KB; launch increment d block 16,4,16; launch increment d block 1,1,64 n 1; "
            "launch spin 0 grid 1,65535 block 1; launch spin 0 grid 1,1,65535 block 1; sync")  # the limits themselves
    assert first(cush, "d", "float32") == 3.0


def test_a_2d_or_3d_launch_of_a_built_in_computes_one_element_a_thread(cush):
    cush.ok("alloc pinned 64KB as p; fill p 0 dtype float32")
    res = cush.ok("launch fill p 3 grid 4,4 block 16,16")
    assert (res["grid"], res["block"], res["computed"], res["n"]) == ([4, 4, 1], [16, 16, 1], 4096, 16384)
    cush.ok("launch increment p grid 2,2,2 block 8,8,2; sync")  # 1024 threads
    at = {k: cush.ok(f"show p dtype float32 offset {4 * k} count 1")["values"][0] for k in (0, 1023, 1024, 4095, 4096)}
    assert at == {0: 4.0, 1023: 4.0, 1024: 3.0, 4095: 3.0, 4096: 0.0}


@pytest.mark.parametrize("kind", ["device", "managed", "pinned"])
def test_unregister_of_memory_that_was_never_registered(cush, kind):
    cush.ok(f"alloc {kind} 4KB as x")
    assert cush.fails("unregister x")["code"] == "CUDA_ERROR_INVALID_VALUE"


def test_unregister_twice_is_not_registered(cush):
    cush.ok("alloc pageable 4KB as x; register x; unregister x")
    assert cush.fails("unregister x")["code"] == "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"


@pytest.mark.parametrize("line,bits", [("alloc managed 4KB as x", 2), ("alloc pinned 4KB portable as x", 3),
                                       ("alloc pinned 4KB portable mapped wc as x", 7),
                                       ("alloc pinned 4KB; alloc pinned 4KB portable as x", 2),  # the pool's flags
                                       ("alloc pinned 4KB wc; alloc pinned 4KB portable wc as x", 6),
                                       ("alloc pinned 4KB; free p0; alloc pinned 4KB portable as x", 3),
                                       ("alloc pinned 2MB; alloc pinned 2MB portable as x", 3),
                                       ("alloc pageable 4KB as x; register x portable", 3),
                                       ("alloc pageable 4KB as x; register x readonly", 2)])
def test_host_flags_are_what_the_driver_answers(cush, line, bits):
    cush.ok(line)
    assert cush.ok("info x")["driver"]["host_flags"] == bits


# ------------------------------------------------------------------ faults (own process: a fault poisons it)
FAULT = ("alloc pageable 64KB as r; register r readonly; fill r 5; alloc pinned 4KB as p; fill p 6\n"
         "launch spin 20000; launch increment r\n"
         "sync\n"
         "show r count 1 dtype uint8; fill p 8; show p count 1\n"
         "alloc device 4KB")


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_fault_surfaces_at_the_next_sync_and_host_memory_stays_usable(backend):
    if backend == "cuda":
        from tests.conftest import gpu_missing
        if gpu_missing():
            pytest.skip(gpu_missing())
    r = subprocess.run([sys.executable, "-m", "cudashell", "--backend", backend, "--json", "--keep-going",
                        "-c", FAULT], capture_output=True, text=True, timeout=120)
    objs = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    by = {o["cmd"]: o for o in objs}
    assert by["launch increment r"]["ok"] is True  # the launch itself succeeds
    assert by["sync"]["error"]["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert by["show r count 1 dtype uint8"]["result"]["values"] == [5]  # the faulted kernel wrote nothing
    assert by["show p count 1"]["result"]["values"] == [8]
    assert by["alloc device 4KB"]["error"]["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "Traceback" not in r.stderr


def test_a_copy_on_a_nonblocking_stream_does_not_queue_behind_one_waiting_for_stream_0(cush):
    """Hyper-Q: the blocking stream's copy waits for the kernel on stream 0 without holding the copy engine, so the
    non-blocking stream's copy runs now and syncing it leaves stream 0 busy (seen on the H100)."""
    cush.ok("alloc pinned 4KB as p; alloc device 4KB as d; alloc device 4KB as e")
    cush.ok("stream create as b; stream create nonblocking as nb")
    cush.ok("launch spin 80000; memcpy p d async stream b; memcpy p e async stream nb")
    assert cush.ok("sync stream nb")["host_seconds"] < 0.04
    assert cush.ok("stream query 0")["idle"] is False and cush.ok("stream query b")["idle"] is False


def test_after_a_fault_the_contexts_queries_answer_its_sticky_error(cush):
    cush.ok("alloc pageable 64KB as r; register r readonly; alloc pinned 4KB as p; stream create as s")
    cush.ok("launch spin 20000; launch increment r")
    assert cush.fails("sync")["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    for line in ("stream query 0", "streams", "stream destroy s"):
        assert cush.fails(line)["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS", line
    info = cush.ok("info p")["driver"]
    assert info["host_flags"] == info["host_device_ptr"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert cush.buffer("r")["state"].startswith("pending"), "the faulted kernel never completed: its buffer stays pending"


@pytest.mark.parametrize("line, code", [
    ("memcpy h2h m h", None), ("memcpy h2d m p", None), ("memcpy d2h m p", None), ("memcpy d2d p m", None),
    ("memcpy h2d m h", "CUDA_ERROR_INVALID_VALUE"), ("memcpy d2h h m", "CUDA_ERROR_INVALID_VALUE"),
    ("memcpy h2d d p", "KIND_MISMATCH")])
def test_an_explicit_direction_with_managed_memory_follows_cudamemcpys_rule(cush, line, code):
    """cudaMemcpy with an explicit kind, probed on the H100: a side named device must be reachable by the GPU (pageable
    is refused), a side named host takes anything; without managed memory the shell's own check teaches the
    direction. An accepted copy is reported as the direction asked for, and its bytes arrive."""
    cush.ok("alloc managed 4KB as m; alloc pageable 4KB as h; alloc pinned 4KB as p; alloc device 4KB as d")
    cush.ok("fill m 3; fill h 4; fill p 5")
    if code:
        assert cush.fails(line)["code"] == code
        return
    result = cush.ok(line)
    src, dst = line.split()[2:]
    assert result["direction"] == line.split()[1]
    assert cush.ok(f"show {dst} count 1")["values"] == cush.ok(f"show {src} count 1")["values"]


def test_a_long_synchronous_copy_is_seen_to_block_and_a_callback_never_blocks(cush):
    """On the H100 a 64 MiB pinned copy held the host its 1.2 ms: long enough to observe, not left to the rule; and
    cuLaunchHostFunc only queues the function."""
    cush.ok("alloc pinned 64MB as p; alloc device 64MB as d")
    copy = cush.ok("memcpy p d")
    assert copy["blocking"] is True
    assert copy["blocking_basis"] == ("observed" if cush.backend.name == "cuda" else "modeled")
    assert cush.ok("callback 0 hello")["blocking"] is False

"""memcpy batch (cudaMemcpyBatchAsync): one call, many copies, in stream order — the bytes, who blocks by the source
-access order (as the H100 ran it: CUDA 13, 4 KiB copies behind a 30 ms kernel), the driver's refusals, the checks made
before any driver call, the trace, explain/export, and bench latency's loop against one batch."""

from __future__ import annotations

import pytest

from cudashell.model import syncrules as R
from tests.conftest import first

GATE = "launch spin 30000"  # 30 ms: the stream is busy while the shell issues the batch and changes the source


def setup(cush, src_kind: str = "pinned") -> None:
    cush.ok(f"alloc {src_kind} 8KB as s; alloc device 8KB as d; alloc pinned 8KB as back; stream create; fill s 1")


# ------------------------------------------------------------------ bytes and who blocks, on both backends
def test_a_batch_copies_every_part_in_one_call(cush):
    cush.ok("alloc pinned 8KB as p; alloc device 8KB as d; alloc pinned 8KB as back; stream create")
    cush.ok("fill p 5; memset p[4KB:] 6")
    res = cush.ok("memcpy batch <<< memcpy p[0:4KB] d[4KB:]; memcpy p[4KB:] d[0:4KB] >>> stream 1")
    assert res["call"] == "cudaMemcpyBatchAsync" and res["count"] == 2 and res["bytes"] == 8192
    assert [c["direction"] for c in res["copies"]] == ["h2d", "h2d"]
    cush.ok("sync; memcpy d back")
    assert first(cush, "back") == 6 and cush.ok("show back[4KB:] count 1")["values"] == [5]


@pytest.mark.parametrize("src,order,blocks,reads", [
    ("pinned", "stream", False, 2), ("pinned", "during-call", True, 1), ("pinned", "any", False, 2),
    ("pageable", "stream", True, 1), ("pageable", "during-call", False, 1), ("pageable", "any", False, 1)])
def test_the_source_access_order_decides_when_the_source_is_read_and_who_waits(cush, src, order, blocks, reads):
    """The H100: pinned sources in stream order (or any) are read when the copy runs; DURING_API_CALL waits for the
    stream and copies before returning; a pageable source is staged during the call — in stream order after waiting
    for the stream, otherwise at once."""
    setup(cush, src)
    res = cush.ok(f"{GATE} stream 1; memcpy batch <<< memcpy s[0:4KB] d[0:4KB] >>> stream 1 order {order}")
    assert res["blocking"] is blocks, res
    cush.ok("fill s 2; sync; memcpy d back")
    assert first(cush, "back") == reads


def test_a_batch_into_pageable_memory_does_not_block(cush):
    cush.ok("alloc device 4KB as d; alloc pageable 4KB as h; stream create; memset d 7; sync")
    res = cush.ok(f"{GATE} stream 1; memcpy batch <<< memcpy d h >>> stream 1")
    assert res["blocking"] is False  # cudaMemcpyAsync into pageable memory would have waited 30 ms
    cush.ok("sync")
    assert first(cush, "h") == 7


# ------------------------------------------------------------------ the driver's refusals, on both backends
def test_the_legacy_default_stream_is_refused_with_the_drivers_error(cush):
    setup(cush)
    err = cush.fails("memcpy batch <<< memcpy s d >>>")
    assert err["code"] == "CUDA_ERROR_INVALID_VALUE"  # H100, CUDA 13: cudaErrorInvalidValue on stream 0


def test_a_copy_of_zero_bytes_is_refused_with_the_drivers_error(cush):
    setup(cush)
    assert cush.fails("memcpy batch <<< memcpy s d 0; memcpy s d 16 >>> stream 1")["code"] == "CUDA_ERROR_INVALID_VALUE"


# ------------------------------------------------------------------ the shell's checks, before any driver call
@pytest.mark.parametrize("block,code", [
    ("memcpy s d 1MB", "OUT_OF_BOUNDS"), ("memcpy s[4KB:] d 8KB", "OUT_OF_BOUNDS"),
    ("memcpy d2h s d", "KIND_MISMATCH"), ("memcpy s nosuch", "NO_SUCH_BUFFER"),
    ("memset d 0", "USAGE"), ("memcpy s d async", "USAGE"), ("memcpy s d stream 1", "USAGE")])
def test_each_copy_is_checked_before_the_driver_sees_any(sim, block, code):
    setup(sim)
    err = sim.fails(f"memcpy batch <<< memcpy s[0:4KB] d[0:4KB]; {block} >>> stream 1")
    assert err["code"] == code
    assert sim.ok("timeline")["ops"] == 0  # the good copy was not queued either


def test_a_batch_of_nothing_is_refused(sim):
    setup(sim)
    assert sim.fails("memcpy batch <<< >>> stream 1")["code"] == "USAGE"


def test_an_error_in_the_block_points_into_it(sim):
    setup(sim)
    line = "memcpy batch <<< memcpy s nosuch >>> stream 1"
    err = sim.fails(line)
    assert err["col"] == line.index("nosuch") + 1


# ------------------------------------------------------------------ the simulator's model
def test_the_simulator_runs_the_copies_as_one_piece_of_work_after_one_call(sim):
    sim.ok("alloc pinned 256KB as p; alloc device 256KB as d; stream create")
    block = "; ".join(f"memcpy p[{k * 4}KB:+4KB] d[{k * 4}KB:+4KB]" for k in range(64))
    res = sim.ok(f"memcpy batch <<< {block} >>> stream 1")
    from cudashell.backends.sim.work import BATCH_HOST_PER_COPY

    assert res["host_seconds"] >= 64 * BATCH_HOST_PER_COPY and res["sync_rule"] == R.batch_copy_rule(
        "pinned", "device", "stream", 4096).why
    sim.ok("sync")
    spans = sim.ok("timeline")["spans"]
    assert [(s["op"], s["stream"], s["engine"]) for s in spans] == [("memcpy batch", "1", "copy H2D")]
    gpu = sim.ok("profile")["gpu"]
    assert [(r["name"], r["calls"]) for r in gpu] == [("[CUDA memcpy batch]", 1)]


def test_bench_latency_compares_a_loop_of_copies_with_one_batch(sim):
    rows = {r["what"]: r for r in sim.ok("bench latency rounds 100")["rows"]}
    loop = rows["64 × 4 KiB h2d pinned: cudaMemcpyAsync loop + sync"]
    batch = rows["64 × 4 KiB h2d pinned: one cudaMemcpyBatchAsync + sync"]
    assert batch["median_us"] < 0.5 * loop["median_us"]  # the H100 (C, benchmarks/ref_batch.cu): 73 µs against 171
    assert batch["median_us"] == pytest.approx(73, rel=0.15)


def test_explain_writes_the_batch_call(sim):
    sim.ok("alloc pinned 8KB as p; alloc device 8KB as d; stream create; explain on")
    out = sim.run("memcpy batch <<< memcpy p[0:4KB] d; memcpy d[4KB:] p[4KB:] >>> stream 1 order any")
    c = "\n".join(o["explain"]["c"] if isinstance(o.get("explain"), dict) else str(o.get("explain", ""))
                  for o in out)
    assert "cudaMemcpyBatchAsync" in c and "cudaMemcpySrcAccessOrderAny" in c and "(void *)(b_p + 4096)" in c


@pytest.mark.gpu
def test_bench_latency_on_the_gpu_has_both_rows(capsys):
    """For the coordinator's record: the loop and the batch, measured."""
    from tests.conftest import Cush, make_backend

    c = Cush(make_backend("cuda"))
    try:
        rows = {r["what"]: r for r in c.ok("bench latency rounds 200")["rows"]}
        with capsys.disabled():
            for what, r in rows.items():
                if what.startswith("64 ×"):
                    print(f"\n{what}: {r['median_us']:.1f} µs")
        loop, batch = (next(r["median_us"] for w, r in rows.items() if w.endswith(end))
                       for end in ("cudaMemcpyAsync loop + sync", "one cudaMemcpyBatchAsync + sync"))
        assert batch < loop  # the H100 in C: 73 µs against 171
    finally:
        c.shell.close()


def test_a_batch_nests_in_a_repeat_and_each_round_copies(sim):
    """The block of `repeat` holds the batch's own block: <<< … >>> pairs are counted, not the first >>> taken."""
    sim.ok("alloc pinned 8KB as p; alloc device 8KB as d; alloc pinned 8KB as b; fill p iota dtype uint16; "
           "stream create as s")
    res = sim.ok("repeat 3 <<< memcpy batch <<< memcpy p[0:4KB] d[4KB:]; memcpy p[4KB:] d[0:4KB] >>> stream s >>>")
    assert res["times"] == 3 and res["plan"]["per_round"]["rounds"] == 2  # rounds 2–3 by the backend, no shell
    sim.ok("sync; memcpy d b")
    assert [sim.ok(f"show b[{at}:+2] dtype uint16")["values"] for at in (0, "4KB")] == [[2048], [0]]  # swapped halves
    assert sim.fails("repeat 2 <<< memcpy batch <<< memcpy p d >>> stream s")["code"] == "USAGE"  # one >>> short

"""Streams, events, callbacks, kernels and the trace, on both backends (issue 4's scenarios); on the simulator, what
`timeline last N` draws and what a launch's byte count counts."""

from __future__ import annotations

import json

import pytest

from cudashell.backends.sim import SimBackend

from .conftest import Cush, text_run


def test_a_kernel_after_wait_sees_the_data_copied_on_another_stream(cush):
    cush.ok("alloc pinned 4MB as src; alloc device 4MB as d; alloc pinned 4MB as back")
    cush.ok("fill src 1 dtype float32; stream create; stream create")
    cush.ok("launch spin 20000 stream 2")  # delay the copy, so only the wait orders it before the kernel
    cush.ok("memcpy src d async stream 2; event record copied stream 2; wait 1 copied")
    cush.ok("launch increment d stream 1; sync; memcpy d back")
    assert set(cush.ok("show back dtype float32 count 1048576")["values"]) == {2.0}


def test_event_times_are_monotonic(cush):
    cush.ok("event record a; launch spin 1000; event record b; launch spin 2000; event record c; sync")
    ab, ac = cush.ok("elapsed a b")["ms"], cush.ok("elapsed a c")["ms"]
    assert 0.9 <= ab < ac and ac >= 2.9
    assert cush.ok("elapsed a a")["ms"] == 0
    assert cush.ok("event query c")["done"] is True
    assert cush.fails("elapsed a nope")["code"] == "NO_SUCH_EVENT"


def test_callbacks_fire_once_in_order(cush):
    cush.ok("stream create; launch spin 5000 stream 1")
    cush.ok("callback 1 first; callback 1 second")
    objs = cush.run("sync")
    fired = [o["result"]["text"] for o in objs if o["cmd"] == "(callback)"]
    later = [o for o in cush.run("ls") if o["cmd"] == "(callback)"]
    assert fired == ["first", "second"] and later == []


def test_priorities_come_from_the_device(cush):
    high = cush.ok("stream create priority high")
    low = cush.ok("stream create priority low")
    least, greatest = high["priority_range"]
    assert high["priority"] == greatest < least == low["priority"]


@pytest.mark.parametrize("line,expect", [
    ("launch fill a 2.5", [2.5] * 4),
    ("launch fill a 2.0; launch scale a 3", [6.0] * 4),
    ("launch fill a 1.0; launch fill b 4; launch saxpy 0.5 a b", [4.5] * 4),
    ("launch fill a 7; launch increment a", [8.0] * 4),
])
def test_builtin_kernels_compute_the_same_on_both_backends(cush, line, expect):
    cush.ok("alloc device 16 as a; alloc managed 16 as b; alloc pinned 16 as r")
    cush.ok(line)
    out = "b" if "saxpy" in line else "a"
    cush.ok(f"sync; memcpy {out} r")
    assert cush.ok("show r dtype float32 count 4")["values"] == expect


def test_launch_checks_arguments_before_the_gpu(cush):
    cush.ok("alloc device 16 as a; alloc pageable 16 as h")
    assert cush.fails("launch saxpy a a")["code"] == "USAGE"
    assert cush.fails("launch saxpy x a a")["code"] == "USAGE"
    assert cush.fails("launch increment h")["code"] == "NOT_DEVICE_ACCESSIBLE"
    assert cush.fails("launch nosuch a")["code"] == "NO_SUCH_KERNEL"
    assert cush.fails("launch increment a n 5")["code"] == "OUT_OF_BOUNDS"


def test_trace_export_is_valid_chrome_trace(cush, tmp_path):
    cush.ok("alloc pinned 8MB; alloc device 8MB; stream create; stream create")
    cush.ok("memcpy p0 d0 async stream 1; launch increment d0 stream 1; memcpy d0 p0 async stream 2; sync")
    path = tmp_path / "t.json"
    cush.ok(f"trace export {path}")
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "queue"]
    assert len(spans) == 6 and all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    assert {e["tid"] for e in spans if e["pid"] == 1} == {"stream 1", "stream 2"}
    assert {"copy H2D", "copy D2H", "compute"} <= {e["tid"] for e in spans if e["pid"] == 2}
    waits = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "queue"]
    assert waits and all(e["tid"].endswith("(waiting)") and e["dur"] > 0 for e in waits)  # the kernel waited


def test_timeline_shows_copies_overlapping_on_two_engines(cush):
    cush.ok("alloc pinned 64MB as a; alloc pinned 64MB as b; alloc device 64MB as da; alloc device 64MB as db")
    cush.ok("stream create; stream create")
    # both copies held behind one gate, so the time between two commands (a pipe round trip on a GPU) cannot
    # stagger them
    cush.ok("launch spin 2000 stream 1; event record g stream 1; wait 2 g")
    cush.ok("memcpy a da async stream 1; memcpy db b async stream 2; sync")
    rows = {r["name"]: r["cells"] for r in cush.ok("timeline width 80")["rows"]}
    assert set(rows) >= {"stream 1", "stream 2", "copy H2D", "copy D2H"}
    h2d = {i for i in range(80) if rows["copy H2D"][i] == "H"}
    d2h = {i for i in range(80) if rows["copy D2H"][i] == "D"}
    # the two copies ran at the same time, on two engines (one after the other, they would share no column; on
    # the H100 the H2D copy sometimes stretches by a fifth while both directions run)
    assert len(h2d & d2h) > 0.6 * min(len(h2d), len(d2h))


def test_profile_counts_activities_and_calls(cush):
    cush.ok("alloc pinned 1MB; alloc device 1MB")
    for _ in range(3):
        cush.ok("memcpy p0 d0")
    cush.ok("launch increment d0; sync")
    prof = cush.ok("profile")
    gpu = {r["name"]: r for r in prof["gpu"]}
    api = {r["name"]: r for r in prof["api"]}
    assert gpu["[CUDA memcpy HtoD]"]["calls"] == 3 and gpu["increment(A)"]["calls"] == 1
    assert api["cudaMemcpy"]["calls"] == 3 and api["cudaHostAlloc"]["calls"] == 1
    assert sum(r["percent"] for r in prof["gpu"]) == pytest.approx(100, abs=0.01)  # each to 4 significant digits


def test_stream_ordered_allocations_show_on_the_timeline_in_the_trace_and_in_profile(cush, tmp_path):
    cush.ok("stream create; alloc device 1MB async stream 1 as x; memset x 1 async stream 1; launch spin 3000 stream 1")
    cush.ok("free x async stream 1; sync")
    timeline = cush.ok("timeline")
    ops = {s["op"]: s for s in timeline["spans"]}
    assert ops["alloc async"]["stream"] == ops["free async"]["stream"] == "1"
    assert ops["alloc async"]["engine"] == ops["free async"]["engine"] == "host"
    host = next(r["cells"] for r in timeline["rows"] if r["name"] == "host")
    assert host.strip()[0] == "A" and host.strip()[-1] == "F"  # 3 ms apart: columns of their own
    path = tmp_path / "t.json"
    cush.ok(f"trace export {path}")
    spans = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X" and e["cat"] != "queue"]
    assert {(e["name"], e["tid"]) for e in spans if e["name"].endswith(" async")} == {
        ("alloc async", "stream 1"), ("alloc async", "host"), ("free async", "stream 1"), ("free async", "host")}
    gpu = {r["name"]: r for r in cush.ok("profile")["gpu"]}
    assert gpu["[cudaMallocAsync]"]["calls"] == 1 and gpu["[cudaFreeAsync]"]["calls"] == 1


def test_user_kernels_run_on_both_backends(cush):
    line = ("kernel define twice <<< __global__ void twice(float *a, int n) "
            "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= 2.0f; } >>>")
    cush.ok(line)
    cush.ok("alloc device 4KB as a; alloc pinned 4KB as r; launch fill a 1.5; launch twice a 1024i; sync")
    cush.ok("memcpy a r")
    assert set(cush.ok("show r dtype float32 count 1024")["values"]) == {3.0}


# ------------------------------------------------------------------ timeline last N, a launch's bytes (simulator)
WORK =  ["alloc pinned 64MB as h", "alloc device 64MB as d", "memcpy h d async", "launch increment d", "sync"]


def test_timeline_last_0_draws_nothing_and_last_1_the_last_operation():
    c = Cush(SimBackend())
    for line in WORK:
        c.ok(line)
    none = c.ok("timeline last 0")
    assert none["ops"] == 0 and none["rows"] == [] and none["last"] == 0
    one = c.ok("timeline last 1")
    assert one["ops"] == 1 and [s["op"] for s in one["spans"]] == ["kernel increment"]
    assert c.ok("timeline last 99")["ops"] == 2
    assert c.fails("timeline last -1")["code"] == "USAGE"
    assert "`last 0` asks for no operations" in text_run(WORK + ["timeline last 0"])


def test_a_launch_says_what_its_byte_count_counts():
    text = text_run(["alloc device 32MB as d", "launch increment d", "launch spin 10", "launch touch d", "sync"], 0)
    assert "64 MiB moved (32 MiB read + 32 MiB written)" in text
    assert "0 B moved: spin touches no memory" in text
    assert "32 MiB moved, all read" in text
    assert "finished: kernel spin on stream 0 in" in text and "finished: kernel increment on stream 0, 64 MiB moved" in text
    c = Cush(SimBackend())
    c.ok("alloc device 32MB as d")
    got = c.ok("launch increment d")
    assert (got["bytes"], got["bytes_read"], got["bytes_written"], got["counted"]) == (64 << 20, 32 << 20, 32 << 20, True)

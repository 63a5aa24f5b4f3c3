"""Measuring the GPU and not the shell: `hold`/`release`, `repeat` run on the GPU side, benches issued there,
engine times (CUPTI on a GPU, the model on the simulator) in the timeline and in nvprof's `profile` layout.
The scenarios run on both backends and assert the same facts."""

from __future__ import annotations

import re

import pytest

from cudashell.backends.base import round_stats
from cudashell.output.render import nvprof_time
from tests.conftest import first

MIB = 1 << 20


@pytest.fixture
def cush(cush):
    cush.ok("set gpu-timeout 60")  # a hold that is never released must fail the test, not hang it
    return cush


# ------------------------------------------------------------------ hold / release
def test_held_work_waits_for_release_and_then_runs(cush):
    cush.ok("alloc pinned 4KB as z; fill z 0 dtype float32; stream create")
    cush.ok("hold")
    cush.ok("launch increment z; launch increment z stream 1")
    cush.ok("sleep 30")
    assert first(cush, "z", "float32") == 0.0  # 30 ms later, nothing has run: the streams are held
    assert cush.ok("stream query 1")["idle"] is False
    released = cush.ok("release")
    assert released["queued"] == 2
    cush.ok("sync")
    assert first(cush, "z", "float32") == 2.0


def test_calls_that_would_wait_for_held_work_are_refused_and_change_nothing(cush):
    cush.ok("alloc pinned 1MB as p; alloc device 1MB as d; alloc pageable 1MB as h; fill p 5")
    cush.ok("hold; memcpy p d async")
    for line in ("sync", "sync stream 0", "memcpy p d", "memcpy d h async", "free d", "free all", "checksum d"):
        assert cush.fails(line)["code"] == "STREAMS_HELD", line
    assert {b["name"] for b in cush.ok("ls")["buffers"]} == {"p", "d", "h"}
    assert cush.fails("hold")["code"] == "ALREADY_HELD"
    cush.ok("release; sync; memcpy d h")
    assert cush.ok("show h count 1")["values"] == [5]
    assert cush.fails("release")["code"] == "NOT_HELD"


def test_a_stream_made_while_held_is_held_too(cush):
    cush.ok("alloc pinned 4KB as z; fill z 0 dtype float32; hold; stream create nonblocking as s")
    cush.ok("launch increment z stream s; sleep 20")
    assert first(cush, "z", "float32") == 0.0
    cush.ok("release; sync")
    assert first(cush, "z", "float32") == 1.0


def test_a_wait_while_held_waits_for_the_record_before_it_not_a_later_one(cush):
    """cuStreamWaitEvent waits for the event's latest record *at the call*; re-recording it later in the hold must
    not move the wait (the fuzzer found the simulator waiting on a record not yet made: stream 2 never ran again)."""
    cush.ok("stream create nonblocking; stream create nonblocking; stream create nonblocking")
    cush.ok("launch spin 200000 stream 1; event record e stream 1")  # e: reached 200 ms from now
    cush.ok("hold; wait 2 e; event record e stream 3; release")  # e again, on an idle stream: reached at once
    cush.ok("launch spin 10 stream 2; event record f stream 2")
    waited = cush.ok("event sync f")["host_seconds"]
    assert 0.050 < waited < 2.0  # behind the 200 ms kernel (the first record; a busy host may take a while to get
    # here), and not forever
    assert "stream 2" in {r["name"] for r in cush.ok("sync; timeline")["rows"]}


def test_held_copies_run_back_to_back_after_release(cush):
    """The point of hold: the GPU time between two events no longer contains the issuing."""
    cush.ok("alloc pinned 8MB as p; alloc device 8MB as d; hold; event record a")
    cush.ok("memcpy p d async; sleep 20; memcpy p d async; event record b; release; event sync b")
    ms = cush.ok("elapsed a b")["ms"]
    assert ms < 10, ms  # two 8 MiB copies (~0.3 ms), not the 20 ms the host slept between issuing them


def test_exit_while_held_releases_and_frees_everything(cush):
    cush.ok("alloc pinned 1MB as p; alloc device 1MB as d; hold; memcpy p d async")
    assert sorted(cush.shell.close()) == ["d (device 1048576 B)", "p (pinned 1048576 B)"]


# ------------------------------------------------------------------ repeat on the GPU side
def test_repeat_runs_its_rounds_on_the_gpu_side_with_the_same_effect(cush):
    cush.ok("alloc device 4KB as d; alloc pinned 4KB as back; memset d 0")
    res = cush.ok("repeat 50 <<< launch increment d; memcpy d back >>>")
    plan = res["plan"]
    assert plan["rounds"] == 49 and plan["per_round"]["rounds"] == 49
    assert plan["per_round"]["median"] > 0 and plan["gpu_seconds"] > 0
    assert res["through_shell"] is None
    assert first(cush, "back", "float32") == 50.0
    assert cush.ok("history")["entries"][-2]["text"].startswith("repeat 50")


def test_a_long_plan_traced_in_part_keeps_its_untraced_rounds_as_one_entry():
    """CUPTI costs ~2 µs an operation, so a long plan is traced for its first rounds only: the trace gets those
    operations and one entry for the rest, from the last traced one's end to the run's end."""
    from cudashell.backends.sim import SimBackend
    from tests.conftest import Cush

    class FirstRoundsTraced(SimBackend):
        def run_plan(self, calls, rounds, gate=False, trace=True):
            run = super().run_plan(calls, rounds, gate, trace)
            self.kept = run["records"][:2 * 3]  # three rounds of two copies
            span = run["records"][0][2], max(r[3] for r in run["records"])
            return {**run, "records": [], "records_tag": 7, "rounds": rounds, "traced_rounds": 3, "span": span}

        def plan_records(self, tag):
            return self.kept

    c = Cush(FirstRoundsTraced())
    res = c.ok("alloc pinned 1MB as p; alloc device 1MB as d; repeat 200 <<< memcpy p d async; memcpy d p async >>>")
    assert res["plan"]["traced_rounds"] == 3
    c.ok("timeline")
    trace = c.shell.session.trace
    assert [e.op for e in trace] == ["memcpy h2d", "memcpy d2h"] * 4 + ["repeat"]
    assert trace[-1].start == trace[-2].end and trace[-1].end > trace[-1].start


def test_repeat_puts_its_rounds_into_the_trace(cush):
    cush.ok("alloc pinned 1MB as p; alloc device 1MB as d; repeat 20 <<< memcpy p d async; memcpy d p async >>>")
    done = cush.ok("timeline")
    if cush.backend.tracing:  # one entry per copy (CUPTI's records, or the model's)
        assert done["ops"] == 40
    else:  # events only: round 1's two copies, and the other rounds as one span
        assert done["ops"] == 3


def test_a_plans_records_read_later_replace_its_one_entry_in_place():
    """The GPU side leaves a traced plan's records to be read when the trace is (reading them took 2–6 ms on the
    H100, inside the figure of a user's next event): until then one entry stands for the run, and the first look at
    the trace puts an entry per operation in its place — before the work that came after it, and counted in what a
    `hold` before it sees queued."""
    from cudashell.backends.sim import SimBackend
    from tests.conftest import Cush

    class LaterRecords(SimBackend):
        def run_plan(self, calls, rounds, gate=False, trace=True):
            run = super().run_plan(calls, rounds, gate, trace)
            self.kept = run["records"]
            span = min(r[2] for r in self.kept), max(r[3] for r in self.kept)
            return {**run, "records": [], "records_tag": 7, "source": "CUDA events", "span": span}

        def plan_records(self, tag):
            kept, self.kept = (self.kept if tag == 7 else []), []
            return kept

    c = Cush(LaterRecords())
    c.ok("alloc pinned 1MB as p; alloc device 1MB as d; repeat 20 <<< memcpy p d async; memcpy d p async >>>")
    assert [e.op for e in c.shell.session.trace] == ["memcpy h2d", "memcpy d2h", "repeat"]
    c.ok("hold; memset d 0 async")
    assert c.ok("timeline")["ops"] == 40  # read now; the memset still waits
    assert c.ok("release")["queued"] == 1  # what came after the hold, not the 38 entries put before it
    c.ok("sync")
    assert [e.op for e in c.shell.session.trace] == ["memcpy h2d", "memcpy d2h"] * 20 + ["memset"]
    assert all(e.start is not None and e.plan is None for e in c.shell.session.trace)


def test_a_block_with_other_commands_runs_every_round_through_the_shell(cush):
    res = cush.ok("repeat 3 <<< alloc pinned 4KB; echo hi >>>")
    assert "plan" not in res and "alloc" in res["through_shell"]
    assert len([b for b in cush.ok("ls")["buffers"] if b["kind"] == "pinned"]) == 3
    res = cush.ok("alloc device 4KB as d; repeat 3 shell <<< memset d 1 >>>")
    assert "plan" not in res and res["through_shell"] == "asked"


def test_a_fault_inside_the_gpu_side_rounds_is_reported_with_its_round(cush):
    cush.ok("alloc pageable 4KB as h; alloc device 4KB as d")
    err = cush.fails("repeat 1000 <<< launch increment h unchecked; memcpy d h >>>")
    assert err["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    cush.ok("reset")
    cush.ok("memset d 1; memcpy d h")
    assert cush.ok("show h count 1")["values"] == [1]


def test_round_stats_are_median_and_spread():
    s = round_stats([3, 1, 2, 10, 4])
    assert s == {"rounds": 5, "median": 3.0, "min": 1.0, "max": 10.0, "p10": 1.0, "p90": 4.0}
    assert round_stats([]) == {"rounds": 0}


# ------------------------------------------------------------------ benches issued on the GPU side
def test_bench_latency_reports_each_point(cush):
    rows = cush.ok("bench latency rounds 50")["rows"]
    names = [r["what"] for r in rows]
    assert names[:4] == ["memcpy h2d pageable 4 B", "memcpy d2h pageable 4 B", "memcpy h2d pinned 4 B",
                         "memcpy d2h pinned 4 B"] and "host callback + sync" in names
    for r in rows:
        assert 0 < r["p10_us"] <= r["median_us"] <= r["p90_us"] < 10_000, r
    assert cush.ok("ls")["buffers"] == []


def test_bench_memcpy_is_gated_and_reports_time_per_small_copy(cush):
    rows = cush.ok("bench memcpy h2d pinned sizes 4KB,2MB reps 2")["rows"]
    small, big = rows
    assert small["gated"] and small["copies"] == 128 and small["us_per_copy"] > 0
    assert big["us_per_copy"] is None
    assert small["gbps"] < big["gbps"]
    # the two say the same, to the precision each is given in (µs to 3 decimals, GB/s to 4 digits: 0.1% at most)
    assert small["us_per_copy"] * 1e-6 * small["gbps"] * 1e9 == pytest.approx(4096, rel=1e-3)
    ungated = cush.ok("bench memcpy h2d pinned sizes 4KB reps 2 ungated")["rows"][0]
    assert ungated["gated"] is False


# ------------------------------------------------------------------ engine times and nvprof's layout
def test_the_timeline_marks_waiting_apart_from_running(cush):
    """Seed 001's naive order: stream 2's copy is issued at once but waits for the copy engine."""
    cush.ok("alloc pinned 64MB as h1; alloc pinned 64MB as h2; alloc device 64MB as d1; alloc device 64MB as d2")
    cush.ok("stream create; stream create; hold; memcpy h1 d1 async stream 1; memcpy h2 d2 async stream 2")
    cush.ok("release; sync")
    rows = {r["name"]: r["cells"] for r in cush.ok("timeline width 40")["rows"]}
    assert rows["stream 1"].startswith("H") and "." not in rows["stream 1"]
    assert re.fullmatch(r"\.+H+ *", rows["stream 2"]), rows["stream 2"]  # waited, then ran
    assert re.fullmatch(r"H+ *", rows["copy H2D"].rstrip()) and "#" not in rows["copy H2D"]


def test_profile_prints_nvprofs_layout(cush):
    cush.ok("alloc pinned 1MB as p; alloc device 1MB as d; memcpy p d; memcpy p d; memcpy d p; sync")
    cush.shell.session.settings["format"] = "table"
    cush.shell.execute("profile")
    text = cush.out.getvalue().splitlines()
    i = next(i for i, line in enumerate(text) if line.startswith("==cudashell== Profiling result"))
    assert text[i + 1] == "Time(%)      Time     Calls       Avg       Min       Max  Name"
    assert re.fullmatch(r" *\d+\.\d\d%\s+\S+s\s+2\s+\S+s\s+\S+s\s+\S+s  \[CUDA memcpy HtoD\]", text[i + 2]), text[i + 2]
    assert any(line.startswith("==cudashell== API calls") for line in text[i:])


def test_the_api_table_counts_each_free_call_by_its_name(cush):
    """cudaFree, cudaFreeHost and cudaFreeAsync are CUDA calls of their own in nvprof's API table; free() of
    pageable memory and a `free all` of mixed kinds (several calls, one command) are not one row."""
    cush.ok("alloc device 1MB as a; alloc device 1MB async as b; alloc pinned 1MB as p; alloc pageable 1MB as h")
    cush.ok("alloc device 1MB as x; alloc pinned 1MB as y")
    cush.ok("free a; free b async; free p; free h; sync; free all")
    calls = {row["name"]: row["calls"] for row in cush.ok("profile")["api"]}
    assert calls["cudaFree"] == calls["cudaFreeHost"] == calls["cudaFreeAsync"] == calls["cudaMallocAsync"] == 1
    assert "free" not in calls


def test_nvprof_times_have_five_significant_digits():
    assert [nvprof_time(x) for x in (291.24e-3, 5.7688e-3, 6.672e-6, 222e-9, 1.2345)] == \
        ["291.24ms", "5.7688ms", "6.6720us", "222ns", "1.2345s"]


@pytest.mark.gpu
def test_cupti_engine_times_on_the_gpu():
    """With CUPTI, stream 2's copy starts when stream 1's ends (it waited for the engine) and lasts what its
    bytes take at the pinned rate; events around it would have charged it the wait."""
    from tests.conftest import Cush, make_backend

    cush = Cush(make_backend("cuda"))
    try:
        if not cush.backend.tracing:
            pytest.skip(cush.backend.tracing_why)
        cush.ok("alloc pinned 64MB as h1; alloc pinned 64MB as h2; alloc device 64MB as d1; alloc device 64MB as d2")
        # both pairs copied once first: on the H100 a buffer's first copy ran 6% slower than its next (2026-11-26)
        cush.ok("stream create; stream create; memcpy h1 d1; memcpy h2 d2")
        cush.ok("memcpy h1 d1 async stream 1; memcpy h2 d2 async stream 2; sync")  # the second waits for the engine
        trace = cush.shell.session.trace[-2:]
        assert all(e.source == "CUPTI activity records" for e in trace), trace
        one, two = sorted(trace, key=lambda e: e.start)
        assert abs(two.start - one.end) < 10e-6, (one, two)
        assert abs((two.end - two.start) / (one.end - one.start) - 1) < 0.05
    finally:
        cush.shell.close()


@pytest.mark.gpu
def test_a_hold_the_driver_cannot_queue_behind_is_let_go_and_said_so():
    """With CUPTI tracing, the H100 blocked the 341st 64 KiB copy issued while held (its record buffer was full):
    the worker's watchdog lets the streams go rather than wait forever, and `release` says it had."""
    from tests.conftest import Cush, make_backend

    cush = Cush(make_backend("cuda"))
    try:
        if not cush.backend.tracing:
            pytest.skip("the queue filled only with CUPTI tracing on")
        cush.ok("set gpu-timeout 60; alloc pinned 64KB as p; alloc device 64KB as d; fill p 9; hold")
        cush.ok("repeat 3000 <<< memcpy p d async >>>")
        released = cush.ok("release")
        assert released["early"] and "queue filled" in released["early"]
        cush.ok("sync; alloc pinned 64KB as back; memcpy d back")
        assert cush.ok("show back count 1")["values"] == [9]
    finally:
        cush.shell.close()


@pytest.mark.gpu
def test_cupti_records_only_the_calls_that_queue_work():
    """Each copy leaves its engine record and the record tying it to our tag — and nothing for the stream query and
    event record around it (reading records is what a flush costs): every copy's span comes back, and a 1 MiB copy
    takes its bytes' time where a 4-byte one takes about a microsecond."""
    from tests.conftest import gpu_missing

    if gpu_missing():
        pytest.skip(f"no GPU: {gpu_missing()}")
    from cudashell.backends.gpu import GpuSide
    from cudashell.model.session import Buffer

    side = GpuSide()
    try:
        if not side.tracing:
            pytest.skip(side.tracing_why)
        bufs = [Buffer(n, k, 1 << 20, frozenset(), a.host_ptr, a.device_ptr, a.handle)
                for n, k in (("p", "pinned"), ("d", "device")) for a in [side.alloc(k, 1 << 20, frozenset())[0]]]
        tokens = [side.memcpy(bufs[0], 0, bufs[1], 0, 4 if i % 2 else 1 << 20, None, True).token for i in range(200)]
        side.device_sync()
        side.activity.flush()
        assert set(side.activity.tag_of.values()) == set(tokens)  # one tie per copy, none for the calls around it
        spans = side.resolve_many(tokens)
        assert set(spans) == set(tokens)
        small = sorted(spans[t][0] for t in tokens[1::2])
        big = sorted(spans[t][0] for t in tokens[::2])
        assert small[50] < 5e-6 and 10e-6 < big[50] < 200e-6, (small[50], big[50])
    finally:
        side.close()


def _traced_side():
    """A GpuSide with CUPTI on, a 1 MiB pinned buffer and a device one (skips where there is no GPU or CUPTI)."""
    from tests.conftest import gpu_missing

    if gpu_missing():
        pytest.skip(f"no GPU: {gpu_missing()}")
    from cudashell.backends.gpu import GpuSide
    from cudashell.model.session import Buffer

    side = GpuSide()
    if not side.tracing:
        side.close()
        pytest.skip(side.tracing_why)
    bufs = [Buffer(n, k, 1 << 20, frozenset(), a.host_ptr, a.device_ptr, a.handle)
            for n, k in (("p", "pinned"), ("d", "device")) for a in [side.alloc(k, 1 << 20, frozenset())[0]]]
    return side, bufs


@pytest.mark.gpu
def test_cupti_paused_for_a_plans_untraced_rounds_comes_back_after_the_reply_or_for_the_next_work():
    """A long plan's untraced rounds run with CUPTI's work records off, and it stays so when the plan returns (turning
    it on again took 65 µs on the H100, inside the pageable demo's loop): the worker's `idle` turns it on once the
    reply is sent, and work issued before that turns it on itself — its record still comes."""
    side, (p, d) = _traced_side()
    try:
        plan = [["memcpy", [p, 0, d, 0, 4, None, False]]]
        run = side.run_plan(plan, 500)
        assert 0 < run["traced_rounds"] < 500 and side.activity.work_paused
        side.idle()
        assert not side.activity.work_paused
        side.run_plan(plan, 500)
        assert side.activity.work_paused
        token = side.memcpy(p, 0, d, 0, 1 << 20, None, True).token
        assert not side.activity.work_paused
        side.device_sync()
        span = side.resolve(token)
        assert span[3] == "CUPTI activity records" and span[0] > 0, span
    finally:
        side.close()


@pytest.mark.gpu
def test_records_of_finished_work_are_read_at_rest_not_by_the_command_that_settles_it():
    """At rest (no request for a while) the worker reads the records of finished work and of plans: resolving the work
    and reading the plan's records then need no flush. While work still runs, rest leaves CUPTI alone (a forced flush
    would hand over unfinished records)."""
    side, (p, d) = _traced_side()
    try:
        side.hold([None])
        held = side.memcpy(p, 0, d, 0, 1 << 20, None, True).token
        side.rest()
        assert not side.activity.delivered(held)
        side.release()
        side.device_sync()
        token = side.memcpy(p, 0, d, 0, 1 << 20, None, True).token
        side.device_sync()
        plan = side.run_plan([["memcpy", [p, 0, d, 0, 4, None, False]]], 500)
        side.rest()
        assert side.activity.delivered(held) and side.activity.delivered(token)
        flush = side.activity.flush
        side.activity.flush = lambda: pytest.fail("reading what was read at rest flushed CUPTI again")
        spans = side.resolve_many([held, token])
        assert all(spans[t][3] == "CUPTI activity records" for t in (held, token)), spans
        assert len(side.plan_records(plan["records_tag"])) == plan["traced_rounds"]
        side.activity.flush = flush
    finally:
        side.close()


def test_an_activity_records_fields_come_back_in_the_layouts_order_whatever_their_offsets():
    """CUPTI's records are read by one struct call each (a flush's cost is its records'): the fields the layout
    names, at their offsets in the record (gaps skipped), in the layout's order — a memcpy record's correlation id
    lies after its start and end."""
    import struct

    from cudashell.backends.activity import unpacker

    record = bytearray(128)
    struct.pack_into("<QQ", record, 32 + 8, 1_000_000_123, 1_000_004_567)
    struct.pack_into("<I", record, 32 + 56, 4242)
    struct.pack_into("<i", record, 32 + 4, -3)
    view = memoryview(record)
    assert unpacker([(56, "<I"), (8, "<Q"), (16, "<Q")])(view, 32) == (4242, 1_000_000_123, 1_000_004_567)
    assert unpacker([(16, "<Q"), (4, "<i")])(view, 32) == (1_000_004_567, -3)

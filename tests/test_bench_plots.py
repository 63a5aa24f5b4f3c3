"""Benches on the simulator, as a reader meets them: every kind draws (`--plot`), its figure reads as a person
would (sizes on a log2 axis, lines named in words, the legend off the lines, the zero-copy crossing marked where the
table says, a flat series on at least a decade of log axis), the modeled costs are there and agree with each other
(a sync costs a round trip, a free costs time), the RAM budget holds and a bench stops at the size it refuses, and
every measured point moves the progress line.
Figures are read from their axes (scales, labels, legend texts), never compared as images."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.commands import calibrate
from cudashell.commands.bench import Bench
from cudashell.language import registry
from tests.conftest import Cush

MIB = 1 << 20


def on(profile: Profile) -> Cush:
    return Cush(SimBackend(profile))


@pytest.fixture
def plt():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def figure(result: dict):
    return Bench(result).figure()


def legend_texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()] + \
        [t.get_text() for leg in fig.legends for t in leg.get_texts()]


def covered_points(fig) -> list:
    """The markers of every line that lie under a legend, in display coordinates (none should)."""
    fig.canvas.draw()
    boxes = [ax.get_legend().get_window_extent() for ax in fig.axes if ax.get_legend()] + \
        [leg.get_window_extent() for leg in fig.legends]
    hidden = []
    for ax in fig.axes:
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):  # a labelled line: one of the figures
                for x, y in ax.transData.transform(line.get_xydata()):
                    hidden += [(line.get_label(), x, y) for b in boxes if b.contains(x, y)]
    return hidden


# ------------------------------------------------------------------ 1. every bench takes --plot
def test_every_bench_kind_takes_plot():
    registry.load()
    benches = [s for s in registry.specs() if s.name.startswith("bench ")]
    assert {s.name for s in benches} >= {"bench memcpy", "bench latency", "bench alloc", "bench zerocopy",
                                         "bench overlap", "bench peer"}
    assert [s.name for s in benches if "--plot" not in {o.keyword for o in s.opts}] == []


def test_bench_latency_plot_writes_a_figure_of_each_operation_and_its_spread(sim, plt, tmp_path):
    result = sim.ok(f"bench latency rounds 20 --plot {tmp_path / 'l.png'}")
    assert (tmp_path / "l.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = figure(result).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [r["what"] for r in result["rows"]]
    assert ax.get_xlabel() == "µs per round (median; whiskers p10–p90)"
    assert len(ax.containers) == 2  # the bars and their p10–p90 error bars


# ------------------------------------------------------------------ 3. figures a reader can read
def test_bench_alloc_draws_sizes_on_a_log2_axis_with_the_legend_off_the_lines(sim, plt):
    result = sim.ok("bench alloc pinned registered device managed sizes 4MB,16MB,64MB")
    fig = figure(result)
    assert len(fig.axes) == 2  # allocating, and freeing
    for ax in fig.axes:
        assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
        assert ax.get_yscale() == "log"  # from a cudaMalloc's µs to pinning's tenths of a second per GiB
        fig.canvas.draw()
        assert [t.get_text() for t in ax.get_xticklabels() if t.get_text()] == ["4 MiB", "16 MiB", "64 MiB"]
        assert ax.xaxis.get_offset_text().get_text() == ""  # no "1e9" beside the axis
    assert [ax.get_title() for ax in fig.axes] == ["allocate", "free"]
    assert legend_texts(fig) == ["pinned", "registered", "device", "managed"]
    assert covered_points(fig) == []


def test_bench_memcpy_plot_keeps_its_legend_off_the_lines(sim, plt):
    fig = figure(sim.ok("bench memcpy h2d pageable pinned sizes 4KB..4MB reps 2"))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    assert legend_texts(fig)[:2] == ["pageable", "pinned"]
    assert covered_points(fig) == []


ZC_NAMES = ["zero-copy kernel (reads mapped host memory)", "device kernel (reads device memory)",
            "zero-copy step: kernel, then copy C out", "device step: copy A and B in, kernel, copy C out"]


def test_bench_zerocopy_names_its_lines_and_marks_where_the_strategies_cross(plt):
    """Zero-copy memory read at 2 GB/s: the zero-copy step wins while copies' fixed costs dominate, and loses once
    its kernel's slow reads do — the figure marks the first size where device memory wins."""
    c = on(replace(Profile.load(None), kernel_zero_copy_read=2e9))
    try:
        result = c.ok("bench zerocopy 2^10..2^20")
    finally:
        c.shell.close()
    winner = ["zero-copy" if r["zc_step_us"] < r["dev_step_us"] else "device" for r in result["rows"]]
    assert winner[0] == "zero-copy" and winner[-1] == "device"
    cross = result["rows"][winner.index("device")]["n"]
    fig = figure(result)
    ax = fig.axes[0]
    assert legend_texts(fig) == ZC_NAMES
    assert not any("_us" in t for t in legend_texts(fig))  # no internal keys
    marks = [line for line in ax.get_lines() if line.get_label().startswith("_")
             and list(line.get_xdata()) == [cross, cross]]
    assert marks, "a vertical line at the crossing"
    assert [t.get_text() for t in ax.texts] == [f"device memory wins from n = {cross:,}"]
    assert covered_points(fig) == []


def test_bench_zerocopy_says_when_the_strategies_do_not_cross(sim, plt):
    result = sim.ok("bench zerocopy 2^10..2^12")
    assert all(r["zc_step_us"] < r["dev_step_us"] for r in result["rows"])
    assert [t.get_text() for t in figure(result).axes[0].texts] == ["zero-copy wins at every n measured"]


# ------------------------------------------------------------------ 2. the modeled costs
def test_a_launch_and_sync_costs_the_kernel_and_a_round_trip_more_than_the_launch(sim):
    p = sim.backend.profile
    assert p.sync_latency > 0
    rows = {r["what"]: r["median_us"] for r in sim.ok("bench latency rounds 20")["rows"]}
    call, round_trip = rows["kernel launch (the call)"], rows["kernel launch + sync"]
    assert round_trip == pytest.approx(call + (p.launch_latency + p.sync_latency) * 1e6, abs=1e-3)
    assert rows["host callback + sync"] > rows["event record"] + p.sync_latency * 1e6


def test_a_sync_waits_for_the_work_and_the_round_trip_and_costs_nothing_when_idle(sim):
    p = sim.backend.profile
    sim.ok("alloc device 1GB as d")
    memset = sim.ok("memset d 0 async")["seconds"]  # the host went on at once; the next command starts later
    assert sim.ok("sync")["host_seconds"] == pytest.approx(memset - p.shell_overhead + p.sync_latency, rel=1e-6)
    assert sim.ok("sync")["host_seconds"] == 0  # nothing to wait for


def test_bench_alloc_models_every_free_and_unregister(sim):
    p = sim.backend.profile
    rows = {r["kind"]: r for r in sim.ok("bench alloc pinned registered device pageable sizes 64MB")["rows"]}
    assert all(r["free_s_per_gib"] > 0 for r in rows.values()), rows
    gib = 1 << 10  # MiB
    assert rows["pinned"]["free_s_per_gib"] == pytest.approx(p.pinned_free_per_mib * gib, rel=0.01)
    assert rows["registered"]["free_s_per_gib"] == pytest.approx(p.unregister_per_mib * gib, rel=0.05)
    assert rows["device"]["free_s_per_gib"] == pytest.approx(p.device_free * 16, rel=0.01)  # 64 MiB: 1/16 GiB


def test_calibrate_measures_the_sync_round_trip_and_the_frees_the_simulator_models():
    """On the simulator, calibrate's methods give back the profile's own figures: what it measures on a GPU is
    what the model uses."""
    backend = SimBackend()
    p = backend.profile
    try:
        assert calibrate.sync_latency(backend, p.launch_latency) == pytest.approx(p.sync_latency, rel=0.01)
        figures = calibrate.alloc_figures(backend, None)
    finally:
        backend.close()
    for key in ("device_alloc", "device_free", "pinned_free_per_mib", "register_per_mib", "unregister_per_mib"):
        assert figures[key] == pytest.approx(getattr(p, key), rel=0.05), key


def test_the_shipped_h100_profile_has_the_sync_and_free_figures():
    from cudashell.backends.profile import CALIBRATED

    shipped = json.loads(CALIBRATED.read_text())
    for key in ("sync_latency", "device_free", "pinned_free_per_mib", "unregister_per_mib"):
        assert shipped[key] > 0, key


def test_an_older_profile_without_the_new_figures_loads_with_defaults(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"name": "lab (2025)", "sync_latency": 0.0, "launch_latency": 5e-6}))
    p = Profile.load(str(path))
    assert p.sync_latency == 0.0  # an older calibrate measured none: kept as measured
    assert p.device_free > 0 and p.pinned_free_per_mib > 0 and p.unregister_per_mib > 0
    assert p.sync_latency == 0.0 and Profile().sync_latency > 0  # a file that leaves it out gets one


# ------------------------------------------------------------------ 4. the RAM budget
def test_a_bench_holds_the_budget_in_its_working_arrays_too():
    """A kernel copying through mapped memory works on its bytes a piece at a time: with 32 MiB of budget the
    simulator's own arrays stay within it (and a few MiB of pieces), not four times the buffer beside it."""
    import tracemalloc

    c = on(replace(Profile.load(None), storage_budget=32 * MIB))
    tracemalloc.start()
    try:
        result = c.ok("bench memcpy h2d mapped sizes 8MB reps 2")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        c.shell.close()
    assert [r["size"] for r in result["rows"]] == [8 * MIB]
    assert peak < 32 * MIB + 12 * MIB, peak >> 20


def test_a_bench_stops_at_the_first_size_the_budget_refuses_and_says_which():
    c = on(replace(Profile.load(None), storage_budget=64 * MIB))
    try:
        result = c.ok("bench memcpy h2d pinned sizes 4MB..1GB reps 2")
        # two sources written at each size (the copies share their chunks): 64 MiB of them fit, 128 do not
        assert [r["size"] for r in result["rows"]] == [4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB]
        assert result["stopped_at"] == "pinned 64 MiB" and result["stopped"].startswith("SIM_BUDGET: ")
        assert "stopped at pinned 64 MiB — SIM_BUDGET: " in "\n".join(Bench(result).lines())
        error = c.fails("bench zerocopy 2^24..2^26")  # the first point refused: nothing to show
        assert error["code"] == "SIM_BUDGET" and error["message"].startswith("bench zerocopy at n = 16,777,216: ")
        assert c.backend.budget.used == 0
    finally:
        c.shell.close()


# ------------------------------------------------------------------ 5. progress per point
@pytest.mark.parametrize("line, points", [
    ("bench memcpy h2d pinned sizes 4KB,8KB reps 2", 2),
    ("bench latency rounds 10", 10),  # and 64 small copies: a loop, one batch
    ("bench alloc pinned device sizes 4KB", 2),
    ("bench zerocopy 2^10..2^11", 2),
    ("bench overlap streams 1,2,4", 3),
])
def test_each_bench_moves_the_progress_line_at_every_point(sim, line, points):
    seen = []
    sim.shell.session.progress = lambda label, done, total: seen.append((label, done, total))
    sim.ok(line)
    label = " ".join(line.split()[:2])
    assert seen == [(label, k, points) for k in range(1, points + 1)] + [(label, None, points)]


def test_bench_peer_moves_the_progress_line(pair):
    """(calibrate's progress: tests/test_devices.py, which calibrates anyway.)"""
    seen = []
    pair.shell.session.progress = lambda label, done, total: seen.append((label, done, total))
    pair.ok("bench peer 1MB reps 1")
    total = seen[0][2]
    assert seen == [("bench peer", k, total) for k in range(1, total + 1)] + [("bench peer", None, total)]


def test_copies_between_lazy_stores_keep_every_byte_and_share_whole_chunks():
    """Whole chunks copied are shared (copy on write: a later write into either side leaves the other as it was),
    parts copied; copies aligned to chunks or not, zeros over written bytes, all agree with flat arrays; the budget
    counts each chunk once however many stores hold it, and has it all back when they let go."""
    import numpy as np

    from cudashell.backends.sparse import CHUNK, Budget, SparseBytes

    rng = np.random.default_rng(7)
    size = 5 * CHUNK + 123
    budget = Budget(1 << 30)
    a, b = SparseBytes(size, budget), SparseBytes(size, budget)
    flat = {id(a): np.zeros(size, np.uint8), id(b): np.zeros(size, np.uint8)}

    def write(store, offset, n):
        data = rng.integers(1, 255, n, dtype=np.uint8)
        store.write(offset, data)
        flat[id(store)][offset:offset + n] = data

    write(a, CHUNK // 2, 3 * CHUNK)
    b.copy_from(a, 0, 0, size)
    flat[id(b)][:] = flat[id(a)]
    assert budget.used == 4 * CHUNK  # the four chunks a wrote, held by both
    for src_off, dst_off, n in [(CHUNK, 2 * CHUNK, 2 * CHUNK + 5), (100, 3 * CHUNK + 7, CHUNK),
                                (3 * CHUNK, 0, 2 * CHUNK + 123), (7, 7, 4 * CHUNK), (0, 0, size)]:
        for src, dst in ((a, b), (b, a)):
            write(src, rng.integers(0, size - 100), 100)  # into a chunk the other may share
            dst.copy_from(src, src_off, dst_off, n)
            flat[id(dst)][dst_off:dst_off + n] = flat[id(src)][src_off:src_off + n]
            assert np.array_equal(a.read(0, size), flat[id(a)]) and np.array_equal(b.read(0, size), flat[id(b)])
    a.fill(CHUNK + 10, 0, 3 * CHUNK)
    flat[id(a)][CHUNK + 10:4 * CHUNK + 10] = 0
    assert np.array_equal(a.read(0, size), flat[id(a)]) and np.array_equal(b.read(0, size), flat[id(b)])
    distinct = {id(c) for store in (a, b) for c in store.chunks.values()}
    assert budget.used == len(distinct) * CHUNK
    a.release()
    b.release()
    assert budget.used == 0 and budget.holders == {}


def test_closing_the_simulator_gives_its_whole_budget_back_shared_chunks_too():
    c = on(Profile.load(None))
    c.ok("alloc pinned 4MB as h; fill h 7; alloc device 4MB as d; memcpy h d; memcpy d h")
    budget = c.backend.budget
    assert budget.used == 4 * MIB and budget.holders  # h and d hold the same four chunks
    c.shell.close()
    assert budget.used == 0 and budget.holders == {}


# ------------------------------------------------------------------ the zero-copy figure says what the table says
def test_the_zero_copy_figure_marks_the_benchs_own_crossover(plt):
    rows = [{"n": n, "zc_kernel_us": 1.0, "dev_kernel_us": 1.0, "zc_step_us": zc, "dev_step_us": 10.0}
            for n, zc in ((1024, 5.0), (2048, 20.0), (4096, 5.0), (8192, 5.0))]
    data = {"bench": "zerocopy", "rows": rows, "zc_step_wins_from": 4096, "dev_step_wins_from": None,
            "kernel_2x": None, "interrupted": False, "stopped": None, "timing": "modeled"}
    fig = Bench(data).figure()
    assert [t.get_text() for t in fig.axes[0].texts] == ["zero-copy wins from n = 4,096"]
    data = {**data, "zc_step_wins_from": 1024}  # the field, not the rows, decides
    assert [t.get_text() for t in Bench(data).figure().axes[0].texts] == ["zero-copy wins at every n measured"]
    table = "\n".join(Bench({**data, "zc_step_wins_from": None, "dev_step_wins_from": 8192}).lines())
    fig = Bench({**data, "zc_step_wins_from": None, "dev_step_wins_from": 8192}).figure()
    assert [t.get_text() for t in fig.axes[0].texts] == ["device memory wins from n = 8,192"]
    assert "device memory wins from n = 8192 on" in table


def test_bench_zerocopy_reports_where_each_strategy_keeps_winning():
    c = Cush(SimBackend(replace(Profile.load(None), kernel_zero_copy_read=2e9)))
    try:
        result = c.ok("bench zerocopy 2^10..2^20")
    finally:
        c.shell.close()
    wins = [r["n"] for r in result["rows"] if r["zc_step_us"] >= r["dev_step_us"]]
    assert result["zc_step_wins_from"] is None and result["dev_step_wins_from"] == wins[0]


# ------------------------------------------------------------------ a constant series on a log axis
def test_bench_alloc_gives_a_flat_series_at_least_a_decade_of_axis(plt):
    """The free of pinned memory costs the same per GiB at any size: the clock's rounding (once to the float's noise,
    now to whole ns: 4 KiB's free is 733 ns, not 733.2) made its series span a sliver of itself, and a log axis
    zoomed into it drew a steep slope with ticks that all read the same."""
    import io as _io

    from cudashell.backends.sim.common import ns
    from cudashell.frontends.shell import Shell

    results = []
    backend = SimBackend()
    shell = Shell(backend, out=_io.StringIO(), err=_io.StringIO(),
                  on_report=lambda result, error: results.append(result))
    try:
        shell.execute("bench alloc pinned sizes 4KB,1MB,64MB")
    finally:
        shell.close()
    free = [r["free_s_per_gib"] for r in results[-1].data["rows"]]
    per_mib = backend.profile.pinned_free_per_mib
    assert free == [pytest.approx(ns(per_mib * size / (1 << 20)) / 1e9 / (size / (1 << 30)), rel=1e-9)
                    for size in (4 << 10, 1 << 20, 64 << 20)]  # flat in the model, up to the clock's ns
    ax = results[-1].figure().axes[1]
    lo, hi = ax.get_ylim()
    assert hi / lo >= 10 and lo <= min(free) and max(free) <= hi

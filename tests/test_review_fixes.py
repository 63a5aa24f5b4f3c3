"""Issue 25's review, rendering and simulator: CSV keeps every kind's main content, cells and expanded records wrap
by the same rules as text (a number stays with its unit, a bracket with the word after it), profile rows stay
whole, the zero-copy figure says what the table says, a constant series gets a readable log axis, a chunk-aligned
copy reserves only the RAM it makes, a 32-bit profile's malloc that finds no room is the host's failure, and the
config file's lines are counted as configparser reads them."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.output import render
from cudashell.output.results import Result

from .conftest import Cush
from .test_render_issue25 import text_run

MIB = 1 << 20


def csv_out(lines: list[str]) -> str:
    """What the last of these commands prints under `set format csv` (the ones before it run in table format)."""
    from cudashell.frontends.shell import Shell

    out = io.StringIO()
    shell = Shell(SimBackend(), out=out, err=out)
    try:
        for line in lines[:-1]:
            assert shell.execute(line), out.getvalue()
        shell.execute("set format csv")
        out.seek(0), out.truncate()
        assert shell.execute(lines[-1]), out.getvalue()
    finally:
        shell.close()
    return out.getvalue()


def last_csv(lines: list[str]) -> list[dict]:
    return list(csv.DictReader(io.StringIO(csv_out(lines))))


# ------------------------------------------------------------------ 1. CSV keeps each kind's main content
def test_csv_of_a_record_keeps_its_lists_and_its_nested_records_as_columns():
    (row,) = last_csv(["alloc pinned 1MB as h", "alloc device 1MB as d", "fill h 7", "memcpy h d",
                       "checksum h d"])
    assert row["checksums.h"] == row["checksums.d"] != "" and int(row["checksums.h"]) > 0
    (row,) = last_csv(["kernel define k <<< __global__ void k(float *a) { a[0] = 1; } >>>"])
    assert row["loaded"] == "k(a)"
    (row,) = last_csv(["alloc pinned 1MB as h", "fill h 3", "show h count 4"])
    assert row["values"] == "3;3;3;3" and row["name"] == "h"
    (row,) = last_csv(["alloc pinned 1MB mapped as h", "info h"])
    assert (row["name"], row["kind"], row["flags"]) == ("h", "pinned", "mapped")
    assert row["host_ptr"].startswith("0x") and row["driver.memory_type"] == "host"
    (row,) = last_csv(["alloc device 1MB as d"])
    assert row["buffer.name"] == "d" and row["buffer.device_ptr"].startswith("0x") and row["call"] == "cudaMalloc"


def test_csv_of_an_empty_table_is_its_header():
    assert csv_out(["ls"]).splitlines() == [
        "name,kind,size,size_text,flags,registered,host_ptr,device_ptr,same_pointer,state,device,context"]


def _leaves(data: dict) -> dict:
    """The columns a record's CSV must have: its plain fields and lists, and each nested record's fields a level down."""
    out = {}
    for k, v in render.rounded(data).items():
        if isinstance(v, dict):
            out.update({f"{k}.{s}": x for s, x in v.items()})
        else:
            out[k] = v
    return out


def test_every_kind_from_real_runs_prints_a_header_and_its_main_values_in_csv(real_runs):
    """Tables (a list of records that leads the data) print their rows; every other kind one record holding
    every field: lists `;`-joined, nested records a level down as `key.sub` columns."""
    tables = set()
    for kind, results in real_runs.results.items():
        for result in results:
            if Result.KINDS[kind].prose:
                continue
            text = render.csv_text(result)
            header, *rows = list(csv.reader(io.StringIO(text)))
            assert header and all(header), (kind, text)
            records = list(csv.DictReader(io.StringIO(text)))
            lead = next((k for k, v in result.data.items() if isinstance(v, (list, dict))), None)
            if lead is not None and isinstance(result.data[lead], list) and header[0] not in result.data:
                tables.add(kind)
                assert len(records) == len(result.data[lead]) or any(
                    isinstance(result.data[k], list) and len(result.data[k]) == len(records) for k in result.data)
                continue
            assert len(records) == 1, (kind, text)
            for column, value in _leaves(result.data).items():
                assert records[0][column] == str(render.csv_cell(value)), (kind, column)
    assert {"ls", "history", "bench", "streams"} <= tables
    assert not {"info", "show", "alloc", "launch"} & tables


# ------------------------------------------------------------------ 2. cells and expanded records wrap as text does
def test_a_table_cell_keeps_a_number_with_its_unit_and_a_bracket_with_its_word():
    doctor = text_run(["doctor"], 80)
    assert "belongs to (" not in doctor and "79.18 GiB" in doctor
    assert all(not line.rstrip().endswith("(") for line in doctor.splitlines())
    devices = text_run(["devices"], 80)
    assert all(not line.rstrip().endswith("(") for line in devices.splitlines())
    assert "(simulated;" in devices
    bench = text_run(["bench alloc pinned device sizes 4KB"], 40)
    assert not any(line.strip() in ("ms", "s") for line in bench.splitlines())
    assert render._cell("registered(mapped),portable", 12) == "registered(\nmapped),\nportable"


def test_an_expanded_record_keeps_a_number_with_its_unit():
    text = text_run(["set expanded on", "alloc device 1MB as d", "ls"], 29)
    assert "size       | 1 MiB\n           | (1048576 B)" in text


def test_wrap_takes_an_indent_for_the_lines_it_continues():
    assert render.wrap(["alpha beta 12 MiB gamma"], 12, indent="  ") == ["alpha beta", "  12 MiB", "  gamma"]


# ------------------------------------------------------------------ 3. profile rows stay whole
def test_profile_rows_are_not_wrapped_at_80_columns():
    text = text_run(["alloc managed 64MB as m", "prefetch m device", "sync", "profile"], 80)
    lines = text.splitlines()
    row = next(line for line in lines if "[Unified Memory prefetch HtoD]" in line)
    assert row.endswith("  [Unified Memory prefetch HtoD]")
    assert not any(line.strip() in ("prefetch HtoD]", "[Unified Memory") for line in lines)


# ------------------------------------------------------------------ 4. the zero-copy figure says what the table says
@pytest.fixture
def plt():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def test_the_zero_copy_figure_marks_the_benchs_own_crossover(plt):
    from cudashell.commands.bench import Bench

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


# ------------------------------------------------------------------ 5. a constant series on a log axis
def test_bench_alloc_gives_a_flat_series_at_least_a_decade_of_axis(plt):
    """The free of pinned memory costs the same per GiB at any size: the clock's float noise made its series span
    1e-15 of itself, and a log axis zoomed into it drew a steep slope with ticks that all read the same."""
    import io as _io

    from cudashell.frontends.shell import Shell

    results = []
    shell = Shell(SimBackend(), out=_io.StringIO(), err=_io.StringIO(),
                  on_report=lambda result, error: results.append(result))
    try:
        shell.execute("bench alloc pinned sizes 4KB,1MB,64MB")
    finally:
        shell.close()
    free = [r["free_s_per_gib"] for r in results[-1].data["rows"]]
    assert max(free) / min(free) < 1 + 1e-9  # flat in the model, up to the clock's rounding
    ax = results[-1].figure().axes[1]
    lo, hi = ax.get_ylim()
    assert hi / lo >= 10 and lo <= min(free) and max(free) <= hi


# ------------------------------------------------------------------ 6. a copy reserves only the RAM it makes
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


# ------------------------------------------------------------------ 7. a 32-bit malloc that finds no room
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


# ------------------------------------------------------------------ 8. config lines as configparser counts them
def test_a_form_feed_in_the_config_file_does_not_shift_later_lines(tmp_path):
    from cudashell.frontends import config

    raw = b"[shell]\n# page two\x0c\ncolor = purple\n# caf\xe9\n"
    settings, problems = config.read(raw)
    assert [(n, e.message[:14]) for n, e in problems] == [(3, "color = purple"), (4, "byte 0xe9 is n")]
    assert settings["color"] == "auto"


def test_importing_config_does_not_import_render():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", "import sys, cudashell.frontends.config; print('cudashell.output.render' in sys.modules)"],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False"], r.stderr

"""Issue 25, how results are rendered: charts and tables are never wrapped into pieces, text breaks only between
words (C between tokens), CSV cells as a CSV reader expects them, JSON floats without binary noise, sizes shown as
sizes, the info table aligned, `timeline last 0` empty, 32-bit pointers on the 32-bit profile, what a kernel's
byte count counts, and `set expanded`."""

from __future__ import annotations

import csv
import io
import json
import re

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.frontends.shell import Shell
from cudashell.output import render

from .conftest import Cush


def text_run(lines: list[str], width: int = 80, profile: str | None = None) -> str:
    """What a terminal of `width` columns shows for these commands (errors included, in order)."""
    out = io.StringIO()
    shell = Shell(SimBackend(Profile.load(profile) if profile else None), out=out, err=out)
    shell.session.settings["width"] = width
    try:
        for line in lines:
            shell.execute(line)
    finally:
        shell.close()
    return out.getvalue()


WORK = ["alloc pinned 64MB as h", "alloc device 64MB as d", "memcpy h d async", "launch increment d", "sync"]


# ------------------------------------------------------------------ 1. wrapping
def test_a_timeline_wider_than_the_terminal_is_narrowed_whole_with_a_note():
    text = text_run(WORK + ["timeline width 200"], 80)
    chart = text[text.index("timeline of"):].splitlines()
    assert all(len(line) <= 80 for line in chart)
    assert chart[1] == "(width 200 does not fit the terminal: drawn 67 columns wide)"
    rows = [line for line in chart if line.startswith("  stream 0 ") or line.startswith("  compute ")]
    assert len(rows) == 2 and all(line.endswith("|") and len(line) == 80 for line in rows)


def test_a_timeline_fills_the_terminal_and_keeps_its_asked_width_where_it_fits_or_in_json():
    wide = text_run(WORK + ["timeline", "timeline width 40"], 120)
    rows = [line for line in wide.splitlines() if line.startswith("  stream 0 ")]
    assert [len(r) for r in rows] == [120, 12 + 40 + 1]
    assert "does not fit" not in wide
    c = Cush(SimBackend())
    for line in WORK:
        c.ok(line)
    c.shell.session.settings["width"] = 80
    got = c.ok("timeline width 200")
    assert got["width"] == 200 and len(got["rows"][0]["cells"]) == 200 and "asked_width" not in got


def test_explain_breaks_c_only_after_a_comma_or_a_space_and_indents_what_follows():
    from cudashell.export.cemit import explain_lines

    lines = explain_lines('CHECK(cudaMemcpy(b_d, b_h, 67108864, cudaMemcpyHostToDevice));\n'
                          'printf("a, b  c", x);', "cuMemcpy, cuLaunchKernel", 40)
    assert lines == ["  C:      CHECK(cudaMemcpy(b_d, b_h,", "              67108864,",
                     "              cudaMemcpyHostToDevice));", '          printf("a, b  c", x);',
                     "  driver: cuMemcpy, cuLaunchKernel"]
    text = text_run(["alloc pinned 64MB as h", "alloc device 64MB as d", "explain on", "memcpy h d"], 60)
    assert "              cudaMemcpyHostToDevice));" in text.splitlines()
    assert all(len(line) <= 60 for line in text.splitlines())


def test_error_lines_wrap_between_words_at_the_prompt():
    text = text_run(["free nosuchbuffer_with_a_long_name"], 40)
    lines = text.splitlines()
    assert len(lines) > 1 and all(len(line) <= 40 for line in lines)
    one = text_run(["free nosuchbuffer_with_a_long_name"], 0).strip()
    assert " ".join(x.strip() for x in lines) == one  # the same words, none cut


def test_a_title_a_result_draws_itself_wraps_between_words_and_its_table_stays_whole():
    text = text_run(["bench latency rounds 10"], 40)
    lines = text.splitlines()
    assert lines[0] == "bench latency (modeled): host time of"
    assert lines[1].strip() == "one round, 10 rounds each"
    table = [line for line in lines if line.startswith("operation")]
    assert table  # the table is still a table: its header row is one line


def test_a_table_cell_wraps_between_words_never_inside_one():
    table = render.fit([["pinned writecombined", "0x7f5b00000000"]], ["kind", "pointer"], "simple", 20)
    assert table.splitlines()[2:] == ["pinned         0x7f5b00000000", "writecombined"]


def test_a_number_and_its_unit_stay_on_one_line():
    assert render.wrap(["launch took 12 ms, moved 64 MiB"], 14) == ["launch took", "    12 ms,", "    moved", "    64 MiB"]


# ------------------------------------------------------------------ 2. sizes
def test_set_pinlimit_shows_a_size_and_keeps_bytes_in_json():
    text = text_run(["set pinlimit 1GB", "set", "set pinlimit 1000000"])
    assert text.splitlines()[0] == "pinlimit = 1 GiB"
    assert "pinlimit = 1 GiB" in text.splitlines()[1:]
    assert text.splitlines()[-1] == "pinlimit = 976.56 KiB (1000000 B)"
    assert Cush(SimBackend()).ok("set pinlimit 1GB")["settings"]["pinlimit"] == 1 << 30


# ------------------------------------------------------------------ 3. CSV
def test_csv_writes_empty_lists_as_empty_cells_lists_joined_and_booleans_as_true_false():
    text = text_run(["set format csv", "alloc pinned 1MB mapped portable as p", "alloc device 1MB as d", "ls"])
    body = text[text.index("name,kind"):]
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO(body))}
    assert rows["p"]["flags"] == "mapped;portable" and rows["d"]["flags"] == ""
    assert rows["p"]["same_pointer"] == "true" and rows["d"]["same_pointer"] == "false"
    assert rows["d"]["host_ptr"] == "" and rows["p"]["registered"] == ""
    assert render.csv_cell([{"a": 1}]) == '[{"a": 1}]'  # records inside a record stay JSON


# ------------------------------------------------------------------ 4. JSON floats
NOISE = re.compile(r"\d\.\d{13,}|\de-\d\d\d")  # 14+ significant digits: binary noise, not a measurement


def test_a_bench_csv_file_is_written_as_set_format_csv_writes(tmp_path):
    out = tmp_path / "b.csv"
    text_run([f"bench memcpy h2d pinned sizes 4KB,1MB reps 1 --csv {out}"])
    rows = list(csv.DictReader(out.open()))
    assert [r["size"] for r in rows] == ["4096", "1048576"] and {r["gated"] for r in rows} == {"true"}
    assert all(len(r["cv"]) <= 6 and len(r["gbps"].replace(".", "").lstrip("0")) <= 4 for r in rows)  # no float noise


def test_json_floats_are_rounded_to_what_was_measured_and_stay_numbers():
    import jsonschema

    from cudashell.output.results import json_schema

    c = Cush(SimBackend())
    lines = []
    for cmd in ["alloc pinned 1MB as p0", "alloc device 1MB as d0", "memcpy p0 d0", "event create a",
                "event create b", "event record a", "memcpy p0 d0 async", "launch increment d0", "event record b",
                "sync", "elapsed a b", "timeline", "profile", "bench overlap streams 1,2"]:
        start = c.out.tell()
        c.shell.execute(cmd)
        c.out.seek(start)
        lines += c.out.read().splitlines()
    schema = json_schema()
    for line in lines:
        assert not NOISE.search(line), line
        jsonschema.validate(json.loads(line), schema)
    alloc = json.loads(lines[1])["result"]
    assert alloc["host_seconds"] == round(c.shell.backend.profile.device_alloc, 9) and isinstance(alloc["host_seconds"], float)
    copy = json.loads(lines[2])["result"]
    assert copy["gbps"] == 42.82


def test_a_buffers_own_values_are_never_rounded():
    c = Cush(SimBackend())
    c.ok("alloc pageable 64 as h")
    c.ok("fill h 0.1 dtype float32")
    assert c.ok("show h count 1")["values"][0] == 0.10000000149011612
    assert render.rounded({"args": [0.1234567891234], "seconds": 1.0000000000000002}) == \
        {"args": [0.1234567891234], "seconds": 1.0}


# ------------------------------------------------------------------ 5. info
def test_info_labels_and_values_line_up_on_every_row():
    text = text_run(["alloc pinned 1MB mapped", "info p0", "context create as a_long_context_name", "info p0"])
    for block in text.split("p0: pinned 1 MiB (1048576 B), flags mapped, ready\n")[1:]:
        rows = [line for line in block.splitlines() if line.startswith("  ") and not line.startswith("    ")]
        starts = {re.match(r"  \S.*?  +(?=\S)", line).end() for line in rows if "0x" in line}
        assert len(rows) >= 8 and len(starts) == 1, rows
        assert any(line.startswith("  kernel in gpu0 ") for line in rows)


# ------------------------------------------------------------------ 6. timeline last
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


# ------------------------------------------------------------------ 7. 32-bit pointers
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


# ------------------------------------------------------------------ 8. what a kernel's bytes count
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


# ------------------------------------------------------------------ 9. expanded
def test_set_expanded_shows_a_table_one_field_a_line_when_asked_or_when_it_does_not_fit():
    made = ["alloc pinned 64MB mapped portable as h", "alloc device 64MB as d"]
    on = text_run(made + ["set expanded on", "ls"], 120)
    assert "-[ RECORD 1 ]" in on and "\nname       | h\n" in on and "\ndevice ptr | same (UVA)\n" in on
    auto_narrow = text_run(made + ["set expanded auto", "ls"], 40)
    assert "-[ RECORD 2 ]" in auto_narrow and all(len(x) <= 40 for x in auto_narrow.splitlines()[-16:])
    auto_wide = text_run(made + ["set expanded auto", "ls"], 120)
    assert "RECORD" not in auto_wide and "name    kind" in auto_wide
    assert "RECORD" not in text_run(made + ["ls"], 40)
    assert Cush(SimBackend()).fails("set expanded sideways")["code"] == "USAGE"

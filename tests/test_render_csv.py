"""CSV output as a CSV reader expects it: empty lists as empty cells, lists `;`-joined, booleans as true/false, every
kind's main content kept (a table's rows, a record's lists and nested records as `key.sub` columns), an empty table
as its header, and `bench … --csv FILE` written as `set format csv` writes."""

from __future__ import annotations

import csv
import io

from cudashell.backends.sim import SimBackend
from cudashell.output import render
from cudashell.output.results import Result

from .conftest import text_run


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


def test_csv_writes_empty_lists_as_empty_cells_lists_joined_and_booleans_as_true_false():
    text = text_run(["set format csv", "alloc pinned 1MB mapped portable as p", "alloc device 1MB as d", "ls"])
    body = text[text.index("name,kind"):]
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO(body))}
    assert rows["p"]["flags"] == "mapped;portable" and rows["d"]["flags"] == ""
    assert rows["p"]["same_pointer"] == "true" and rows["d"]["same_pointer"] == "false"
    assert rows["d"]["host_ptr"] == "" and rows["p"]["registered"] == ""
    assert render.csv_cell([{"a": 1}]) == '[{"a": 1}]'  # records inside a record stay JSON


def test_a_bench_csv_file_is_written_as_set_format_csv_writes(tmp_path):
    out = tmp_path / "b.csv"
    text_run([f"bench memcpy h2d pinned sizes 4KB,1MB reps 1 --csv {out}"])
    rows = list(csv.DictReader(out.open()))
    assert [r["size"] for r in rows] == ["4096", "1048576"] and {r["gated"] for r in rows} == {"true"}
    assert all(len(r["cv"]) <= 6 and len(r["gbps"].replace(".", "").lstrip("0")) <= 4 for r in rows)  # no float noise


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
        "name,kind,size,size_text,flags,registered,host_ptr,device_ptr,same_pointer,state,device,context,shape"]


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

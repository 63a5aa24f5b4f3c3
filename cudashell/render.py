"""How results become text, shared by every result's own view (results.py: each kind's `text()`/`lines()`): tables
fitted to the terminal (tabulate, or its "simple" layout drawn here), lines wrapped, error lines, JSON Lines, CSV
and the notebook's HTML."""

from __future__ import annotations

import json
import math
import re
import textwrap
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .results import Result

from .errors import ShellError

from .sizes import format_size, format_size_exact


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


def device_ptr_text(row: dict) -> str:
    if row["device_ptr"] is None:
        return "-"
    return "same (UVA)" if row["same_pointer"] else row["device_ptr"]


def flags_text(row: dict) -> str:
    words = list(row["flags"])
    if row.get("registered") is not None:
        words.append("registered" + (f"({','.join(row['registered'])})" if row["registered"] else ""))
    return ",".join(words) or "-"


def buffer_line(row: dict) -> str:
    return (f"{row['name']}: {row['kind']} {format_size_exact(row['size'])}  flags {flags_text(row)}  "
            f"host {row['host_ptr'] or '-'}  device {device_ptr_text(row)}")


def timing_note(d: dict) -> str:
    return f"({d['timing']})"


def how_text(d) -> str:
    """What the host call did: blocked, or returned at once; and how that is known on a GPU."""
    how = (f"host blocked {fmt_seconds(d['host_seconds'])}" if d["blocking"]
           else f"host returned after {fmt_seconds(d['host_seconds'])}, did not block")
    return how + (" (as documented: too quick to observe)" if d.get("blocking_basis") == "rule" else "")


def pending_notes(d) -> list[str]:
    """The lesson of a host touching memory the GPU is still working on: say so, don't refuse it."""
    return [f"  note: {name} is pending on stream {', '.join(streams)}: the GPU may still read or change it "
            "(`sync` first to see its final bytes)" for name, streams in (d.get("pending") or {}).items()]


def gpu_time(d) -> str:
    return fmt_seconds(d["seconds"]) if d["seconds"] is not None else "(GPU time known after sync)"


POINTER = re.compile(r"^(0x[0-9a-f]+|same \(UVA\)|-)$")


def _whole(column) -> bool:
    """A column of pointers: never wrapped (half a pointer cannot be copied)."""
    return all(POINTER.match(str(c)) for c in column)


def fit(rows, headers, tablefmt: str, width: int, shorter=None, colalign=None) -> str:
    """A table no wider than the terminal. First the `shorter()` form of the rows (columns abbreviated: a size
    without its exact bytes), then long cells wrap between words — pointers never. `colalign` given, the cells are
    taken as written (tabulate's guessing of numbers costs more than the rest of a command)."""
    def table(rows, **kw):
        if colalign is not None:
            if tablefmt == "simple" and not kw and set(colalign) == {"left"}:
                text = _simple_left(rows, headers)
                if text is not None:
                    return text
            kw.update(colalign=colalign, disable_numparse=True)
        from tabulate import tabulate  # here: 25–140 ms to import, and many commands never draw a table

        return tabulate(rows, headers, tablefmt, **kw)

    text = table(rows)
    if not width or max(map(len, text.splitlines())) <= width:
        return text
    if shorter is not None:
        rows, headers = shorter()
        text = table(rows)
    columns = list(zip(*rows)) if rows else []
    for limit in (24, 18, 14, 10, 8):
        if max(map(len, text.splitlines())) <= width:
            break
        text = table(rows, maxcolwidths=[None if _whole(c) else limit for c in columns])
    return text


def _simple_left(rows, headers) -> str | None:
    """tabulate's "simple" table of left-aligned cells taken as written, byte for byte (a test holds it to tabulate):
    `ls` is typed often and tabulate took 250 µs of its 290 on the H100 machine, finding each column's type. None
    where a cell is not plain one-line ASCII text (tabulate then measures display widths)."""
    heads = list(headers)
    try:
        text = "".join(heads) + "".join(map("".join, rows))
    except TypeError:  # a cell that is not text
        return None
    if not (text.isascii() and text.isprintable()) or any(len(r) != len(heads) for r in rows):
        return None
    cells = [list(map(str.strip, row)) for row in rows]
    columns = zip(*cells) if cells else [()] * len(heads)
    widths = [max(len(h) + 2, max(map(len, c), default=0)) for h, c in zip(heads, columns)]
    line = "  ".join(f"{{:<{w}}}" for w in widths).format
    return "\n".join([line(*heads).rstrip(), "  ".join("-" * w for w in widths),
                      *(line(*row).rstrip() for row in cells)])


def wrap(lines: list[str], width: int) -> list[str]:
    """Lines longer than the terminal break between words, continued indented — never inside a number or a
    pointer (a word longer than the line stays whole)."""
    if not width:
        return lines
    out = []
    for line in lines:
        for part in line.split("\n"):
            if len(part) <= width:
                out.append(part)
                continue
            indent = " " * (len(part) - len(part.lstrip()) + 4)
            out += textwrap.wrap(part, width, subsequent_indent=indent, break_long_words=False,
                                 break_on_hyphens=False) or [part]
    return out


def access_lines(a) -> list[str]:
    """show-access, in the style of GPU-Puzzles: for each element touched, which threads read and wrote it
    (threads as `x` or `x,y`, with `bN:` for their block)."""
    if not a:
        return []
    out = []
    for name, buf in a.items():
        rows = [[f"{name}[{k}]", " ".join(c["read"]) or "-", " ".join(c["write"]) or "-"]
                for k, c in buf["elements"].items()]
        out += ["", f"  {name} ({buf['element_size']}-byte elements):",
                fit(rows, ["element", "read by", "written by"], "simple", 0)]
    return out


MEMORY_NAMES = {"device": "device memory", "managed": "managed memory", "zero-copy": "mapped host memory (over the bus)",
                "peer": "another GPU's memory (over the link)"}


def counts_lines(c) -> list[str]:
    """What a user kernel moved, as the simulator counted it: per warp request, 32-byte sectors."""
    if not c:
        return []
    out = []
    for kind, g in c["global"].items():
        out.append(f"  {MEMORY_NAMES.get(kind, kind)}: {g['requests']} requests, {g['sectors']} sectors = "
                   f"{g['sectors_per_request']:.1f} sectors a request: {g['pattern']} "
                   f"({100 * g['efficiency']:.0f}% of {format_size(g['bytes'])} moved was used)")
    s = c["shared"]
    if s["requests"]:
        ways = s["conflict_ways"]
        out.append(f"  shared memory: {s['requests']} requests, {s['wavefronts']} wavefronts"
                   + (" (no bank conflicts)" if ways <= 1.0 else f" ({ways:.1f}-way bank conflicts on average)"))
    if c["atomics"]:
        out.append(f"  atomics: {c['atomics']} warp requests")
    out.append(f"  warp instructions: {c['warp_instructions']} (statements × active warps)")
    return out


def nvprof_time(s: float) -> str:
    """A duration as nvprof prints it: five significant digits in s, ms, us or ns (291.24ms, 6.6720us, 222ns)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            v = s / scale
            return f"{v:.{max(0, 4 - len(str(int(v))) + 1)}f}{unit}"
    return f"{s * 1e9:.0f}ns"


def host_table(rows) -> list[list]:
    """One row per (node, GPU): both directions side by side; near/far where the GPU's node is known."""
    cells = {}
    for r in rows:
        where = "not bound" if r["node"] is None else f"node {r['node']}" + (
            "" if r["near"] is None else " (near)" if r["near"] else " (far)")
        cells.setdefault((where, r["gpu"]), {})[r["to_device"]] = f"{r['gbps']:.1f}"
    return [[where, gpu, c.get(True, "-"), c.get(False, "-")] for (where, gpu), c in cells.items()]


PROSE = frozenset({"message", "echo", "say", "help", "help_command", "settings", "run", "quit"})  # no CSV of these


def human(result: Result, tablefmt: str = "simple", width: int = 0) -> str:
    if result.as_json:
        return json.dumps(_json_safe(result.data), ensure_ascii=False)
    return "\n".join(result.lines(tablefmt, width))


LABEL_COLOURS = {"measured": "#1a7f37", "modeled": "#0969da"}


def html(result: Result) -> str:
    """A result for a notebook: its tables as HTML tables, its other lines as text, pointers whole (no width to
    fit), and whether its times were measured or modeled as a label at its head."""
    lines = result.lines("html", 0)
    parts = [line if line.lstrip().startswith("<table") else f"<div>{escape(line)}</div>" for line in lines]
    label = result.data.get("timing")
    badge = (f'<span style="background:{LABEL_COLOURS[label]};color:white;border-radius:3px;padding:0 4px;'
             f'font-size:smaller">{label}</span> ') if label in LABEL_COLOURS else ""
    return (f'<div class="cudashell cush-{result.kind}" style="font-family:monospace;white-space:pre-wrap">'
            f"{badge}{''.join(parts)}</div>")


def where(file: str | None, line: int | None, col: int | None) -> str:
    if file is not None:
        return f"{file}:{line}:{col or 1}"
    return f"col {col}" if col else ""


def error_line(e: ShellError, file: str | None = None, line: int | None = None) -> str:
    """One line, always: a message that quotes a multi-line command has its line breaks shown as ⏎."""
    loc = where(file, line, e.col)
    hint = f" — hint: {e.hint}" if e.hint else ""
    return f"{loc + ': ' if loc else ''}{e.code}: {e.message}{hint}".replace("\r", "").replace("\n", " ⏎ ")


def _json_safe(x):
    """JSON has no NaN or Infinity: such floats (a GPU computes them freely) become the strings JS would print."""
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def csv_text(result: Result) -> str:
    """A result as CSV: its table (the first list of records in it: rows, buffers, entries…), else one record of
    its plain fields. Nested values are written as JSON."""
    import csv
    import io

    data = result.data
    rows = next((v for v in data.values() if isinstance(v, list) and v and all(isinstance(r, dict) for r in v)),
                None)
    if rows is None:
        rows = [{k: v for k, v in data.items() if not isinstance(v, (list, dict))}]
    fields = list(dict.fromkeys(k for r in rows for k in r))
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: json.dumps(_json_safe(v), ensure_ascii=False) if isinstance(v, (list, dict)) else v
                    for k, v in r.items()})
    return out.getvalue().rstrip("\n")


def json_line(cmd: str, result: Result | None, error: ShellError | None = None, file: str | None = None,
              line: int | None = None, wall: float | None = None, explained: list | None = None) -> str:
    err = None
    if error is not None:
        err = {"code": error.code, "message": error.message, "hint": error.hint, "file": file, "line": line,
               "col": error.col or (1 if file is not None else None)}  # where the text says file:line:1
    obj = {"cmd": cmd, "ok": error is None, "kind": result.kind if result is not None else None, "error": err,
           "result": result.data if result is not None else None}
    if wall is not None:
        obj["wall_seconds"] = wall
    if explained:
        obj["explain"] = {"c": explained[0], "driver": explained[1]}
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_json_safe(obj), ensure_ascii=False, allow_nan=False)

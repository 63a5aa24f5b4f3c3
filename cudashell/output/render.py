"""How results become text, shared by every result's own view (results.py: each kind's `text()`/`lines()`): tables
fitted to the terminal (tabulate, or its "simple" layout drawn here), lines wrapped, error lines, JSON Lines, CSV
and the notebook's HTML."""

from __future__ import annotations

import json
import math
import re
from contextvars import ContextVar
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .results import Result

from ..errors import ShellError
from ..sizes import format_size, format_size_exact

# C0 controls but line feed and tab, DEL, C1 controls (U+009B is CSI to a terminal as ESC [ is)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """Text as a terminal must show it: each control character written out (`\\x1b`, `\\r`), not obeyed. What
    users name — `echo`/`say`/`show "…"` text, buffer and file names, a kernel's printf, a submission's output in
    the grade table — could otherwise clear the screen and draw a forged table (ESC [2J), ring, or overwrite what
    was shown (\\r, backspace). Line breaks and tabs stay. The text views (human, error_line) end here."""
    if CONTROL.search(text) is None:
        return text
    return CONTROL.sub(lambda m: "\\r" if m.group() == "\r" else f"\\x{ord(m.group()):02x}", text)


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


class Whole(str):
    """Text already laid out for the terminal — a fitted table, a chart's rows — that `wrap` leaves as it is:
    wrapping it again would break its columns."""


class Markup(Whole):
    """HTML the renderer made itself: a table `fit` drew in tabulate's `html` format, which escapes every cell. The
    notebook passes it through as it is; every other line is text, and escaped (html)."""


# `set expanded`, for the one `human()` call that draws a result: fit() reads it (results' lines() take no setting)
EXPANDED: ContextVar[str] = ContextVar("expanded", default="off")


def _whole(column) -> bool:
    """A column of pointers: never wrapped (half a pointer cannot be copied)."""
    return all(POINTER.match(str(c)) for c in column)


def _cell(c, limit: int | None):
    """A cell of at most `limit` characters a line, wrapped as text is (`fill`), and broken also after a comma or
    an opening bracket inside a word (`mapped,portable`, `registered(mapped)`)."""
    s = str(c)
    if limit is None or display_width(s) <= limit:
        return c
    return "\n".join(fill(s, limit, inside_words=True))


def fit(rows, headers, tablefmt: str, width: int, shorter=None, colalign=None) -> str:
    """A table no wider than the terminal. First the `shorter()` form of the rows (columns abbreviated: a size
    without its exact bytes), then long cells wrap between words — pointers never. `colalign` given, the cells are
    taken as written (tabulate's guessing of numbers costs more than the rest of a command). `set expanded on`
    draws every table one field a line; `auto` does so for a table still too wide once abbreviated."""
    def table(rows, **kw):
        if colalign is not None:
            if tablefmt == "simple" and not kw and set(colalign) == {"left"}:
                text = _simple_left(rows, headers)
                if text is not None:
                    return text
            kw.update(colalign=colalign, disable_numparse=True)
        from tabulate import (
            tabulate,  # here: 25–140 ms to import, and many commands never draw a table
        )

        return tabulate(rows, headers, tablefmt, **kw)

    def fits(text) -> bool:
        return not width or max(map(display_width, text.splitlines()), default=0) <= width

    mode = EXPANDED.get()
    if mode == "on" and rows:
        return expanded(rows, headers, width)
    laid_out = Markup if tablefmt == "html" else Whole  # tabulate's html escapes each cell
    text = table(rows)
    if fits(text):
        return laid_out(text)
    full = rows
    if shorter is not None:
        rows, headers = shorter()
        text = table(rows)
        if fits(text):
            return laid_out(text)
    if mode == "auto" and rows:
        return expanded(full, headers, width)
    columns = list(zip(*rows)) if rows else []
    for limit in (24, 18, 14, 10, 8):
        if fits(text):
            break
        limits = [None if _whole(c) else limit for c in columns]
        text = table([[_cell(c, k) for c, k in zip(row, limits)] for row in rows])
    return laid_out(text)


def expanded(rows, headers, width: int) -> Whole:
    """pgcli's expanded display (`\\x`): each row as a record, one `field | value` a line, values wrapped
    between words under their column."""
    names = [str(h) for h in headers]
    left = max(map(len, names), default=0)
    room = max(width - left - 3, 16) if width else 0
    body = []
    for i, row in enumerate(rows, 1):
        lines = []
        for name, cell in zip(names, row):
            parts = wrap(str(cell).split("\n"), room, indent="")
            lines += [f"{name if j == 0 else '':<{left}} | {p}".rstrip() for j, p in enumerate(parts)]
        body.append((f"-[ RECORD {i} ]", lines))
    rule = max((len(x) for _, lines in body for x in lines), default=0)
    rule = min(rule, width) if width else rule
    out = []
    for title, lines in body:
        out += [title + "-" * max(rule - len(title), 0), *lines]
    return Whole("\n".join(out))


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


def wrap(lines: list[str], width: int, indent: str | None = None) -> list[str]:
    """Lines longer than the terminal break between words (`fill`), continued indented by `indent` (by default 4
    more than the line's own indentation); `Whole` text (tables, charts) is left as it is."""
    if not width:
        return lines
    out = []
    for line in lines:
        if isinstance(line, Whole):
            out.append(line)
            continue
        for part in line.split("\n"):
            if display_width(part) <= width:
                out.append(part)
                continue
            out += fill(part, width, " " * (len(part) - len(part.lstrip()) + 4) if indent is None else indent)
    return out


def fill(text: str, width: int, indent: str = "", inside_words: bool = False) -> list[str]:
    """One line's words filled into lines of `width` display columns (a Chinese character takes two) by the shell's
    rules: never inside a word, a number or a pointer (a word longer than the line stays whole), a number kept with
    its unit (`64 MiB`), a command in backticks kept whole (a student types what they see) and an opening bracket
    with the word after it. Text without spaces (Chinese) breaks between its wide characters, but never before
    closing punctuation (`，` `。` `）`) nor after opening (`（`): no line starts with a comma. `inside_words`: a break
    may also come after a comma or a bracket inside a word (a table's narrow cells). Continued lines start with
    `indent`."""
    room = width - display_width(indent)
    glued = CODE_SPAN.sub(lambda m: m[0].replace(" ", GLUE) if display_width(m[0]) <= room else m[0],
                          UNIT_SPACE.sub(GLUE, text.expandtabs()))
    lines: list[str] = []
    line, used = "", 0  # the line being filled, its indent included, and its display width
    for chunk in _chunks(glued, inside_words):
        space, w = chunk.isspace(), display_width(chunk)
        if space and lines and not line.strip():
            continue  # a continued line starts at its indent
        if used + w > width and line.strip():
            lines.append(line.rstrip())
            line, used = (indent, display_width(indent)) if space else (indent + chunk, display_width(indent) + w)
            continue
        line, used = line + chunk, used + w
    if line.strip() or not lines:
        lines.append(line.rstrip())
    return [x.replace(GLUE, " ") for x in lines if x] or [text]


def display_width(text: str) -> int:
    """Columns `text` takes on a terminal (wcwidth: a Chinese character two); characters it cannot size count one."""
    if text.isascii():
        return len(text)
    from wcwidth import wcswidth

    w = wcswidth(text.replace(GLUE, " "))
    return w if w >= 0 else len(text)


def _chunks(text: str, inside_words: bool) -> list[str]:
    """The pieces a line may break between: runs of spaces, and words cut where a line may break without a space
    (between wide characters, by `_may_break`; after a comma or a bracket inside a word where asked) — never
    inside a command in backticks."""
    out = []
    for piece in SPACES.split(text):
        if not piece or piece.isspace():
            out += [piece] if piece else []
            continue
        for part in INSIDE_WORD.split(piece) if inside_words else [piece]:
            start, quoted = 0, False
            for i, ch in enumerate(part):
                if i and not quoted and _may_break(part[i - 1], ch):
                    out.append(part[start:i])
                    start = i
                quoted ^= ch == "`"
            out.append(part[start:])
    return [c for c in out if c]


def _may_break(before: str, after: str) -> bool:
    """Whether a line may break between two characters with no space between them: beside a wide (CJK) character,
    where the kinsoku rule allows it (not before closing punctuation, not after opening)."""
    if before.isascii() and after.isascii() or after in NO_LINE_START or before in NO_LINE_END:
        return False
    from wcwidth import wcwidth

    return wcwidth(before) == 2 or wcwidth(after) == 2


# a number and its unit (`64 MiB`, `1.2 ms`, `7.58 GB/s`) are one word: held together by a space the filler keeps
UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:[KMGT]i?B|B|[µmn]?s|GB/s|bytes|elements)(?![\w/]))")
GLUE = "\ue000"  # a private-use character: never in what the shell prints
CODE_SPAN = re.compile(r"`[^`\n]+`")  # a command as the text shows it: one word, where it fits a line
SPACES = re.compile(r"(\s+)")
# where a word may break in a narrow cell: after a comma (not one between digits) or a bracket that follows a letter
INSIDE_WORD = re.compile(r"(?<=,)(?=[^\d\s])|(?<=\w\()(?=[^\s)])")
NO_LINE_START = set("，。、；：！？）」』》〉】〕”’…—·%,.;:!?)]}")  # closing punctuation stays with what it closes
NO_LINE_END = set("（「『《〈【〔“‘([{")


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
        if buf.get("more"):
            out.append(f"  … {buf['more']} more element{'s' * (buf['more'] != 1)} of {name} touched")
    return out


MEMORY_NAMES = {"device": "device memory", "managed": "managed memory", "zero-copy": "mapped host memory (over the bus)",
                "peer": "another GPU's memory (over the link)"}


def plural(n, one: str, many: str | None = None) -> str:
    """`1 request`, `2 requests` (`many` where adding an s is wrong: `address`, `addresses`)."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def counts_lines(c) -> list[str]:
    """What a user kernel moved, as the simulator counted it: per warp request, 32-byte sectors."""
    if not c:
        return []
    out = []
    for kind, g in c["global"].items():
        out.append(f"  {MEMORY_NAMES.get(kind, kind)}: {plural(g['requests'], 'request')}, "
                   f"{plural(g['sectors'], 'sector')} = "
                   f"{g['sectors_per_request']:.1f} sectors a request: {g['pattern']} "
                   f"({100 * g['efficiency']:.0f}% of {format_size(g['bytes'])} moved was used)")
    s = c["shared"]
    if s["requests"]:
        ways = s["conflict_ways"]
        out.append(f"  shared memory: {plural(s['requests'], 'request')}, {plural(s['wavefronts'], 'wavefront')}"
                   + (" (no bank conflicts)" if ways <= 1.0 else f" ({ways:.1f}-way bank conflicts on average)"))
    k = c.get("constant")
    if k and k["requests"]:
        per = k["addresses_per_request"]
        out.append(f"  constant memory: {plural(k['requests'], 'request')}, "
                   f"{plural(k['addresses'], 'distinct address', 'distinct addresses')}"
                   + (" (every request a broadcast)" if per <= 1.0 else
                      f" ({per:.1f} a request: the constant cache serves them one after another)"))
    if c.get("readonly_loads"):
        out.append(f"  read-only data path (__ldg, const __restrict__): {c['readonly_loads']} of the "
                   f"{c['loads']} warp loads")
    if c["atomics"]:
        out.append(f"  atomics: {plural(c['atomics'], 'warp request')}")
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


def human(result: Result, tablefmt: str = "simple", width: int = 0, expanded: str = "off") -> str:
    """A result as the terminal shows it: its lines, each wrapped between words (a result that draws its own
    lines — a table, a bench — has its prose wrapped here too); `expanded`: the `set expanded` mode of its tables."""
    if result.as_json:
        return json.dumps(_json_safe(rounded(result.data)), ensure_ascii=False)
    token = EXPANDED.set(expanded)
    try:
        return visible("\n".join(wrap(result.lines(tablefmt, width), width)))
    finally:
        EXPANDED.reset(token)


LABEL_COLOURS = {"measured": "#1a7f37", "modeled": "#0969da"}


def html(result: Result) -> str:
    """A result for a notebook: its tables as HTML tables, its other lines as text, pointers whole (no width to
    fit), and whether its times were measured or modeled as a label at its head. Only the tables `fit` made are
    markup (Markup); every other line is escaped, whatever it holds: `echo <table><img …>`, a kernel's printf."""
    lines = result.lines("html", 0)
    parts = [line if isinstance(line, Markup) else f"<div>{escape(visible(line))}</div>" for line in lines]
    label = result.data.get("timing")
    badge = (f'<span style="background:{LABEL_COLOURS[label]};color:white;border-radius:3px;padding:0 4px;'
             f'font-size:smaller">{label}</span> ') if label in LABEL_COLOURS else ""
    return (f'<div class="cudashell cush-{result.kind}" style="font-family:monospace;white-space:pre-wrap">'
            f"{badge}{''.join(parts)}</div>")


def where(file: str | None, line: int | None, col: int | None) -> str:
    if file is not None:
        return f"{file}:{line}:{col or 1}"
    return f"col {col}" if col else ""


def error_text(e: ShellError, file: str | None = None, line: int | None = None) -> str:
    """One line, always: a message that quotes a multi-line command has its line breaks shown as ⏎. As the error
    said it (a grade's JSON and JUnit keep it so); a terminal is shown its error_line."""
    loc = where(file, line, e.col)
    hint = f" — hint: {e.hint}" if e.hint else ""
    return f"{loc + ': ' if loc else ''}{e.code}: {e.message}{hint}".replace("\r", "").replace("\n", " ⏎ ")


def error_line(e: ShellError, file: str | None = None, line: int | None = None) -> str:
    """The error's one line as a terminal shows it: its control characters written out (visible)."""
    return visible(error_text(e, file, line))


def expected_line(e: ShellError, file: str | None = None, line: int | None = None) -> str:
    """An error the script's next `expect error` names: part of what it shows, not a failure."""
    return f"as expected: {error_line(e, file, line)}"


def _decimals(n: int):
    return lambda x: round(x, n)


def _significant(n: int):
    return lambda x: float(f"{x:.{n}g}")


# A float in JSON and CSV carries what was measured, not binary noise (6.000000000000005e-05): times to the
# nanosecond (CUDA events and CUPTI resolve no finer), in whatever unit the field has; rates and ratios to 4
# significant digits (runs vary by more than 0.1%); a chart's scale to 12. Fields of the user's own values (a
# buffer's elements, kernel arguments, settings) are never rounded: the walk does not enter them.
PRECISION = {
    **dict.fromkeys(("seconds", "host_seconds", "held_seconds", "busy_seconds", "gpu_seconds", "wall_seconds", "wall",
                     "at", "start", "end", "issued", "total", "avg", "min", "max", "median", "p10", "p90",
                     "alloc_s_per_gib", "free_s_per_gib"), _decimals(9)),
    "ms": _decimals(6),
    **dict.fromkeys(("us_per_copy", "median_us", "p10_us", "p90_us", "zc_kernel_us", "dev_kernel_us", "zc_step_us",
                     "dev_step_us"), _decimals(3)),
    **dict.fromkeys(("gbps", "peak", "speedup", "percent", "percent_of_peak", "efficiency",
                     "sectors_per_request", "conflict_ways", "addresses_per_request"), _significant(4)),
    "cv": _decimals(4),  # a spread of 0.01% is below what repeated runs tell apart (and 1e-15 is float noise)
    "per_cell": _significant(12),
}
USERS_OWN = frozenset({"args", "values", "settings", "profile"})


PLAIN = frozenset({str, int, bool, type(None)})  # values `rounded` returns as they are, told apart by their exact type


def rounded(x, key: str | None = None):
    """`x` with each float of a field in PRECISION rounded to that field's precision (numbers stay numbers). A
    string, int or None in a dict or list is taken as it is without a call (every command's JSON line walks its
    result: most values are such)."""
    if isinstance(x, float):
        how = PRECISION.get(key)
        return how(x) if how is not None and math.isfinite(x) else x
    if isinstance(x, dict):
        return {k: v if type(v) in PLAIN or k in USERS_OWN else rounded(v, k) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [v if type(v) in PLAIN else rounded(v, key) for v in x]
    return x


def _json_safe(x):
    """JSON has no NaN or Infinity: such floats (a GPU computes them freely) become the strings JS would print."""
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def csv_cell(v):
    """One CSV cell as a CSV reader expects it: booleans `true`/`false`, nothing for null or an empty list, a list
    of plain values joined by `;`, anything else nested as JSON."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list) and not any(isinstance(x, (list, dict)) for x in v):
        return ";".join(str(csv_cell(x)) for x in v)
    if isinstance(v, (list, dict)):
        return json.dumps(_json_safe(v), ensure_ascii=False)
    return "" if v is None else _json_safe(v)


def csv_text(result: Result) -> str:
    """A result as CSV. A table — a list of records that leads its data (the first field that is a list or a
    mapping; of several such lists side by side, the first with rows) — as its rows; any other result as one
    record of all its fields, lists of plain values `;`-joined and mappings a level down as `key.sub` columns
    (`buffer.name`, `checksums.h0`). Cells as `csv_cell` writes them, floats rounded as in JSON."""
    data = rounded(result.data)
    tables = _tables(type(result))
    lead = []
    for k, v in data.items():
        if isinstance(v, (list, dict)):
            if k not in tables:
                break
            lead.append(k)
    if lead:
        key = next((k for k in lead if data[k]), lead[0])
        return _csv(data[key], tables[key]).rstrip("\n")
    record = {}
    for k, v in data.items():
        if isinstance(v, dict):
            record.update({f"{k}.{sub}": x for sub, x in v.items()})
        else:
            record[k] = v
    return _csv([record]).rstrip("\n")


_TABLES: dict[type, dict[str, list[str]]] = {}


def _tables(cls) -> dict[str, list[str]]:
    """The fields of a kind's Data that are lists of records, each with its record's keys (an empty table's
    header), read from the Data's types: an empty list says nothing of what it would hold."""
    if cls not in _TABLES:
        import types
        import typing

        found = {}
        for k, t in typing.get_type_hints(cls.Data).items():
            for t in typing.get_args(t) if typing.get_origin(t) in (typing.Union, types.UnionType) else (t,):
                item = typing.get_args(t)[0] if typing.get_origin(t) is list else None
                if item is not None and typing.is_typeddict(item):
                    found[k] = list(typing.get_type_hints(item))
        _TABLES[cls] = found
    return _TABLES[cls]


def csv_records(rows: list[dict]) -> str:
    """Records as CSV, a column for every key any of them has (an empty cell where one lacks it), cells as
    `csv_cell` writes them, floats rounded as in JSON: `set format csv` and a bench's `--csv FILE` alike."""
    return _csv(rounded(rows))


def _csv(rows: list[dict], columns: list[str] = ()) -> str:
    """Rounded records as CSV; `columns`: the header where there are no rows to take it from."""
    import csv
    import io

    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(dict.fromkeys(k for r in rows for k in r)) or list(columns),
                       restval="", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: csv_cell(v) for k, v in r.items()})
    return out.getvalue()


def json_line(cmd: str, result: Result | None, error: ShellError | None = None, file: str | None = None,
              line: int | None = None, wall: float | None = None, explained: list | None = None) -> str:
    err = None
    if error is not None:
        err = {"code": error.code, "message": error.message, "hint": error.hint, "file": file, "line": line,
               "col": error.col or (1 if file is not None else None)}  # where the text says file:line:1
    obj = {"cmd": cmd, "ok": error is None, "kind": result.kind if result is not None else None, "error": err,
           "result": rounded(result.data) if result is not None else None}
    if wall is not None:
        obj["wall_seconds"] = rounded(wall, "wall_seconds")
    if explained:
        obj["explain"] = {"c": explained[0], "driver": explained[1]}
    try:
        return JSON_LINE.encode(obj)
    except ValueError:
        return JSON_LINE.encode(_json_safe(obj))


# json.dumps with options builds an encoder per call; one line per command uses this one
JSON_LINE = json.JSONEncoder(ensure_ascii=False, allow_nan=False)

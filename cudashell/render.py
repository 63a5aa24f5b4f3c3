"""The one place results become text: human lines and tables (tabulate), or JSON Lines."""

from __future__ import annotations

import json
import math
import re
import textwrap
from html import escape
from dataclasses import dataclass
from typing import Callable

from .errors import ShellError
from .launchdims import dim3, shape_text
from .sizes import format_size, format_size_exact
from .results import Result


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


def _device_ptr_text(row: dict) -> str:
    if row["device_ptr"] is None:
        return "-"
    return "same (UVA)" if row["same_pointer"] else row["device_ptr"]


def _flags_text(row: dict) -> str:
    words = list(row["flags"])
    if row.get("registered") is not None:
        words.append("registered" + (f"({','.join(row['registered'])})" if row["registered"] else ""))
    return ",".join(words) or "-"


def _buffer_line(row: dict) -> str:
    return (f"{row['name']}: {row['kind']} {format_size_exact(row['size'])}  flags {_flags_text(row)}  "
            f"host {row['host_ptr'] or '-'}  device {_device_ptr_text(row)}")


def _timing(d: dict) -> str:
    return f"({d['timing']})"


def _alloc(d):
    return [f"{_buffer_line(d['buffer'])}  — {d['call']} {fmt_seconds(d['seconds'])} {_timing(d)}"]


def _how(d) -> str:
    """What the host call did: blocked, or returned at once; and how that is known on a GPU."""
    how = (f"host blocked {fmt_seconds(d['host_seconds'])}" if d["blocking"]
           else f"host returned after {fmt_seconds(d['host_seconds'])}, did not block")
    return how + (" (as documented: too quick to observe)" if d.get("blocking_basis") == "rule" else "")


def pending_notes(d) -> list[str]:
    """The lesson of a host touching memory the GPU is still working on: say so, don't refuse it."""
    return [f"  note: {name} is pending on stream {', '.join(streams)}: the GPU may still read or change it "
            "(`sync` first to see its final bytes)" for name, streams in (d.get("pending") or {}).items()]


def _copy(d):
    how = _how(d)
    rate = f" = {d['gbps']:.2f} GB/s" if d["gbps"] else ""
    where = f" on stream {d['stream']}" if d["async"] else ""
    return [f"memcpy {d['direction']} {d['src_part']} → {d['dst_part']}: {format_size_exact(d['bytes'])} in "
            f"{_gpu_time(d)}{rate}{where}; {d['call']}, {how} {_timing(d)}"]


def _gpu_time(d) -> str:
    return fmt_seconds(d["seconds"]) if d["seconds"] is not None else "(GPU time known after sync)"


def _sync(d):
    out = [f"sync {d['what']}: host waited {fmt_seconds(d['host_seconds'])} {_timing(d)}"]
    for e in d["completed"]:
        rate = f" = {e['bytes'] / e['seconds'] / 1e9:.2f} GB/s" if e["seconds"] and e["op"].startswith("memcpy") else ""
        out.append(f"  finished: {e['op']} on stream {e['stream']}, {format_size(e['bytes'])} in "
                   f"{fmt_seconds(e['seconds'])}{rate}")
    return out


def _memset(d):
    return [f"memset {d['part']} = {d['value']}: {format_size_exact(d['bytes'])} in {_gpu_time(d)}; "
            f"{d['call']}, {_how(d)} {_timing(d)}"]


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


def _ls(d, tablefmt, width=0):
    if not d["buffers"]:
        return ["no buffers"]
    gpus = len({r["device"] for r in d["buffers"]}) > 1 or any(r["device"] for r in d["buffers"])
    ctxs = any(r["context"] != f"gpu{r['device']}" for r in d["buffers"])  # a context of `context create`'s
    rows = [[r["name"], r["kind"], format_size_exact(r["size"]), _flags_text(r), r["host_ptr"] or "-",
             _device_ptr_text(r), r["state"]] + ([str(r["device"]) if r["kind"] == "device" else "-"] if gpus else [])
            + ([r["context"]] if ctxs else []) for r in d["buffers"]]
    headers = ["name", "kind", "size", "flags", "host ptr", "device ptr", "state"] + (["GPU"] if gpus else []) \
        + (["context"] if ctxs else [])
    def short():
        return [[r[0], r[1], format_size(d["buffers"][i]["size"]), *r[3:]] for i, r in enumerate(rows)], headers

    return [fit(rows, headers, tablefmt, width, short, ["left"] * len(headers))]


def _info(d):
    drv = d["driver"]
    flags = drv["host_flags"]
    flags_text = f"{flags} ({'|'.join(drv['host_flag_names']) or 'none'})" if isinstance(flags, int) else flags
    mt = drv["memory_type"]
    return [f"{d['name']}: {d['kind']} {d['size_text']}, flags {_flags_text(d)}, {d['state']}",
            f"  host pointer       {d['host_ptr'] or '-'}   (host-accessible: {'yes' if d['host_accessible'] else 'no'})",
            f"  device pointer     {d['device_ptr'] or '-'}   (device-accessible: "
            f"{'yes' if d['device_accessible'] else 'no'}{', same as host: UVA' if d['same_pointer'] else ''})",
            f"  memory type        {mt}   (cuPointerGetAttribute MEMORY_TYPE)",
            f"  is managed         {drv['is_managed']}",
            f"  host flags         {flags_text}   (cuMemHostGetFlags)",
            f"  host→device ptr    {drv['host_device_ptr']}   (cuMemHostGetDevicePointer)",
            f"  device             {drv['device']}"] + [
            f"  {label:<18} {drv[key]}   (cuMemRangeGetAttribute)" for key, label in
            (("read_mostly", "read mostly"), ("preferred_location", "preferred at"),
             ("last_prefetch_location", "last prefetched to")) if key in drv] + [
            f"  kernel in {r['context']:<9} {r['reaches']}" + ("" if r["reaches"].startswith("0x") else
                                                            "   (it cannot use it there)") for r in d["reach"]]


def _show(d):
    values = [str(v) for v in d["values"]]
    if len(values) > 64:  # long output is elided in the middle; --json has every value
        values = values[:48] + [f"… {len(values) - 56} more …"] + values[-8:]
    shown = " ".join(values)
    more = f"  … ({d['count']} of {d['elements']} shown)" if d["count"] < d["elements"] else ""
    return [f"{d['name']} [{d['dtype']}] @{d['offset']}: {shown}{more}"] + pending_notes(d)


def _compare(d):
    a, b = d["a_part"], d["b_part"]
    if d["equal"]:
        line = f"{a} == {b} ({format_size_exact(d['bytes'])})"
    elif "offset" in d:
        line = f"{a} != {b}: first difference at byte {d['offset']}: {d['a_byte']} vs {d['b_byte']}"
    else:
        line = (f"{a} != {b}: the first {d['bytes']} bytes match but the sizes differ "
                f"({d['sizes'][0]} vs {d['sizes'][1]})")
    return [line] + pending_notes(d)


def _launch(d):
    part = f" ({d['computed']} computed: grid×block < n)" if d["builtin"] and d["computed"] < d["n"] else ""
    shared = f", {d['shared']}" if d["shared"] else ""
    n = f", n={d['n']}" if d["builtin"] and d["kernel"] != "spin" else ""
    shape = f"{shape_text(dim3(d['grid']))}, {shape_text(dim3(d['block']))}"
    return [f"launch {d['kernel']}<<<{shape}{shared}>>>({', '.join(map(str, d['args']))}{n})"
            f"{part} on stream {d['stream']}: kernel {_gpu_time(d)}, "
            f"{_how(d)} {_timing(d)}"] + _counts(d.get("counts")) + _access(d.get("access"))


def _access(a) -> list[str]:
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


def _counts(c) -> list[str]:
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


def _kernel_output(d) -> list[str]:
    """A user kernel's printf lines (flushed when it completes, as the GPU's buffer is) and racecheck's warnings."""
    out = list(d["lines"])
    if d["dropped"]:
        out.append(f"({d['dropped']} more printf lines dropped: the buffer holds {len(d['lines'])})")
    return out + [f"warning: {w}" for w in d["warnings"]]


def _timeline(d):
    if not d["rows"]:
        return ["no finished GPU work in the trace yet" + (f" ({d['pending']} still running)" if d["pending"] else "")]
    width = max(len(r["name"]) for r in d["rows"])
    source = "" if d.get("source", d["timing"]) == d["timing"] else f": {d['source']}"
    out = [f"timeline of {d['ops']} operations, {fmt_seconds(d['start'])} … {fmt_seconds(d['end'])} "
           f"({d['timing']}{source}); one column = {fmt_seconds(d['per_cell'])}"]
    out += [f"  {r['name']:<{width}} |{r['cells']}|" for r in d["rows"]]
    out.append("  H h2d  D d2h  C d2d  M memset  K kernel  P prefetch  # two at once on one engine  "
               ". issued, waiting in its queue")
    if d["pending"]:
        out.append(f"  ({d['pending']} operations still running are not shown: `sync` first)")
    return out


def nvprof_time(s: float) -> str:
    """A duration as nvprof prints it: five significant digits in s, ms, us or ns (291.24ms, 6.6720us, 222ns)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            v = s / scale
            return f"{v:.{max(0, 4 - len(str(int(v))) + 1)}f}{unit}"
    return f"{s * 1e9:.0f}ns"


def _profile(d, tablefmt, width=0):
    """nvprof's own layout (the tablefmt setting does not apply: this is what nvprof users know)."""
    head = f"{'Time(%)':>7}{'Time':>10}{'Calls':>10}{'Avg':>10}{'Min':>10}{'Max':>10}  Name"
    source = f": {d['source']}" if d.get("source", d["timing"]) != d["timing"] else ""
    out = [f"==cudashell== Profiling result ({d['timing']}{source}):"]
    if not d["gpu"] and not d["api"]:
        return out + ["nothing has run yet"]
    for title, stats in (("GPU activities", d["gpu"]), ("API calls", d["api"])):
        if title == "API calls":
            out.append("==cudashell== API calls (host time of each call):")
        out.append(head)
        out += [f"{r['percent']:>6.2f}%{nvprof_time(r['total']):>10}{r['calls']:>10}{nvprof_time(r['avg']):>10}"
                f"{nvprof_time(r['min']):>10}{nvprof_time(r['max']):>10}  {r['name']}" for r in stats]
    if d.get("metrics"):
        out.append("==cudashell== Metrics of your kernels (counted by the simulator):")
        out.append(f"{'Kernel':<20}{'Memory':<12}{'Requests':>10}{'Sectors':>10}{'Per req':>9}{'Used':>7}")
        for r in d["metrics"]:
            if r["memory"] == "shared":
                per = r["wavefronts"] / r["requests"] if r["requests"] else 0
                out.append(f"{r['kernel']:<20}{'shared':<12}{r['requests']:>10}{r['wavefronts']:>10}{per:>9.2f}"
                           f"{'':>7}  (wavefronts: bank conflicts above 1 a request)")
            else:
                per = r["sectors"] / r["requests"] if r["requests"] else 0
                used = r["useful_bytes"] / (32 * r["sectors"]) if r["sectors"] else 1
                out.append(f"{r['kernel']:<20}{r['memory']:<12}{r['requests']:>10}{r['sectors']:>10}{per:>9.2f}"
                           f"{100 * used:>6.0f}%")
    if d["pending"]:
        out.append(f"({d['pending']} operations still running are not counted: `sync` first)")
    return out


def _kernel_list(d, tablefmt, width=0):
    rows = [[k["signature"], "built-in" if k["builtin"] else "loaded", k["summary"]] for k in d["kernels"]]
    return [fit(rows, ["kernel", "", "what it does"], tablefmt, width)]


def _streams(d, tablefmt, width=0):
    ctxs = len({r["context"] for r in d["streams"]}) > 1
    rows = [[r["name"] + (" (legacy default)" if r["legacy_default"] else ""),
             "nonblocking" if r["nonblocking"] else "blocking", r["priority"], "idle" if r["idle"] else "busy"]
            + ([r["context"]] if ctxs else []) for r in d["streams"]]
    return [fit(rows, ["stream", "sync with default", "priority", "work"] + (["context"] if ctxs else []),
                tablefmt, width)]


def _contexts(d, tablefmt, width=0):
    rows = [[("* " if c["current"] else "  ") + c["name"], c["device"], c["kind"],
             ", ".join(c["buffers"]) or "-", ", ".join(c["streams"]), ", ".join(c["events"]) or "-"]
            for c in d["contexts"]]
    return [fit(rows, ["context", "GPU", "kind", "buffers", "streams", "events"], tablefmt, width),
            "(* current: what is made now is made in it; `info BUF` says which contexts reach a buffer)"]


def _context(d):
    what = {"created": f"context {d['name']} created on GPU {d['device']}, now current",
            "current": f"context {d['name']} ({d['kind']}, GPU {d['device']}) is current",
            "destroyed": f"context {d['name']} destroyed; {d.get('now')} is current"}[d["action"]]
    took = f" — {d['call']}" + (f", {fmt_seconds(d['host_seconds'])} ({d['timing']})" if "host_seconds" in d else "")
    return [what + took]


def _stream(d):
    clamp = f" (asked {d['asked_priority']}, range {d['priority_range'][0]}..{d['priority_range'][1]})" \
        if d["asked_priority"] != d["priority"] else ""
    return [f"stream {d['name']}: {'nonblocking' if d['nonblocking'] else 'blocking'}, priority "
            f"{d['priority']}{clamp}"]


def _help(d):
    out = []
    for group, cmds in d["groups"].items():
        if cmds:
            out.append(f"{group}:")
            width = max(len(c["name"]) for c in cmds)
            out += [f"  {c['name']:<{width}}  {c['summary']}" for c in cmds]
    out.append("`help COMMAND` shows its syntax, an example and the CUDA call behind it.")
    return out


def _help_command(d):
    out = [d["syntax"], f"  {d['summary']}"]
    if d["details"]:
        out.append(f"  {d['details']}")
    out += [f"  example: {d['example']}", f"  CUDA:    {d['cuda']}"]
    if d["aliases"]:
        out.append(f"  aliases: {', '.join(d['aliases'])}")
    return out


def _device(d):
    keys = [k for k in d if k not in ("backend", "timing", "name")]
    out = [f"{d['name']} — backend {d['backend']}, timings {d['timing']}"]
    return out + [f"  {k:<26} {format_size_exact(d[k]) if k == 'total_mem' else d[k]}" for k in keys]


def _free(d):
    if not d["freed"]:
        return ["nothing to free"]
    out = ["freed " + ", ".join(f"{f['name']} ({f['kind']} {format_size(f['size'])}"
                                f"{', unregistered first' if f['unregistered'] else ''})" for f in d["freed"])]
    if d.get("sync_rule") and d["host_seconds"] >= 1e-4:  # only worth a line when the wait was real
        out.append(f"  host waited {fmt_seconds(d['host_seconds'])} for the device: {d['sync_rule']} ({d['timing']})")
    return out


def _calibrate(d):
    p = d["profile"]
    out = [f"{p['name']} — figures {d['timing']}" + (f", written to {d['path']}" if d["path"] else "")]
    for key, value in p.items():
        if key.endswith(("_h2d", "_d2h", "d2d", "_read")):
            out.append(f"  {key:<24} {value / 1e9:10.2f} GB/s")
        elif key.endswith(("latency", "per_mib")):
            out.append(f"  {key:<24} {fmt_seconds(value):>13}")
    if d["path"]:
        out.append(f"use it with: cudashell --sim-profile {d['path']}")
    return out


def _repeat(d):
    out = [f"repeated {d['times']}× ({d['ran']} commands) in {fmt_seconds(d['wall'])} host wall time"]
    p = d.get("plan")
    if p:
        r = p["per_round"]
        gpu = (f"; GPU {fmt_seconds(p['gpu_seconds'])} from the first start to the last end"
               + (f", engines busy {fmt_seconds(p['busy_seconds'])}" if p.get("busy_seconds") else "")
               + (f", timed by {p['source']}" if p["source"] != p["timing"] else "")) \
            if p.get("gpu_seconds") is not None else ""
        out.append(f"  round 1 through the shell; rounds 2–{d['times']} on the GPU side, no shell between calls: "
                   f"{fmt_seconds(p['host_seconds'])}, {fmt_seconds(r['median'])} a round (median; "
                   f"p10–p90 {fmt_seconds(r['p10'])}–{fmt_seconds(r['p90'])}){gpu} ({p['timing']})")
        if 0 < p.get("traced_rounds", 0) < p["rounds"]:
            out.append(f"  CUPTI recorded each operation of the first {p['traced_rounds']} of them (it costs ~2 µs an "
                       "operation: the rest ran untraced, one span in the timeline)")
    elif d.get("through_shell") and d["times"] > 1:
        why = "as asked (`shell`)" if d["through_shell"] == "asked" else f"({d['through_shell']})"
        out.append(f"  every round went through the shell {why}")
    return out


SIMPLE = {
    "calibrate": _calibrate,
    "checksums": lambda d: [f"checksum {k} {v}" for k, v in d["checksums"].items()] + pending_notes(d),
    "say": lambda d: [d["text"]] if d["shown"] else [],
    "repeat": _repeat,
    "hold": lambda d: [f"held streams {', '.join(d['streams'])} ({d['how']}): what is issued now waits for "
                       "`release`"],
    "release": lambda d: [f"released after {fmt_seconds(d['held_seconds'])}: {d['queued']} operations were "
                          f"waiting and now run back to back ({d['timing']})"]
    + ([f"  note: {d['early']}"] if d.get("early") else []),
    "demos": lambda d: [f"  {x['name']:<20} {x['title']}" for x in d["demos"]]
    + [f"run one with `demo NAME` (`lang zh` for Chinese narration); the scripts are in {d['folder']}"],
    "timeline": _timeline,
    "event": lambda d: [f"event {d['name']} recorded on stream {d['stream']}" + (" (new)" if d["created"] else "")],
    "elapsed": lambda d: [f"elapsed {d['from']} → {d['to']}: {d['ms']:.3f} ms ({d['timing']})"],
    "kernels": lambda d: ["loaded " + ", ".join(d["loaded"])],
    "callback": lambda d: [f"callback on stream {d['stream']} at {fmt_seconds(d['at'])}: {d['text']}"],
    "kernel_output": _kernel_output,
    "alloc": _alloc, "buffer": lambda d: [_buffer_line(d["buffer"]) + f"  — {d['call']}"],
    "copy": _copy, "memset": _memset, "info": _info, "show": _show, "compare": _compare,
    "launch": _launch, "stream": _stream, "help": _help, "help_command": _help_command, "device": _device,
    "free": _free,
    "fill": lambda d: [f"{d['name']}: {d['elements']} {d['dtype']} elements ← {d['value']}"] + pending_notes(d),
    "sync": _sync,
    "prefetch": lambda d: [f"prefetch {d['name']} → {d['to']}: {format_size_exact(d['bytes'])} on stream "
                           f"{d['stream']}, {_gpu_time(d)} {_timing(d)}"],
    "echo": lambda d: [d["text"]],
    "context": _context,
    "peer": lambda d: [f"peer access GPU {d['src']} → GPU {d['dst']} {'enabled' if d['enabled'] else 'disabled'}: "
                       f"{d['call']} ({d['timing']})"],
    "message": lambda d: [d["text"]],
    "history": lambda d: [f"{e['n']:>4}  {e['text']}" + ("" if e["ok"] else f"   # failed: {e['code']}")
                          for e in d["entries"]],
    "settings": lambda d: [f"{k} = {v}" for k, v in d["settings"].items()],
    "expect": lambda d: ([f"expect faster: {d['ms'][0]:.3f} ms < {d['ms'][1]:.3f} ms ("
                          + (f"{d['speedup']:.2f}× faster" if d["speedup"] else "no time at all") + f", {d['timing']})"]
                         if d["expected"] == "faster" else []),
    "run": lambda d: ["(the demo ran in a scope of its own: what it made is released, your session is as it was)"]
    if d.get("scope") is not None else [],
    "quit": lambda d: [],
}
def _bench(d, tablefmt, width=0):
    rows, bench, label = d["rows"], d["bench"], d["timing"]
    if bench == "memcpy":
        flags = {r.get("gated", True) for r in rows}
        gated = "ungated" if flags == {False} else "gated" if flags == {True} else \
            "gated; " + ", ".join(dict.fromkeys(r["kind"] for r in rows if not r["gated"])) + " as issued"
        head = f"bench memcpy {d['direction']} ({label}, {gated}); % of {d['peak_of']}" + (
            f" = {d['peak'] / 1e9:.1f} GB/s" if d["peak"] else "")
        table = [[r["kind"], format_size(r["size"]), f"{r['gbps']:.2f}",
                  f"{r['us_per_copy']:.2f}" if r.get("us_per_copy") is not None else "", f"{100 * r['cv']:.1f}%",
                  f"{r['percent_of_peak']:.0f}%" if r["percent_of_peak"] is not None else "-", r["copies"]]
                 for r in rows]
        headers = ["kind", "size", "GB/s (median)", "µs/copy", "CV", "of peak", "copies/rep"]
    elif bench == "latency":
        head = f"bench latency ({label}): host time of one round, {rows[0]['rounds'] if rows else 0} rounds each"
        table = [[r["what"], f"{r['median_us']:.2f}", f"{r['p10_us']:.2f}–{r['p90_us']:.2f}"] for r in rows]
        headers = ["operation", "µs (median)", "p10–p90 µs"]
    elif bench == "alloc":
        head = f"bench alloc ({label}): seconds per GiB"
        table = [[r["kind"], format_size(r["size"]), r["call"], f"{r['alloc_s_per_gib']:.4f}",
                  f"{r['free_s_per_gib']:.4f}"] for r in rows]
        headers = ["kind", "size", "call", "alloc s/GiB", "free s/GiB"]
    elif bench == "zerocopy":
        head = f"bench zerocopy ({label}): sumArraysGPU, µs"
        table = [[r["n"], f"{r['zc_kernel_us']:.1f}", f"{r['dev_kernel_us']:.1f}", f"{r['zc_step_us']:.1f}",
                  f"{r['dev_step_us']:.1f}"] for r in rows]
        headers = ["n", "zero-copy kernel", "device kernel", "zero-copy step", "device step (copies)"]
    elif bench == "peer":
        head = f"bench peer ({label}): cudaMemcpyPeerAsync, {format_size(rows[0]['size'])} × {rows[0]['reps']}, GB/s"
        pairs = {}
        for r in rows:
            pairs.setdefault((r["src"], r["dst"]), {"link": r["link"]})[r["peer"]] = r["gbps"]
        table = [[f"GPU {a} → GPU {b}", p["link"], f"{p[False]:.1f}",
                  f"{p[True]:.1f}" if True in p else "no peer access",
                  f"{p[True] / p[False]:.1f}×" if True in p else "-"] for (a, b), p in pairs.items()]
        headers = ["copy", "link", "peer access off", "peer access on", "on / off"]
    else:
        head = f"bench overlap ({label})"
        table = [[r["streams"], f"{r['ms']:.3f}", f"{r['speedup']:.2f}×"] for r in rows]
        headers = ["streams", "ms", "speedup"]
    out = [head, fit(table, headers, tablefmt, width)]
    if bench == "zerocopy":
        w, k = d["zc_step_wins_from"], d["kernel_2x"]
        out.append((f"whole step (copies from pageable memory included): zero-copy wins from n = {w} on"
                    if w else "whole step: device memory wins at the largest n measured")
                   + (f"; the zero-copy kernel alone is over 2× slower from n = {k}" if k else ""))
    if bench == "peer" and d.get("host_rows"):
        out += ["", "host ↔ GPU (pinned host memory on each NUMA node, cudaMemcpyAsync), GB/s",
                fit(_host_table(d["host_rows"]), ["host memory", "GPU", "host → GPU", "GPU → host"], tablefmt,
                    width)]
    if d.get("interrupted"):
        out.append("interrupted: the points measured so far")
    if d.get("stopped"):
        out.append(f"stopped at the next point — {d['stopped']}: the points measured so far")
    return out


def _host_table(rows) -> list[list]:
    """One row per (node, GPU): both directions side by side; near/far where the GPU's node is known."""
    cells = {}
    for r in rows:
        where = "not bound" if r["node"] is None else f"node {r['node']}" + (
            "" if r["near"] is None else " (near)" if r["near"] else " (far)")
        cells.setdefault((where, r["gpu"]), {})[r["to_device"]] = f"{r['gbps']:.1f}"
    return [[where, gpu, c.get(True, "-"), c.get(False, "-")] for (where, gpu), c in cells.items()]


def _devices(d, tablefmt, width=0):
    rows = [[("* " if g["ordinal"] == d["current"] else "  ") + str(g["ordinal"]), g["name"], g["pci_bus_id"],
             "-" if g["numa_node"] is None else g["numa_node"], format_size(g["total_mem"]),
             "sm_" + g["compute_capability"].replace(".", "")] for g in d["devices"]]
    out = [fit(rows, ["GPU", "name", "bus id", "NUMA", "memory", "compute"], tablefmt, width)]
    if d["peers"]:
        enabled = {tuple(p) for p in d["enabled"]}
        yes = {True: "yes", False: "no"}
        pairs = [[f"GPU {p['src']} → GPU {p['dst']}", yes[p["access"]], p["link"], yes[p["atomics"]],
                  yes[(p["src"], p["dst"]) in enabled]] for p in d["peers"]]
        out += ["", fit(pairs, ["pair", "peer access", "link", "native atomics", "enabled"], tablefmt, width),
                f"(* the session's device; links from {d['link_source']})"]
    else:
        out.append("(one GPU: nothing to copy between; `--sim-profile two-h200` models a pair)")
    return out


def _doctor(d, tablefmt, width=0):
    mark = {"ok": "✓", "warn": "!", "info": "·"}
    rows = [[mark[f["level"]], f["topic"], f["value"], f["meaning"]] for f in d["findings"]]
    return [fit(rows, ["", "what", "found", "what it means for your copies"], tablefmt, width or 160)]


def _reset(d, tablefmt, width=0):
    cause = "on request" if d["cause"] == "asked" else f"after {d['cause']}"
    lines = [f"reset {cause}: a fresh GPU side; the session was rebuilt on it ({d['timing']})"]
    if d["buffers"]:
        rows = [[b["name"], b["kind"], format_size_exact(b["size"]), b["flags"],
                 f"{b['old_host_ptr'] or '-'} → {b['host_ptr'] or '-'}",
                 f"{b['old_device_ptr'] or '-'} → {b['device_ptr'] or '-'}", b["contents"]] for b in d["buffers"]]
        lines.append(fit(rows, ["buffer", "kind", "size", "flags", "host ptr", "device ptr", "contents"],
                         tablefmt, width))
    lines += [f"  {b}: could not be made again ({code}); it is gone" for b, code in d["dropped"].items()]
    if d["streams"] or d["events"]:
        lines.append("  streams made again: " + (", ".join(d["streams"]) or "none")
                     + "; events made again (not recorded yet): " + (", ".join(d["events"]) or "none"))
    if d["kernels"]:
        lines.append("  kernels recompiled: " + ", ".join(d["kernels"]))
    lines += [f"  kernel {k}: could not be recompiled ({code}); it is gone" for k, code in d["kernels_lost"].items()]
    if d["unfinished"]:
        lines.append("  never finished: " + ", ".join(f"{u['op']} (stream {u['stream']})" for u in d["unfinished"]))
    return lines


TABLES = {"contexts": _contexts, "devices": _devices, "reset": _reset, "doctor": _doctor, "bench": _bench, "ls": _ls, "streams": _streams, "profile": _profile,
          "kernel_list": _kernel_list}
PROSE = frozenset({"message", "echo", "say", "help", "help_command", "settings", "run", "quit"})  # no CSV of these


@dataclass(frozen=True)
class View:
    """How one kind of result is shown: its text lines (tables fitted, prose wrapped to the width), and whether it
    is prose, which has no CSV form."""

    lines: Callable  # (data, tablefmt, width) -> list[str]
    prose: bool = False


def _wrapped(fn) -> Callable:
    return lambda d, tablefmt, width: wrap(fn(d), width)


# one view per result kind: a handler returning a kind without one fails its test (tests/test_render.py)
VIEWS: dict[str, View] = {**{k: View(_wrapped(f), k in PROSE) for k, f in SIMPLE.items()},
                          **{k: View(f) for k, f in TABLES.items()}}


def human(result: Result, tablefmt: str = "simple", width: int = 0) -> str:
    if result.as_json:
        return json.dumps(_json_safe(result.data), ensure_ascii=False)
    return "\n".join(VIEWS[result.kind].lines(result.data, tablefmt, width))


LABEL_COLOURS = {"measured": "#1a7f37", "modeled": "#0969da"}


def html(result: Result) -> str:
    """A result for a notebook: its tables as HTML tables, its other lines as text, pointers whole (no width to
    fit), and whether its times were measured or modeled as a label at its head."""
    lines = VIEWS[result.kind].lines(result.data, "html", 0)
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
    obj = {"cmd": cmd, "ok": error is None, "error": err, "result": result.data if result is not None else None}
    if wall is not None:
        obj["wall_seconds"] = wall
    if explained:
        obj["explain"] = {"c": explained[0], "driver": explained[1]}
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_json_safe(obj), ensure_ascii=False, allow_nan=False)

"""Advice as it happens: the things a teacher would circle in red, noticed after each command — like Nsight's
expert rules, but live. Each rule is a small function over the session and what the command did (an `Act`); it
says what it saw, or nothing. The `Advisor` (one per session, while `set advice on`) runs the rules, keeps the
little each one remembers (how many copies in a row, which side last touched a managed buffer) and the stream
work not yet waited for, and decides what is said: a rule's note is printed once per occurrence pattern (its
key: a buffer, a stream, a kernel), every occurrence is counted for `advice`.

The rules judge the program as written, not the GPU's timing: "work not yet waited for" is work issued
asynchronously with no sync, event sync or blocking call since — so a scenario gives the same notes on the
simulator and on a GPU. The notes link to the guide's sections (docs/guide.md, "Advice")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterator

from ..errors import ShellError
from ..model.machine import host_memory_total
from ..model.operations import (
    COPY,
    DEVICE,
    KERNEL_RUN,
    PLACES,
    STREAM,
    issued_by,
    tags_of,
)
from ..model.regions import common_size, region
from ..model.syncrules import memcpy_rule, memory_class, memset_rule
from ..sizes import format_size, size_word

GUIDE = "docs/guide.md"
TINY = 64 << 10  # a copy under this moves fewer bytes than the bus carries during its fixed cost (~2 µs, 25+ GB/s)
TINY_ROW = 8  # tiny copies of one buffer in a row before it is "many"
SYNC_ROW = 3  # async copies each followed at once by sync, in a row
MAPPED_READS = 3  # launches reading one mapped buffer with no new data from the host between
SIDE_SWITCHES = 3  # host ↔ device switches of a managed buffer without prefetch (h, d, h, d)
PINNED_SHARE = 0.4  # of the host's RAM: the note comes before the pin guard (half of RAM) refuses
ROUNDS_SEEN = max(TINY_ROW, SYNC_ROW)  # rounds of a `repeat` the rules look at (the rest repeat them)
MALLOC_ROW = 3  # cudaMalloc of one size after a cudaFree of it, in all, before the note
# a 2-D/3-D copy with rows under this many bytes pays per row: on the H100 (pinned → device, 4096 rows) 4-byte rows
# moved 0.97 GB/s, 64-byte rows 29.9, 512-byte rows 51.5 of the link's 54.5 (design/memory-model-facts.md), and a
# 3-D copy of 256-byte rows 51.6: rows from 256 bytes up are wide enough
NARROW_ROW = 256
NARROW_ROWS = 64  # … and at least this many rows: a few narrow rows cost a copy's fixed cost, not their count
HOST_TOUCH = ("fill", "show", "compare", "expect equal", "checksum")  # the host reads or writes the bytes


@dataclass(frozen=True)
class Rule:
    id: str
    title: str  # the guide's heading for it: its anchor is the link
    check: Callable  # (memory: dict, flow: Flow, session, act: Act) -> iterator of (key, what it saw)

    @property
    def section(self) -> str:
        """The guide's section, as a link (GitHub's anchor for the heading)."""
        anchor = re.sub(r"[^\w\- ]", "", self.title.lower()).replace(" ", "-")
        return f"{GUIDE}#{anchor}"


@dataclass
class Act:
    """One command as the rules see it: its name, its parsed arguments, and its result's data (None for a round of
    `repeat`, whose results are held back)."""

    name: str
    args: object
    data: dict | None
    text: str
    backend: object = None

    @property
    def tags(self) -> frozenset:
        """What the GPU operations it issues are, for the rules (operations.py: STREAM, COPY, …)."""
        return tags_of(self.name)


@dataclass
class Flow:
    """Stream work issued and not yet waited for (by a sync, an event sync, or a call that blocks): stream → its
    context's name, for each stream with such work."""

    unsynced: dict = field(default_factory=dict)

    def issued(self, stream) -> None:
        self.unsynced[stream.name] = stream.context

    def waited(self, session, stream) -> None:
        """The host waited for `stream`'s work; on a legacy default stream that is every blocking stream's work in
        its context too (the default stream waited for it first)."""
        self.unsynced.pop(stream.name, None)
        if stream.is_default:
            for name, ctx in list(self.unsynced.items()):
                s = session.streams.get(name)
                if ctx == stream.context and s is not None and not s.nonblocking:
                    del self.unsynced[name]

    def all_waited(self, context: str | None = None) -> None:
        self.unsynced = {n: c for n, c in self.unsynced.items() if context is not None and c != context}


# ------------------------------------------------------------------ what the rules read from an act
def buffers_named(session, args) -> list:
    """The session's buffers a command's arguments name (whole or a part), in order."""
    found = []

    def visit(value):
        if isinstance(value, list):
            for v in value:
                visit(v)
            return
        name = getattr(value, "name", value)
        if isinstance(name, str):
            buf = session.buffers.get(name.split("[", 1)[0])
            if buf is not None and buf not in found:
                found.append(buf)

    for value in args.values.values():
        visit(value)
    return found


def stream_of(session, act: Act):
    """The stream a work command used (its `stream S`, else the current context's default stream)."""
    if act.data is not None and "stream" in act.data:
        return session.stream(act.data["stream"])
    return session.stream(act.args.values.get("S"))


def copy_bytes(session, act: Act) -> int | None:
    """How many bytes a memcpy moved: its result says; in a `repeat` round, from its arguments (a 2-D or 3-D copy's
    from its extent)."""
    if act.data is not None:
        return act.data["bytes"]
    extent = act.args.values.get("EXTENT")
    if isinstance(extent, tuple):
        return extent[0] * extent[1] * (extent[2] if len(extent) > 2 else 1)
    try:
        regions = [region(session, act.args.values[k], None) for k in ("SRC", "DST")]
        return common_size(regions, act.args.values.get("SIZE"), None, (None, None))
    except (ShellError, KeyError):
        return None


def copy_rule(session, act: Act):
    """The sync rule (syncrules.py) of a memcpy: what the host waited for."""
    src, dst = (session.buffers.get(act.args.values[k].name) for k in ("SRC", "DST"))
    nbytes = copy_bytes(session, act)
    if src is None or dst is None or nbytes is None:
        return None
    classes = [memory_class(b.kind, b.registered is not None) for b in (src, dst)]
    return memcpy_rule(*classes, "async" in act.args.flags, nbytes)


def blocks(session, act: Act) -> bool:
    """Whether a work command held the host until its stream's work was done (syncrules.py)."""
    rules = {op.sync for op in issued_by(act.name)}  # its operations' rules in syncrules
    if memcpy_rule in rules:
        rule = copy_rule(session, act)
        return rule is not None and rule.blocks
    if memset_rule in rules and "async" not in act.args.flags:
        buf = session.buffers.get(act.args.values["NAME"].name)
        return buf is not None and memset_rule(memory_class(buf.kind, buf.registered is not None), False, 1).blocks
    return False


def is_async_copy(act: Act) -> bool:
    return COPY in act.tags and "async" in act.args.flags


# ------------------------------------------------------------------ the rules
def pageable_async(memory, flow, session, act) -> Iterator[tuple]:
    if not is_async_copy(act):
        return
    rule = copy_rule(session, act)
    for end, word in (("SRC", "from"), ("DST", "to")):
        buf = session.buffers.get(act.args.values[end].name)
        if buf is not None and buf.kind == "pageable" and buf.registered is None and rule is not None:
            how = ("is not asynchronous for the host" if rule.blocks else
                   "returned early only because the driver first copied it on the host into a staging buffer")
            yield buf.name, (f"memcpy … async {word} pageable {buf.name} {how}: {rule.why} — pin it "
                             f"(`register {buf.name}`, or `alloc pinned`)")


def copy_then_sync(memory, flow, session, act) -> Iterator[tuple]:
    if act.name == "sync" and memory.get("after_copy"):
        memory["row"] = memory.get("row", 0) + 1
        if memory["row"] >= SYNC_ROW:
            stream = memory["after_copy"]
            yield stream, (f"{memory['row']} async copies in a row on stream {stream}, each followed at once by "
                           "sync: the host waits each time, so nothing overlaps them — queue more work before syncing, "
                           "or sync once at the end")
    elif not is_async_copy(act):
        memory["row"] = 0  # neither a copy nor its sync: the row broke
    memory["after_copy"] = stream_of(session, act).name if is_async_copy(act) else None


def legacy_stream(memory, flow, session, act) -> Iterator[tuple]:
    if STREAM not in act.tags:
        return
    stream = stream_of(session, act)
    if stream.nonblocking:
        return
    defaults = {c.default.name for c in session.contexts.values()}
    for name, ctx in flow.unsynced.items():
        if ctx != stream.context or name == stream.name:
            continue
        other = session.streams.get(name)
        if stream.is_default and other is not None and not other.nonblocking:
            yield (stream.name, name), (f"{act.name} on the legacy default stream {stream.name} while stream {name} "
                                        f"has work not waited for: stream {stream.name} waits for {name}'s work, "
                                        "so they do not run concurrently — make the streams `nonblocking`, or keep "
                                        "work off stream 0")
        elif not stream.is_default and name in defaults:
            yield (name, stream.name), (f"{act.name} on stream {stream.name} while the legacy default stream {name} "
                                        "has work not waited for: a blocking stream waits for the default stream, "
                                        "so they do not run concurrently — `stream create nonblocking`, or keep "
                                        "work off stream 0")


def free_syncs(memory, flow, session, act) -> Iterator[tuple]:
    if act.name != "free" or act.data is None or not act.data.get("sync_rule"):
        return
    busy = sorted(flow.unsynced)
    if busy:
        freed = ", ".join(f["name"] for f in act.data["freed"][:3]) + ("…" if len(act.data["freed"]) > 3 else "")
        yield tuple(busy), (f"free {freed} while stream {', '.join(busy)} has async work not waited for: cudaFree "
                            "synchronizes the device, stalling the host until it ends — free after a sync, or "
                            "allocate once and reuse")


def tiny_copies(memory, flow, session, act) -> Iterator[tuple]:
    if STREAM not in act.tags:
        return
    nbytes = copy_bytes(session, act) if COPY in act.tags else None
    if nbytes is None or nbytes >= TINY:
        memory.clear()
        return
    src, dst = (act.args.values[k].name for k in ("SRC", "DST"))
    row = {n: memory.get(n, 0) + 1 for n in (src, dst)}  # a buffer not in this copy is no longer in a row
    memory.clear()
    memory.update(row)
    full = [n for n in dict.fromkeys((src, dst)) if row[n] == TINY_ROW]
    if full:  # one note for the copy that made the row, keyed on its pair (p → d is one pattern, not two)
        what = f"from {src} to {dst}" if len(full) == 2 else f"of {full[0]}"
        yield (src, dst), (f"{TINY_ROW} copies {what} in a row, each under {size_word(TINY)}: each pays a copy's "
                           "fixed cost (microseconds), so the bus mostly idles — copy the range in one memcpy")


def mapped_reread(memory, flow, session, act) -> Iterator[tuple]:
    if act.name == "fill" or COPY in act.tags:  # new data from the host: reading it again is the point
        target = act.args.values.get("NAME") or act.args.values.get("DST")
        memory.pop(getattr(target, "name", target), None)
        return
    if KERNEL_RUN not in act.tags:
        return
    kernel = session.kernels.get(act.args.values.get("KERNEL"))
    texts = act.args.values.get("ARG") or []
    if kernel is None:
        return
    read = {str(text).split("[", 1)[0] for p, text in zip(kernel.params, texts) if p.kind in ("in", "inout")}
    for buf in (session.buffers.get(name) for name in sorted(read)):  # a buffer passed twice: read by one launch
        if buf is None or buf.kind not in ("pinned", "pageable") or buf.device_ptr is None:
            continue
        memory[buf.name] = memory.get(buf.name, 0) + 1
        if memory[buf.name] >= MAPPED_READS:
            yield buf.name, (f"{memory[buf.name]} kernels have read mapped {buf.name} since the host last wrote it: "
                             "each read of zero-copy memory crosses the bus again — copy it to device memory once")


def managed_pingpong(memory, flow, session, act) -> Iterator[tuple]:
    if PLACES in act.tags or act.name == "advise":  # advise: a placement too, though no GPU operation
        memory.pop(act.args.values.get("NAME"), None)
        return
    side = "device" if DEVICE in act.tags else "host" if act.name in HOST_TOUCH else None
    if side is None:
        return
    for buf in buffers_named(session, act.args):
        if buf.kind != "managed":
            continue
        last, switches = memory.get(buf.name, (side, 0))
        switches += last != side
        memory[buf.name] = (side, switches)
        if switches >= SIDE_SWITCHES and last != side:
            yield buf.name, (f"managed {buf.name} touched on the host and the device in turn ({switches} switches) "
                             f"without prefetch: each switch migrates its pages on demand, fault by fault — "
                             f"`prefetch {buf.name} device` (or host) before the side that uses it next")


def host_ram(backend) -> int:
    """The host's RAM: the simulator's profile says it; a GPU's host (the worker runs on this machine) is read from
    /proc/meminfo here, without loading the driver's bindings into the shell."""
    profile = backend.capabilities.profile
    if profile is not None:
        return profile.host_memory
    return host_memory_total()


def pinned_ram(memory, flow, session, act) -> Iterator[tuple]:
    if act.name not in ("alloc", "register", "free", "unregister"):
        return
    ram = host_ram(act.backend)
    pinned = session.pinned_bytes()
    high = ram > 0 and pinned >= PINNED_SHARE * ram
    if high and not memory.get("high"):
        memory["times"] = memory.get("times", 0) + 1
        yield memory["times"], (f"{format_size(pinned)} of the host's {format_size(ram)} RAM is pinned "
                                f"({pinned / ram:.0%}): page-locked memory cannot be paged out, so the OS and other "
                                "programs run short — pin only what you copy from, and free it when done")
    memory["high"] = high


def strided_kernel(memory, flow, session, act) -> Iterator[tuple]:
    if KERNEL_RUN not in act.tags or act.data is None or not act.data.get("counts"):
        return  # counted accesses come from the simulator only
    for space, c in act.data["counts"]["global"].items():
        if c.get("pattern") == "strided":
            kernel = act.data["kernel"]
            yield kernel, (f"kernel {kernel} accesses {space} memory strided: {c['sectors_per_request']:g} sectors "
                           f"a warp request, {c['efficiency']:.0%} of the bytes moved used — let neighbouring "
                           "threads touch neighbouring addresses")
            return


def malloc_loop(memory, flow, session, act) -> Iterator[tuple]:
    live, freed, cycles = (memory.setdefault(k, {}) for k in ("live", "freed", "cycles"))
    if act.name == "free" and "async" not in act.args.flags:
        names = [f["name"] for f in act.data["freed"]] if act.data else act.args.values.get("NAME") or []
        for size in (live.pop(n, None) for n in names):
            if size is not None:
                freed[size] = freed.get(size, 0) + 1
        return
    if act.name != "alloc" or act.args.values.get("KIND") != "device" or "async" in act.args.flags:
        return
    size = act.args.values["SIZE"]
    live[act.data["buffer"]["name"] if act.data else act.args.values.get("NAME")] = size
    if freed.get(size):  # allocated again after a free of the same size: a round of a loop
        freed[size] -= 1
        cycles[size] = cycles.get(size, 0) + 1
        if cycles[size] == MALLOC_ROW:
            yield size, (f"cudaMalloc of {format_size(size)} again after cudaFree, {MALLOC_ROW} times: each maps memory "
                         "and each free waits for the device — the stream-ordered allocator's pool serves a loop "
                         f"(`alloc device {size_word(size)} async`, `free … async`, `pool set default threshold max`)")


def pool_gives_back(memory, flow, session, act) -> Iterator[tuple]:
    kept = memory.setdefault("kept", {})  # pool → whether its threshold keeps memory (`pool set P threshold …`)
    if act.name == "pool set" and act.args.values.get("WHAT") == "threshold":
        kept[act.args.values["P"]] = act.args.values["VALUE"].strip().lower() not in ("0", "0b")
    elif act.name == "free" and "async" in act.args.flags:
        memory["freed"] = True
    elif act.name in ("sync", "event sync") and memory.get("freed"):
        memory["freed"], memory["released"] = False, True
    elif act.name == "alloc" and "async" in act.args.flags and memory.pop("released", False):
        pool = act.args.values.get("P", "default")
        if not kept.get(pool):
            yield pool, (f"alloc … async after a sync that followed a free … async: pool {pool}'s release threshold "
                         "is 0, so the sync gave the freed memory back and this allocation maps it again (64 MiB: "
                         f"11.3 ms on the H100, 3.3 µs from a warm pool) — `pool set {pool} threshold max` keeps it")


def narrow_rows(memory, flow, session, act) -> Iterator[tuple]:
    extent = act.args.values.get("EXTENT") if COPY in act.tags else None
    if not isinstance(extent, tuple):
        return
    width, rows = extent[0], extent[1] * (extent[2] if len(extent) > 2 else 1)
    if width < NARROW_ROW and rows >= NARROW_ROWS:
        src, dst = (act.args.values[k].name for k in ("SRC", "DST"))
        yield (src, dst), (f"{act.name} of {rows} rows of {width} B: a 2-D copy pays for each row, so narrow rows "
                           "move far below the link's rate (on the H100 4-byte rows 0.97 GB/s, 64-byte rows 29.9, "
                           "4096-byte rows 54.5) — copy whole rows (a contiguous memcpy when both pitches are the "
                           "width), or lay the data out so that rows are wide")


RULES = (
    Rule("pageable-async", "Async copies from pageable memory", pageable_async),
    Rule("copy-then-sync", "An async copy followed at once by sync", copy_then_sync),
    Rule("legacy-stream", "Streams serialised by the legacy default stream", legacy_stream),
    Rule("free-syncs", "free between async work", free_syncs),
    Rule("tiny-copies", "Many tiny copies of one buffer", tiny_copies),
    Rule("mapped-reread", "A kernel reading mapped memory again", mapped_reread),
    Rule("managed-pingpong", "Managed memory touched on alternating sides", managed_pingpong),
    Rule("pinned-ram", "Pinning most of RAM", pinned_ram),
    Rule("strided-kernel", "Strided accesses in a kernel", strided_kernel),
    Rule("malloc-loop", "cudaMalloc and cudaFree in a loop", malloc_loop),
    Rule("pool-gives-back", "A pool that gives its memory back at every sync", pool_gives_back),
    Rule("narrow-rows", "A 2-D copy of narrow rows", narrow_rows),
)


@dataclass
class Seen:
    """What a rule found, each time: the command, and the note's text."""

    rule: Rule
    command: str
    text: str
    said: bool  # printed (the first time for its key) or only counted


@dataclass
class Advisor:
    memory: dict = field(default_factory=lambda: {r.id: {} for r in RULES})
    flow: Flow = field(default_factory=Flow)
    seen: list = field(default_factory=list)  # every Seen, in order
    keys: set = field(default_factory=set)  # (rule id, key) already said

    def look(self, session, backend, command, data: dict | None) -> list[Seen]:
        """Run the rules over a command that succeeded (and over the rounds of a `repeat`); the notes to print."""
        out = []
        for act in self._acts(command, data):
            act.backend = backend
            for rule in RULES:
                for key, text in rule.check(self.memory[rule.id], self.flow, session, act):
                    first = (rule.id, key) not in self.keys
                    self.keys.add((rule.id, key))
                    seen = Seen(rule, act.text, text, first)
                    self.seen.append(seen)
                    if first:
                        out.append(seen)
            self._follow(session, act)
        return out

    def _acts(self, command, data) -> list[Act]:
        if command.spec.name != "repeat":
            return [Act(command.spec.name, command.args, data, command.segment.text)]
        from ..language.grammar import split_commands
        from ..language.registry import parse_segment

        try:  # the block parsed when it ran
            block = [parse_segment(s) for s in split_commands(data["commands"].replace("\n", ";"))]
        except ShellError:
            return []
        rounds = min(data["times"], ROUNDS_SEEN)
        return [Act(c.spec.name, c.args, None, c.segment.text) for _ in range(rounds) for c in block]

    def _follow(self, session, act: Act) -> None:
        """What the command did to the stream work not yet waited for."""
        name, args = act.name, act.args
        if STREAM in act.tags:
            stream = stream_of(session, act)
            self.flow.issued(stream)
            if blocks(session, act):  # the host waited for it, and for what its stream had queued before it
                self.flow.waited(session, stream)
        elif name == "sync":
            if "S" in args.values:
                self.flow.waited(session, session.stream(args.values["S"]))
            elif "E" in args.values:
                self._event_waited(session, args.values["E"])
            else:
                self.flow.all_waited(session.current)
        elif name == "event sync":
            self._event_waited(session, args.values["E"])
        elif name in ("free", "unregister", "reset") and (act.data is None or act.data.get("sync_rule", True)):
            self.flow.all_waited()
        elif name == "stream destroy":
            self.flow.unsynced.pop(str(args.values.get("S")), None)

    def _event_waited(self, session, name: str) -> None:
        event = session.events.get(name)
        if event is not None and event.stream is not None:
            self.flow.waited(session, session.stream(event.stream))

    def report(self) -> list[dict]:
        """Each rule that fired: how often, where first, and its section — the `advice` command's rows."""
        rows: dict[str, dict] = {}
        for s in self.seen:
            row = rows.setdefault(s.rule.id, {"rule": s.rule.id, "title": s.rule.title, "count": 0,
                                              "first": s.command, "note": s.text, "section": s.rule.section})
            row["count"] += 1
        return list(rows.values())

"""The model of one shell session: buffers with their pointer pairs, streams, history, settings and
the trace of GPU work. No CUDA and no terminal: handlers change it only after the backend succeeded,
so a failed command leaves it as it was."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import ShellError
from ..sizes import size_word
from .kernels import BUILTINS
from .operations import Operation, TraceEntry, plan_entries
from .settings import SESSION_DEFAULTS
from .vmm import VmmState
from .streamorder import StreamOrder

KIND_LETTER = {"pageable": "h", "pinned": "p", "device": "d", "managed": "m"}
DEFAULT_STREAM_NAMES = ("0", "default")
H100_PITCH_STEP = 512  # cudaMallocPitch's pitch on the H100: the width in 512-byte steps
TRACE_LIMIT = 100_000  # operations the trace keeps (about 50 MB); older ones are dropped, and counted


@dataclass(frozen=True)
class Shape:
    """Pitched memory's layout: `width` bytes used of each row, rows `pitch` bytes apart (the driver's choice),
    `height` rows a slice, `depth` slices. A 2-D copy or a kernel needs the pitch to find row y: base + y * pitch."""

    width: int
    height: int
    depth: int
    pitch: int

    def fields(self) -> dict:
        return {"width": self.width, "height": self.height, "depth": self.depth, "pitch": self.pitch}

    @classmethod
    def h100(cls, width: int, height: int, depth: int = 1) -> Shape:
        """The layout the H100's driver gives (design/memory-model-facts.md): the width rounded up to 512 B — 1, 511,
        512 → 512; 513, 1000 → 1024; 4097 → 4608 — the simulator's answer and an exported program's sizes."""
        return cls(width, height, depth, -(-width // H100_PITCH_STEP) * H100_PITCH_STEP)

    @property
    def size(self) -> int:
        return self.pitch * self.height * self.depth


SIDES = {"pageable": "h", "pinned": "h", "device": "d", "managed": "hd"}  # Buffer.side, by kind


@dataclass
class Buffer:
    name: str
    kind: str
    size: int
    flags: frozenset  # alloc flags: portable/mapped/writecombined; managed: global/host
    host_ptr: int | None
    device_ptr: int | None  # the address a kernel uses; None when the GPU cannot reach it
    handle: object = field(repr=False, default=None)  # the backend's own object
    device: int = 0
    registered: frozenset | None = None  # cudaHostRegister flags while registered
    context: str = "gpu0"  # the context it was made in (`contexts`)
    pending: dict = field(default_factory=dict)  # backend token → stream name, of GPU work on it not yet done
    view: str = "uint8"  # the dtype it was last filled or computed as: how `show` reads it unless told
    symbol: str = ""  # a loaded module's variable: its space (constant, global, managed); "" for an allocation
    module: str = ""  # … the module it belongs to (its memory lives as long as the module; `reset` loads it again) …
    source_name: str = ""  # … and its name in the source (`cudaMemcpyToSymbol(mask, …)`)
    made: tuple | None = None  # `alloc … async`: (its stream, the allocation's index in the trace's count)
    uses: dict = field(default_factory=dict, repr=False)  # stream name → (stream, index, operation) of its last use
    raced: set = field(default_factory=set, repr=False)  # streams a stream-ordered race was reported on
    shape: Shape | None = None  # pitched memory (cudaMallocPitch / cudaMalloc3D): its rows as the driver laid them

    @property
    def shown_kind(self) -> str:
        """Its kind as `ls` and `info` show it: a symbol's space, else its kind."""
        return self.symbol or self.kind

    @property
    def host_accessible(self) -> bool:
        return self.kind != "device"

    def whole(self) -> "Region":
        return Region(self, 0, self.size, False)

    @property
    def device_accessible(self) -> bool:
        return self.device_ptr is not None

    @property
    def side(self) -> str:
        """Which side a copy direction sees: 'h', 'd', or 'hd' for managed (either)."""
        return SIDES[self.kind]

    def flag_text(self) -> str:
        words = sorted(self.flags)
        if self.registered is not None:
            words.append("registered" + ("(" + ",".join(sorted(self.registered)) + ")"
                                         if self.registered else ""))
        return ",".join(words) or "-"

    def pending_streams(self) -> list[str]:
        return sorted(set(self.pending.values()))

    def state(self) -> str:
        if self.pending:
            return "pending on stream " + ",".join(self.pending_streams())
        return "ready"


@dataclass(eq=False)
class Stream:
    """A stream the session knows; the legacy default stream is one too (number 0, handle None)."""

    name: str
    number: int
    handle: object = field(repr=False, default=None)
    nonblocking: bool = False
    priority: int = 0
    device: int = 0
    context: str = "gpu0"

    @property
    def is_default(self) -> bool:
        return self.number == 0


@dataclass(eq=False)
class Context:
    """A CUDA context: a GPU's primary context (`gpuN`, what the runtime API and `device use N` use) or one made by
    `context create`. Allocations, streams and events are made in the current one; each has its own legacy default
    stream. `handle` None is the backend's own (the session GPU's primary context)."""

    name: str
    device: int
    handle: object = None
    primary: bool = True
    default: Stream | None = None

    def __post_init__(self):
        if self.default is None:
            label = "0" if self.name == "gpu0" else f"{self.name}:0"
            self.default = Stream(label, 0, device=self.device, context=self.name)


@dataclass
class Entry:
    text: str
    ok: bool
    code: str | None = None


@dataclass
class Event:
    name: str
    handle: object = field(repr=False, default=None)
    stream: str | None = None  # where it was last recorded; None until then
    context: str = "gpu0"  # the context it was made in: it can be recorded only on that context's streams


@dataclass
class MemPool:
    """A stream-ordered allocator's pool: a GPU's default pool (`default`, `gpuN:default`) or one `pool create`
    made; `handle` is the backend's int."""

    name: str
    handle: int
    device: int = 0
    default: bool = False


@dataclass
class Measured:
    """What a session measured, for `compare ref`: the last result of each bench and `calibrate` (by command line) and
    the newest copies (their trace entries, whose times fill in as the work finishes). A demo's scope shares its
    caller's, so what a demo measured counts as the session's."""

    results: dict = field(default_factory=dict)  # command line → (the parsed Command, its result's data)
    copies: list = field(default_factory=list)  # {"src", "dst": (kind, flags, registered), "async", "entry"}


@dataclass(frozen=True, eq=False)
class Region:
    """Bytes [offset, offset + nbytes) of a buffer: what `p0[1MB:+64KB]` names (`explicit` when the text gave its
    end), checked to fit before any backend sees it. C sees it as `p0 + offset`."""

    buf: Buffer
    offset: int
    nbytes: int
    explicit: bool

    @property
    def name(self) -> str:
        return self.buf.name

    def label(self, nbytes: int | None = None) -> str:
        """`p0` for a whole buffer, `p0[1MB:+64KB]` for a part — of `nbytes` from the start, when given — in the
        form the shell reads back."""
        nbytes = self.nbytes if nbytes is None else nbytes
        if self.offset == 0 and nbytes == self.buf.size:
            return self.buf.name
        return f"{self.buf.name}[{size_word(self.offset)}:+{size_word(nbytes)}]"


class BufferTable(dict):
    """The session's buffers by name, keeping the page-locked bytes among them (pinned allocations and registered
    ranges) as they come, go and are registered: the pin-limit check of an `alloc` costs the same with 100,000
    buffers as with one."""

    def __init__(self):
        super().__init__()
        self.locked = 0

    @staticmethod
    def _locked(buf: Buffer) -> int:
        return buf.size if buf.kind == "pinned" or buf.registered is not None else 0

    def __setitem__(self, name: str, buf: Buffer) -> None:
        if name in self:
            self.locked -= self._locked(self[name])
        super().__setitem__(name, buf)
        self.locked += self._locked(buf)

    def __delitem__(self, name: str) -> None:
        self.locked -= self._locked(self[name])
        super().__delitem__(name)

    def pop(self, name, *default):
        if name in self:
            self.locked -= self._locked(self[name])
        return super().pop(name, *default)

    def clear(self) -> None:
        super().clear()
        self.locked = 0

    def registered(self, buf: Buffer, flags, device_ptr) -> None:
        """cudaHostRegister (flags) or its undoing (None) on one of the buffers."""
        before = self._locked(buf)
        buf.registered, buf.device_ptr = flags, device_ptr
        if self.get(buf.name) is buf:
            self.locked += self._locked(buf) - before


@dataclass
class Session:
    buffers: dict = field(default_factory=lambda: BufferTable())
    streams: dict = field(default_factory=dict)  # the streams the user made, by name
    contexts: dict = field(default_factory=lambda: {"gpu0": Context("gpu0", 0)})
    current: str = "gpu0"  # the current context's name
    history: list = field(default_factory=list)
    trace: list = field(default_factory=list)  # TraceEntry (operations.py), oldest first
    unresolved: list = field(default_factory=list)  # trace entries whose GPU times are not known yet
    trace_dropped: int = 0  # the oldest entries, dropped past TRACE_LIMIT
    settings: dict = field(default_factory=lambda: dict(SESSION_DEFAULTS))
    counters: dict = field(default_factory=dict)
    stream_counter: int = 0
    events: dict = field(default_factory=dict)
    pools: dict = field(default_factory=dict)  # the pools `pool create` made, by name (MemPool)
    kernels: dict = field(default_factory=lambda: dict(BUILTINS))
    api: list = field(default_factory=list)  # (CUDA call, host seconds) of every command, for `profile`
    script_dir: Path = field(default_factory=Path.cwd)  # where relative input paths are resolved
    root: Path | None = None  # `cudashell grade`: the submission's folder, outside which no file is opened
    held: dict | None = None  # while `hold`: since when, how, and how much of the trace was there then
    peers: set = field(default_factory=set)  # (a, b) after `peer enable a b`: GPU a may reach GPU b's memory
    progress: object = None  # (label, done or None at the end, total) -> None: the shell's progress line, if any
    gone: dict = field(default_factory=dict)  # names freed or destroyed → what became of them (for the error)
    measured: Measured = field(default_factory=Measured)  # benches, calibrate and copies, for `compare ref`
    lesson: object = None  # the lesson running in this session (commands/lessons.py): its step, tries, results
    lessons_away: dict = field(default_factory=dict)  # lessons quit or left for another here, by key: resumed as is
    state_dir: Path | None = None  # where progress is kept (the Environment's state dir); None: not kept
    advice: object = None  # the advice rules' memory and notes so far (advice.Advisor), made on first use
    vmm: VmmState = field(default_factory=VmmState)  # reservations, physical handles and mappings (`vmm`)
    order: StreamOrder = field(default_factory=StreamOrder)  # what stream order the commands established
    races: list = field(default_factory=list)  # stream-ordered races found by the last command, to report

    # -------------------------------------------------------------- contexts
    @property
    def context(self) -> Context:
        return self.contexts[self.current]

    @property
    def default_stream(self) -> Stream:
        """The current context's legacy default stream (`0`)."""
        return self.context.default

    def context_named(self, name: str, col: int | None = None) -> Context:
        try:
            return self.contexts[name]
        except KeyError:
            raise ShellError("NO_SUCH_CONTEXT", f"no context named '{name}'",
                             f"contexts: {', '.join(self.contexts)}; `context create` makes one", col) from None

    def primary_context(self, backend, device: int) -> Context:
        """GPU `device`'s primary context (`gpuN`), retained on first use."""
        name = f"gpu{device}"
        if name not in self.contexts:
            self.contexts[name] = Context(name, device, backend.context_primary(device))
        return self.contexts[name]

    def holdings(self, ctx: str) -> list[str]:
        """What lives in a context: the buffers, streams and events made in it, by name (a module's variables
        aside: destroying the context unloads its modules)."""
        return [n for group in (self.buffers, self.streams, self.events)
                for n, x in group.items() if x.context == ctx and not getattr(x, "symbol", "")]

    # -------------------------------------------------------------- buffers
    def buffer(self, name: str, col: int | None = None) -> Buffer:
        try:
            return self.buffers[name]
        except KeyError:
            folded = [b for b in self.buffers if b.lower() == name.lower()]  # `P0` for p0
            close = folded or difflib.get_close_matches(name, list(self.buffers), n=1, cutoff=0.5)
            hint = f"did you mean `{close[0]}`?" if close else "`ls` lists the buffers"
            was = f" ({name} {self.gone[name]})" if name in self.gone else ""
            raise ShellError("NO_SUCH_BUFFER", f"no buffer named '{name}'{was}", hint, col) from None

    def next_name(self, kind: str) -> str:
        letter = KIND_LETTER[kind]
        n = self.counters.get(letter, 0)
        while f"{letter}{n}" in self.buffers:
            n += 1
        return f"{letter}{n}"

    def add_buffer(self, buf: Buffer) -> None:
        self.buffers[buf.name] = buf
        self.gone.pop(buf.name, None)
        letter = KIND_LETTER[buf.kind]
        if buf.name.startswith(letter) and buf.name[1:].isdigit():
            self.counters[letter] = max(self.counters.get(letter, 0), int(buf.name[1:]) + 1)

    def bytes_in_use(self, kind: str) -> int:
        return self.totals()[kind]

    def totals(self) -> dict[str, int]:
        """Bytes in use by kind of memory, in one pass over the buffers."""
        sums = dict.fromkeys(KIND_LETTER, 0)
        for b in self.buffers.values():
            sums[b.kind] += b.size
        sums["device"] += self.vmm.memory() - sum(r.size for r in self.vmm.reservations.values())  # addresses
        # are not memory; `vmm create`'s handles are
        return sums

    def pinned_bytes(self) -> int:
        """Page-locked host bytes: pinned allocations and registered ranges (kept as they change: O(1))."""
        return self.buffers.locked

    # -------------------------------------------------------------- streams
    def stream(self, name: str | None, col: int | None = None) -> Stream:
        """The named stream; the default stream for `0`, `default`, or none given."""
        if name is None or name.lower() in DEFAULT_STREAM_NAMES:
            return self.default_stream
        for c in self.contexts.values():  # another context's default stream, as the trace names it
            if name == c.default.name:
                return c.default
        try:
            return self.streams[name]
        except KeyError:
            names = ", ".join(self.streams) or ("none now" if self.stream_counter else "none yet")
            was = f" (stream {name} {self.gone['stream ' + name]})" if "stream " + name in self.gone else ""
            raise ShellError("NO_SUCH_STREAM", f"no stream named '{name}'{was}",
                             f"streams: 0 (default), {names}; make one with `stream create`", col) from None

    def all_streams(self) -> list[Stream]:
        """Every context's default stream, then the streams made."""
        return [c.default for c in self.contexts.values()] + list(self.streams.values())

    def next_stream_number(self) -> int:
        return self.stream_counter + 1

    def add_stream(self, stream: Stream) -> None:
        self.streams[stream.name] = stream
        self.gone.pop("stream " + stream.name, None)
        self.stream_counter = max(self.stream_counter, stream.number)

    # -------------------------------------------------------------- GPU work in flight
    def track(self, operation: Operation, stream: Stream, nbytes: int, timing, *bufs: Buffer,
              name: str | None = None, counts: dict | None = None, engine: str = "") -> None:
        """Record GPU work in the trace; while it runs, the buffers it touches are pending on its stream. `name`: a
        kernel's; `counts`: what a user kernel moved, as the simulator counted it (for `profile`); `engine`: where it
        ran, when not its row's (a batch of copies runs on its copies' engine)."""
        entry = TraceEntry(operation, stream.name, nbytes, timing.seconds, timing.start, timing.end, timing.label,
                           timing.token, timing.issued, timing.tag, name=name, counts=counts, engine=engine)
        self._in_order(operation, stream, bufs, self.traced())
        self.add_trace(entry)
        if timing.token is not None:
            self.unresolved.append(entry)
            for b in bufs:
                b.pending[timing.token] = stream.name

    def _in_order(self, operation: Operation, stream: Stream, bufs, index: int) -> None:
        """Each buffer's use by operation `index` on `stream`: a race when the buffer's stream-ordered allocation is
        not ordered before it (streamorder.py)."""
        for b in bufs:
            if operation.method == "alloc_async":
                b.made = (stream, index)
            elif b.made is not None and stream.name not in b.raced and not self.order.ordered(*b.made, stream):
                b.raced.add(stream.name)
                self.races.append({"buffer": b.name, "first": f"cudaMallocAsync of {b.name} on stream {b.made[0].name}",
                                   "then": f"{operation.key} on stream {stream.name}",
                                   "why": f"stream {stream.name} is not ordered after the allocation",
                                   "hint": f"record an event on stream {b.made[0].name} after the allocation and "
                                           f"`wait {stream.name} EVENT`, or allocate on stream {stream.name}"})
            b.uses[stream.name] = (stream, index, operation.key)

    def free_in_order(self, buf: Buffer, stream: Stream) -> None:
        """cudaFreeAsync of `buf` on `stream`: a race with any use on another stream not ordered before the free."""
        for other, index, op in list(buf.uses.values()):
            if not self.order.ordered(other, index, stream):
                self.races.append({"buffer": buf.name, "first": f"{op} on stream {other.name}",
                                   "then": f"cudaFreeAsync of {buf.name} on stream {stream.name}",
                                   "why": f"the free on stream {stream.name} is not ordered after that use, which may "
                                          "still be running when the memory is handed out again",
                                   "hint": f"record an event on stream {other.name} after its use and `wait "
                                           f"{stream.name} EVENT` before the free, or free on stream {other.name}"})

    def add_trace(self, entry: TraceEntry) -> None:
        self.trace.append(entry)
        if len(self.trace) > TRACE_LIMIT:  # a long `repeat` must not grow memory without end: keep the newest
            drop = len(self.trace) - TRACE_LIMIT // 2
            del self.trace[:drop]
            self.trace_dropped += drop

    def refine(self, backend) -> None:
        """Finished work gets its engine times from the backend's profiler records (CUPTI), where it has them:
        events around an operation also count the time it waited in its queue. A plan whose records were left to
        be read now has its one entry replaced by an entry per operation, in place."""
        plans, todo = [], []
        for i, e in enumerate(self.trace):  # one pass: the trace may hold 100,000 entries
            if e.plan is not None:
                plans.append(i)
            elif e.tag is not None and e.end is not None:
                todo.append(e)
        for i in reversed(plans):
            self._read_plan(backend, i)
        spans = backend.refine([e.tag for e in todo]) if todo else {}
        for e in todo:
            span = spans.get(e.tag)
            if span is not None:
                e.start, e.end = span
                e.seconds = span[1] - span[0]
                e.source = backend.tracing
            e.tag = None  # asked once: CUPTI forgets a record it has handed over

    def _read_plan(self, backend, i: int) -> None:
        run = self.trace[i]
        (tag, templates, partial), run.plan = run.plan, None
        entries = plan_entries(templates, backend.plan_records(tag), run.timing)
        if not entries:  # no records (CUPTI dropped them): the run stays one entry, timed by its events
            return
        if partial:  # the rounds CUPTI did not trace: one entry, from the traced ones' end to the run's
            start = max(e.end for e in entries)
            entries.append(replace(run, start=start, seconds=run.end - start))
        self.trace[i: i + 1] = entries
        if self.held is not None and i < self.held["traced"] - self.trace_dropped:  # `release` counts what came after
            self.held["traced"] += len(entries) - 1

    def traced(self) -> int:
        """How many operations the trace has seen (dropped ones too)."""
        return len(self.trace) + self.trace_dropped

    def completed(self, backend) -> list[dict]:
        """The async work whose GPU time was pending and is now known (engine times from CUPTI where there)."""
        done = self.settle(backend)
        if done:
            self.refine(backend)
        return [e.fields("op", "stream", "bytes", "seconds", "start", "end") for e in done]

    def release_buffer(self, backend, buf: Buffer) -> bool:
        """Free one buffer on the backend, unregistering it first when needed; True when it was unregistered.
        (The caller drops it from `buffers`: `free` only after every buffer it names was released.)"""
        unregistered = buf.registered is not None
        if unregistered:
            backend.unregister(buf)
            self.buffers.registered(buf, None, None)
        backend.free(buf)
        return unregistered

    def settle(self, backend) -> list[TraceEntry]:
        """Ask the backend which work in flight has finished: fill in its GPU times, clear the buffers'
        pending marks. The one place pending state changes, so it follows the GPU (or the virtual clock)."""
        done, still = [], []
        spans = backend.resolve_many([e.token for e in self.unresolved]) if self.unresolved else {}
        for entry in self.unresolved:
            span = spans.get(entry.token)
            if span is None:
                still.append(entry)
            else:
                entry.seconds, entry.start, entry.end = span[:3]
                if len(span) > 3:  # the engine's own times: nothing left to refine
                    entry.source, entry.tag = span[3], None
                done.append(entry)
        self.unresolved = still
        if not done:  # nothing finished (most commands): no buffer to look at
            return done
        finished = {e.token for e in done}
        for b in self.buffers.values():
            for token in finished & b.pending.keys():
                del b.pending[token]
        return done

    # -------------------------------------------------------------- events
    def event(self, name: str, col: int | None = None) -> Event:
        try:
            return self.events[name]
        except KeyError:
            raise ShellError("NO_SUCH_EVENT", f"no event named '{name}'",
                             "`event record NAME` makes one", col) from None

    # -------------------------------------------------------------- history
    def record(self, text: str, ok: bool, code: str | None = None) -> None:
        self.history.append(Entry(text, ok, code))

    def last(self) -> Entry | None:
        return self.history[-1] if self.history else None


"""The model of one shell session: buffers with their pointer pairs, streams, history, settings and
the trace of GPU work. No CUDA and no terminal: handlers change it only after the backend succeeded,
so a failed command leaves it as it was."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .errors import ShellError

KINDS = ("pageable", "pinned", "device", "managed")
KIND_LETTER = {"pageable": "h", "pinned": "p", "device": "d", "managed": "m"}
DEFAULT_STREAM_NAMES = ("0", "default")


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
    pending: set = field(default_factory=set)  # streams with async work on it not yet synced

    @property
    def host_accessible(self) -> bool:
        return self.kind != "device"

    @property
    def device_accessible(self) -> bool:
        return self.device_ptr is not None

    @property
    def side(self) -> str:
        """Which side a copy direction sees: 'h', 'd', or 'hd' for managed (either)."""
        return {"pageable": "h", "pinned": "h", "device": "d", "managed": "hd"}[self.kind]

    def flag_text(self) -> str:
        words = sorted(self.flags)
        if self.registered is not None:
            words.append("registered" + ("(" + ",".join(sorted(self.registered)) + ")"
                                         if self.registered else ""))
        return ",".join(words) or "-"

    def state(self) -> str:
        if self.pending:
            return "pending on stream " + ",".join(sorted(self.pending))
        return "ready"


@dataclass
class Stream:
    name: str
    number: int
    handle: object = field(repr=False, default=None)
    nonblocking: bool = False
    priority: int = 0
    device: int = 0


@dataclass
class Entry:
    text: str
    ok: bool
    code: str | None = None


SETTINGS = {"count": 16, "format": "table", "tablefmt": "simple", "pinlimit": "auto"}


@dataclass
class Session:
    buffers: dict = field(default_factory=dict)
    streams: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    trace: list = field(default_factory=list)
    settings: dict = field(default_factory=lambda: dict(SETTINGS))
    counters: dict = field(default_factory=dict)
    stream_counter: int = 0

    # -------------------------------------------------------------- buffers
    def buffer(self, name: str, col: int | None = None) -> Buffer:
        try:
            return self.buffers[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self.buffers), n=1)
            hint = f"did you mean `{close[0]}`?" if close else "`ls` lists the buffers"
            raise ShellError("NO_SUCH_BUFFER", f"no buffer named '{name}'", hint, col) from None

    def next_name(self, kind: str) -> str:
        letter = KIND_LETTER[kind]
        n = self.counters.get(letter, 0)
        while f"{letter}{n}" in self.buffers:
            n += 1
        return f"{letter}{n}"

    def add_buffer(self, buf: Buffer) -> None:
        self.buffers[buf.name] = buf
        letter = KIND_LETTER[buf.kind]
        if buf.name.startswith(letter) and buf.name[1:].isdigit():
            self.counters[letter] = max(self.counters.get(letter, 0), int(buf.name[1:]) + 1)

    def bytes_in_use(self, kind: str) -> int:
        return sum(b.size for b in self.buffers.values() if b.kind == kind)

    # -------------------------------------------------------------- streams
    def stream(self, name: str | None, col: int | None = None) -> Stream | None:
        """The named stream, or None for the default stream (`0`, `default`, or not given)."""
        if name is None or name.lower() in DEFAULT_STREAM_NAMES:
            return None
        try:
            return self.streams[name]
        except KeyError:
            names = ", ".join(self.streams) or "none yet"
            raise ShellError("NO_SUCH_STREAM", f"no stream named '{name}'",
                             f"streams: 0 (default), {names}; make one with `stream create`", col) from None

    def next_stream_number(self) -> int:
        return self.stream_counter + 1

    def add_stream(self, stream: Stream) -> None:
        self.streams[stream.name] = stream
        self.stream_counter = max(self.stream_counter, stream.number)

    def mark_pending(self, stream: Stream | None, *bufs: Buffer) -> None:
        label = stream.name if stream else "0"
        for b in bufs:
            b.pending.add(label)

    def clear_pending(self, stream_label: str | None = None) -> None:
        """After a sync: of one stream's work, or (None) of all work."""
        for b in self.buffers.values():
            if stream_label is None:
                b.pending.clear()
            else:
                b.pending.discard(stream_label)

    # -------------------------------------------------------------- trace
    def trace_op(self, op: str, stream: Stream | None, nbytes: int, timing) -> None:
        self.trace.append({"op": op, "stream": stream.name if stream else "0", "bytes": nbytes,
                           "seconds": timing.seconds, "timing": timing.label, "token": timing.token})

    def resolve_pending(self, resolve) -> list[dict]:
        """Fill in GPU times of async work that has now finished; return those entries."""
        done = []
        for entry in self.trace:
            if entry["seconds"] is None and entry["token"] is not None:
                seconds = resolve(entry["token"])
                if seconds is not None:
                    entry["seconds"] = seconds
                    done.append(entry)
        return done

    # -------------------------------------------------------------- history
    def record(self, text: str, ok: bool, code: str | None = None) -> None:
        self.history.append(Entry(text, ok, code))

    def last(self) -> Entry | None:
        return self.history[-1] if self.history else None

"""What a measurement (`calibrate`, the benches) makes for itself: buffers, streams, events and pools straight
through the backend (not the session's), given back however the measurement ends — an error, a fault, Ctrl-C —
so a built-in command leaves the device and the simulator's accounting as it found them; and its progress line, a
step per point measured."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from ..errors import ShellError, held_error
from .session import Buffer

PIECE = 64 << 20


@contextmanager
def interrupts_held():
    """Ctrl-C held while the body runs and raised once it is through: clean-up (or a rebuild) that stops half way
    leaves handles to memory that is gone. A second Ctrl-C is not held (a GPU that hangs in the clean-up must not
    hold the session). In the main thread only (signals are delivered there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.getsignal(signal.SIGINT)

    def hold(signum, frame):
        if caught:
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        caught.append(signum)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def refuse_held(session, what: str) -> None:
    """A measurement makes and frees memory of its own and waits for its work: while `hold` keeps the streams, a
    free would wait forever (and the memory stay), so it does not start."""
    if session.held is not None:
        raise held_error(what)


class AskedAgain:
    """A backend whose calls are made once more when one raised KeyboardInterrupt itself (a call interrupted
    inside clean-up or a rebuild, where Ctrl-C is held: `interrupts_held`): what was to be given back or made
    again is, rather than left half done. A second interrupt in the same call passes."""

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        call = getattr(self._backend, name)
        if not callable(call):
            return call

        def again(*args, **kwargs):
            try:
                return call(*args, **kwargs)
            except KeyboardInterrupt:
                return call(*args, **kwargs)
        return again


class Scratch:
    """What a measurement makes straight through the backend (not the session) — in the context the measurement
    runs in (the session's current one: its copies and launches on the default stream run there, and buffers of
    another GPU would make every copy a peer copy). A context manager: on leaving, everything still held is given
    back, each piece on its own (one refusal does not keep the rest), Ctrl-C held until it is done."""

    def __init__(self, backend, ctx):
        self.backend, self.ctx = backend, ctx
        self.bufs: list[Buffer] = []
        self.streams: list = []
        self.pools: list = []
        self.async_bufs: list[Buffer] = []
        self.events: list = []

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, kind, value, tb) -> None:
        measuring, self.backend = self.backend, AskedAgain(self.backend)
        try:
            with interrupts_held():
                failure = self.free_all()
        finally:
            self.backend = measuring
        if failure is not None and kind is None:  # the measurement's own error, when it has one, says more
            raise failure

    def alloc(self, kind: str, size: int, flags=frozenset()) -> tuple[Buffer, float]:
        a, t = self.backend.alloc(kind, size, frozenset(flags), self.ctx)
        buf = Buffer(f"calibrate{len(self.bufs)}", kind, size, frozenset(flags), a.host_ptr, a.device_ptr, a.handle)
        self.bufs.append(buf)
        return buf, t.seconds

    def register(self, buf: Buffer) -> None:
        """cudaHostRegister of a scratch pageable buffer: unregistered before it is freed."""
        buf.device_ptr = self.backend.register(buf, frozenset())
        buf.registered = frozenset()

    def alloc_async(self, size: int, pool, device: int) -> tuple[Buffer, float]:
        """cudaMallocFromPoolAsync on the default stream; freed with cudaFreeAsync (`free_async`) or on leaving."""
        a, t = self.backend.alloc_async(size, None, pool)
        buf = Buffer("bench", "device", size, frozenset(), None, a.device_ptr, a.handle, device=device)
        self.async_bufs.append(buf)
        return buf, t.host_seconds

    def free_async(self, buf: Buffer):
        t = self.backend.free_async(buf, None)
        self.async_bufs.remove(buf)
        return t

    def stream(self):
        """A blocking stream of default priority (the timing events see it), destroyed on leaving."""
        handle = self.backend.stream_create(False, 0)[0]
        self.streams.append(handle)
        return handle

    def event(self):
        """An event, destroyed on leaving."""
        handle = self.backend.event_create()
        self.events.append(handle)
        return handle

    def pool(self, device: int):
        """A stream-ordered pool of the measurement's own, destroyed on leaving (the session's stay as they were)."""
        handle = self.backend.pool_create(device)
        self.pools.append(handle)
        return handle

    def fill_ones(self, buf: Buffer) -> None:
        """Bytes of 1 through the whole buffer, a piece at a time from one array: a 1 GiB buffer needs no 1 GiB array
        beside it."""
        piece = ones(min(PIECE, buf.size))
        for pos in range(0, buf.size, PIECE):
            self.backend.write(buf, pos, piece[:buf.size - pos])

    def unregister(self, buf: Buffer) -> None:
        buf.registered = None
        self.backend.unregister(buf)

    def free(self, buf: Buffer) -> None:
        """Unregister (when registered) and free — freed even when the unregistering is refused: what a
        measurement times as the free. Held until the free returns: a free that did not happen is tried again on
        leaving."""
        try:
            if buf.registered is not None:
                self.unregister(buf)
        finally:
            self.backend.free(buf)
            self.bufs.remove(buf)

    def _give_back(self, buf: Buffer) -> None:
        """Device memory zeroed first (cudaMalloc hands a freed small block's bytes to its next owner: the
        measurement's must not turn up in the user's next buffer, nor stay in the simulator's storage), then freed
        (even when the zeroing was refused)."""
        try:
            if buf.kind == "device":
                self.backend.memset(buf, 0, 0, buf.size, None, False)
        finally:
            self.free(buf)

    def free_all(self) -> ShellError | None:
        """Give back everything still held, each piece on its own; the first refusal is returned (a dead context
        refuses them all: its memory goes with it at `reset`)."""
        failure = None
        work = [(self.free_async, (b,)) for b in list(self.async_bufs)]
        if self.async_bufs or self.pools:  # the pools' memory comes back once the frees are done
            work.append((self.backend.device_sync, ()))
        work += [(self._give_back, (b,)) for b in list(self.bufs)] + \
            [(self.backend.stream_destroy, (h,)) for h in self.streams] + \
            [(self.backend.event_destroy, (e,)) for e in self.events] + \
            [(self.backend.pool_destroy, (p,)) for p in self.pools]
        for call, args in work:
            try:
                call(*args)
            except ShellError as e:
                failure = failure or e
        for held in (self.bufs, self.async_bufs, self.streams, self.events, self.pools):
            held.clear()
        return failure


class Progress:
    """Counts the points of a measurement for the shell's progress line (`session.progress`: drawn only on a
    terminal; nothing in scripts or pipes)."""

    def __init__(self, session, total: int, label: str):
        self.session, self.total, self.done, self.label = session, total, 0, label

    def step(self) -> None:
        self.done += 1
        if self.session.progress:
            self.session.progress(self.label, self.done, self.total)

    def close(self) -> None:
        if self.session.progress:
            self.session.progress(self.label, None, self.total)


def ones(n: int):
    import numpy as np

    return np.ones(n, np.uint8)

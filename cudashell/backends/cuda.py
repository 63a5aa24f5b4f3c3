"""The real backend, as the shell sees it: every call goes down a pipe to the GPU worker process
(`worker.py`), which holds the context and measures each timing next to the driver. When the GPU side
faults it stays reachable for its host memory; when it hangs, Ctrl-C (or `set gpu-timeout`) gives it up;
either way `reset` salvages the host contents, kills it and starts a fresh one. The shell never waits on
the GPU in its own process, so nothing the GPU does can take it down."""

from __future__ import annotations

import abc
import inspect
import os
import select
import signal
import subprocess
import threading
import time
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np



from ..errors import RESET_HINT, STICKY, ShellError
from ..model.syncrules import HOST_ONLY
from . import prestart, wire
from .base import CONTRACT, Backend, Timing, in_contract_order
from .packages import gpu_packages_missing
from .worker import Channel

POLL_MS = 50  # between looks at a worker that has not answered yet (whether it died, whether time is up)
ATOMIC_SEND = 16384  # a message shorter than this goes in one system call
# How long to look for a reply before sleeping (a sleeping shell wakes up tens of µs late): on the H100 machine
# one round trip took 66 µs sleeping, 52 µs looking first; on two cores looking first slows the worker down.
SPIN = 200e-6 if (os.cpu_count() or 1) >= 4 else 0.0
CLOSE_WAIT = 10.0  # how long exit waits for the worker to let go of the GPU before killing it
CHUNK = 64 << 20  # host bytes per message when contents are saved or restored
SALVAGE_WAIT = 30.0  # per chunk: a worker that cannot hand over its host memory in this time loses it


def cuda_unavailable_reason() -> str | None:
    """None when the packages the GPU worker needs are installed; else which is missing. Whether a GPU answers is
    the worker's to find out: it says so, and `auto` falls back to the simulator."""
    return gpu_packages_missing()


def _exited(proc: subprocess.Popen, timeout: float) -> None:
    """Wait for the worker to end, woken when it does: Popen.wait(timeout) sleeps in steps of up to 50 ms, which every
    `cudashell -c` paid at exit. TimeoutExpired when it has not ended in time."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux ≥ 5.3, or it is already reaped
        proc.wait(timeout)
        return
    try:
        select.select([fd], [], [], timeout)  # readable once the process has ended
    finally:
        os.close(fd)
    proc.wait(0)


class _Sigint:
    """Ctrl-C while a message is half sent or half read would desynchronise the pipe: it is held until the
    message is through, then delivered (the reply is the unit: an allocation is either known or never made).
    One handler, installed once, and a counter — not a handler swapped around every message (that cost
    ~15 µs a round trip)."""

    depth, caught, installed = 0, False, False

    @classmethod
    def install(cls) -> None:
        if not cls.installed and threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, cls.handle)
            cls.installed = True

    @classmethod
    def handle(cls, signum, frame):
        if cls.depth:
            cls.caught = True
            return
        raise KeyboardInterrupt


class _WholeMessage:
    """Ctrl-C held while a message crosses (see _Sigint), delivered after it. A class, not a generator-based
    context manager: this wraps every reply, and @contextmanager costs µs each time."""

    def __enter__(self):
        _Sigint.depth += 1

    def __exit__(self, kind, value, tb):
        _Sigint.depth -= 1
        if kind is None and _Sigint.caught and not _Sigint.depth:  # the message's own error goes first
            _Sigint.caught = False
            raise KeyboardInterrupt


_whole_message = _WholeMessage()


def _forwarder(name: str):
    def forward(self, *args, **kwargs):
        if kwargs:  # the pipe carries arguments by position
            args = in_contract_order(name, args, kwargs)
        return self._call(name, *args)

    contract = getattr(Backend, name)
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__, forward.__signature__ = contract.__doc__, inspect.signature(contract)
    return forward


def _forwarding(cls):
    """The contract's calls that go to the worker as they are, written from the one table (base.CONTRACT)."""
    for name, call in CONTRACT.items():
        if call.forward and name not in vars(cls):
            setattr(cls, name, _forwarder(name))
    return abc.update_abstractmethods(cls)


@_forwarding
class CudaBackend(Backend):
    name = "cuda"
    timing_label = "measured"

    def __init__(self, ordinal: int = 0, side: str = "gpu"):
        """side "sim" runs the simulator in the worker instead: the same pipe, tested without a GPU."""
        self.ordinal, self.side = ordinal, side
        self.gpu_timeout: float | None = None  # `set gpu-timeout`: give the GPU up after this long in one wait
        self.ask_abandon = None  # the REPL's question on Ctrl-C: (what, seconds waited) -> abandon?
        self.proc = None
        self.trips = 0  # requests sent to the worker: what a command costs in round trips (benchmarks)
        _Sigint.install()
        self._start()

    # ------------------------------------------------------------------ the worker
    def _start(self) -> None:
        self.dead: str | None = None  # the sticky error, GPU_ABANDONED or GPU_WORKER_DIED
        self.answering = True  # False once a request was abandoned: the pipe's next reply is not ours
        self.host_allocs: dict[int, tuple[str, int]] = {}  # handle → (kind, size) of host-readable memory
        self.fired: list[dict] = []  # host callbacks the worker reported with its replies
        self.finished: dict[int, tuple] = {}  # work the worker's replies said had finished, not yet settled
        self.looked: set[int] = set()  # work the worker's last reply saw still running
        self.closed = False
        # the worker the command started before the shell's imports, else a new one (`reset` always makes one)
        self.proc, main, rescue = prestart.take(self.side, self.ordinal) or prestart.spawn(self.side, self.ordinal)
        self.conn, self.rescue = Channel(main), Connection(rescue.detach())
        hello = self._reply("starting the GPU worker", timed=False)
        self.info, self.timing_label = hello["info"], hello["timing_label"]
        self._versions, self._priority_range = hello["versions"], hello["priority_range"]
        self._pin_limit, self._memory_paths = hello["pin_limit"], hello["memory_paths"]
        self.tracing, self.tracing_why = hello["tracing"], hello["tracing_why"]
        self.capabilities = hello["capabilities"]  # the side's own: the simulator behind the pipe models time too

    def _call(self, method: str, *args):
        if not self.answering:
            raise ShellError(self.dead, "the GPU side was given up; nothing more can run on it", RESET_HINT)
        data = wire.request(method, args)
        self.trips += 1
        try:
            if len(data) < ATOMIC_SEND:  # one write: Ctrl-C cannot fall in the middle of it
                self.conn.send(data)
            else:
                with _whole_message:
                    self.conn.send(data)
        except OSError:  # BrokenPipeError: it is gone
            self._died(method)
        return self._reply(method)

    def _reply(self, what: str, timed: bool = True):
        """Wait for the worker's answer. Ctrl-C asks (interactive) or decides (scripts) to give the GPU up;
        `gpu_timeout` decides by itself (not while the worker starts: that is no GPU wait)."""
        t0 = time.monotonic()
        look, clock = self.conn.poller.poll, time.perf_counter
        spin_until = clock() + SPIN
        while True:
            try:  # most replies come within microseconds: look without sleeping first, then sleep in polls
                ready = look(0)
                while not ready and clock() < spin_until:
                    ready = look(0)
                if not ready:
                    ready = look(POLL_MS)
            except KeyboardInterrupt:
                waited = time.monotonic() - t0
                if self.ask_abandon is None or self.ask_abandon(what, waited):
                    self._abandon(what, waited, "Ctrl-C")
                continue
            if ready:
                try:
                    with _whole_message:
                        message = wire.read_reply(self.conn.recv())
                except (EOFError, OSError):
                    self._died(what)
                status, value = message[0], message[1]
                if len(message) > 2:
                    self.fired += message[2]
                if len(message) > 3:  # work in flight the worker looked at after this request
                    self.finished.update(message[3])
                    self.looked = set(message[4])
                break
            if self.proc.poll() is not None:
                self._died(what)
            if timed and self.gpu_timeout and time.monotonic() - t0 > self.gpu_timeout:
                self._abandon(what, time.monotonic() - t0, f"gpu-timeout {self.gpu_timeout:g} s")
        if status == "ok":
            return value
        if status == "bug":
            raise RuntimeError(f"the GPU worker failed in {what}:\n{value}")
        code, message, hint = value
        if code in STICKY:
            self.dead = code
            hint = RESET_HINT
        raise ShellError(code, message, hint)

    def _abandon(self, what: str, waited: float, why: str):
        self.dead, self.answering = "GPU_ABANDONED", False
        raise ShellError("GPU_ABANDONED", f"gave the GPU up after {waited:.1f} s waiting in {what} ({why}); "
                         "work still queued there will never finish", RESET_HINT)

    def _died(self, what: str):
        self.dead, self.answering = "GPU_WORKER_DIED", False
        raise ShellError("GPU_WORKER_DIED", f"the GPU worker process ended during {what} "
                         f"(exit status {self.proc.poll()})", RESET_HINT)

    def _stop(self) -> None:
        """End the worker: politely when it answers (it pops its context), else kill it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if self.answering:
            try:
                self.conn.send(wire.request("close", ()))
                if self.conn.ready(int(CLOSE_WAIT * 1000)):
                    self.conn.recv()
            except (EOFError, OSError):
                pass
        try:
            _exited(self.proc, CLOSE_WAIT if self.answering else 0.5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for c in (self.conn, self.rescue):
            c.close()

    # ------------------------------------------------------------------ reset
    def _rescue_read(self, buf, offset: int, nbytes: int) -> np.ndarray:
        """Host bytes read by the worker's rescue thread: it answers while the worker hangs in a wait."""
        if buf.handle not in self.host_allocs:
            raise ShellError("NOT_HOST_ACCESSIBLE", f"{buf.name} is device memory")
        import numpy as np

        out = np.empty(nbytes, np.uint8)
        for pos in range(0, nbytes, CHUNK):
            try:
                self.rescue.send((buf.handle, offset + pos, min(CHUNK, nbytes - pos)))
                if not self.rescue.poll(SALVAGE_WAIT):
                    raise ShellError("GPU_WORKER_DIED", f"the worker did not hand over {buf.name} in time")
                piece = self.rescue.recv()
            except (EOFError, OSError):
                raise ShellError("GPU_WORKER_DIED", f"the worker ended before it handed over {buf.name}") from None
            if piece is None:
                raise ShellError("NOT_HOST_ACCESSIBLE", f"the host cannot read {buf.name}")
            out[pos: pos + piece.size] = piece
        return out

    def salvage(self, buf):
        return self._rescue_read(buf, 0, buf.size)

    def restore(self, buf, saved) -> None:
        for pos in range(0, buf.size, CHUNK):
            self.write(buf, pos, saved[pos: pos + CHUNK])

    def reset(self) -> None:
        self._stop()
        self._start()

    # ------------------------------------------------------------------ the contract, forwarded
    def alloc(self, kind, size, flags, ctx=None):
        alloc, timing = self._call("alloc", kind, size, flags, ctx)
        if kind != "device":
            self.host_allocs[alloc.handle] = (kind, size)
        return alloc, timing

    def free(self, buf):
        self._call("free", buf)
        self.host_allocs.pop(buf.handle, None)

    def read(self, buf, offset, nbytes):
        if not self.answering and buf.handle in self.host_allocs:  # given up, but its host memory is readable
            return self._rescue_read(buf, offset, nbytes)
        return self._call("read", buf, offset, nbytes)

    # the host's data work runs in the worker, where the host buffers are; once the worker is given up, here, over the
    # host bytes its rescue thread hands over (as `read` does)
    def host_checksum(self, buf):
        if self.answering:
            return self._call("host_checksum", buf)
        from .hostdata import checksum, piece_spans

        t0 = time.perf_counter()
        value = checksum((pos, self._rescue_read(buf, pos, n)) for pos, n in piece_spans(0, buf.size, CHUNK))
        return value, self._rescued_timing(t0)

    def host_compare(self, a, a_offset, b, b_offset, nbytes):
        if self.answering:
            return self._call("host_compare", a, a_offset, b, b_offset, nbytes)
        from .hostdata import first_difference, piece_spans

        t0 = time.perf_counter()
        at = first_difference((pos, self._rescue_read(a, a_offset + pos, n), self._rescue_read(b, b_offset + pos, n))
                              for pos, n in piece_spans(0, nbytes, CHUNK))
        return at, self._rescued_timing(t0)

    def host_read(self, buf, offset, nbytes):
        if self.answering:
            return self._call("host_read", buf, offset, nbytes)
        t0 = time.perf_counter()
        return self._rescue_read(buf, offset, nbytes), self._rescued_timing(t0)

    def _rescued_timing(self, t0: float) -> Timing:
        seconds = time.perf_counter() - t0
        return Timing(seconds, seconds, HOST_ONLY.blocks, self.timing_label, rule=HOST_ONLY.why, basis="observed")

    def fired_callbacks(self):
        fired, self.fired = self.fired, []
        return fired

    def command_started(self):
        """What a reply said of work in flight is not fresh for the next command (typed seconds later, perhaps)."""
        self.looked.clear()

    def resolve(self, token):
        return self.resolve_many([token]).get(token)

    def resolve_many(self, tokens):
        """From what the worker's last reply said of work in flight (so a command settles from its own call's reply:
        one round trip a command); a trip for work it did not look at. What a reply said is used once: a caller
        that asks again (waiting for the work) is asked through to the worker."""
        done = {t: self.finished.pop(t) for t in tokens if t in self.finished}
        ask = [t for t in tokens if t not in done and t not in self.looked]
        self.looked.clear()
        if ask and self.answering:
            done.update(self._call("resolve_many", ask))
            for t in done:
                self.finished.pop(t, None)
        return done

    def refine(self, tags):
        # only CUPTI times work by its engine: without it there is nothing to ask
        return self._call("refine", list(tags)) if self.answering and tags and self.tracing else {}

    def hold(self, streams):
        return self._call("hold", list(streams))

    def run_plan(self, calls, rounds, gate=False, trace=True):
        return self._call("run_plan", [[m, [wire.to_ref(a) for a in args]] for m, args in calls], rounds, gate, trace)

    def mem_info(self) -> tuple[int, int]:
        """(free, total) device bytes, as cuMemGetInfo says: for leak checks."""
        return self._call("mem_info")

    def ping(self) -> None:
        """One round trip that does nothing: what the pipe costs (benchmarks/worker_roundtrip.py)."""
        self._call("ping")

    # answered once, when the worker started
    def versions(self):
        return self._versions

    def priority_range(self):
        return self._priority_range

    def pin_limit(self):
        return self._pin_limit

    def memory_paths(self):
        return self._memory_paths

    # the host's side, here
    def clock(self):
        return time.perf_counter()  # CLOCK_MONOTONIC: the same clock the worker reads

    def host_sleep(self, seconds):
        time.sleep(seconds)
        if self.answering:
            self._call("ping")  # collects the callbacks that fired meanwhile

    def close(self):
        if not self.closed:
            self.closed = True
            self._stop()

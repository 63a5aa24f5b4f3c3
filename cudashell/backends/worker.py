"""The cuda backend's GPU side, in a process of its own. It holds the context, PyCUDA and the driver shim
(`gpu.GpuSide`) and answers one request at a time on a pipe. A kernel fault poisons the process that made
the context (a new context cannot be made in it: measured on the H100), and a kernel that never ends holds
whoever waits for it — so neither may be the shell's process. The shell kills this one and starts another.

A second pipe is served by a thread that only reads host memory (no CUDA call, and the CUDA waits release
the GIL), so the host contents of a worker stuck in a wait can still be saved before it is killed."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from dataclasses import replace
from itertools import islice
from multiprocessing.connection import Connection

from ..errors import ShellError
from ..model.kernels import BUILTINS, Kernel
from ..model.session import Region
from . import wire
from .base import CONTRACT, Timing
from .wire import BufRef

# After a reply, look for the next request this long before sleeping in recv: a sleeping worker wakes tens of µs
# late, and a shell at the prompt or in a script sends its next request soon. Not on small machines, where the
# spinning would take the core the shell needs.
SPIN = 1e-3 if (os.cpu_count() or 1) >= 4 else 0.0
# After this much more without a request (someone at the prompt, a script's sleep), the GPU side's slower
# housekeeping (reading CUPTI's records) runs before the worker sleeps: a request then waits for it at most.
REST_MS = 1
# the contract's calls that make an allocation (its handle is numbered here: the object stays in this process) and
# those that end one (its number is forgotten), as the contract declares them
ALLOCS = {name for name, call in CONTRACT.items() if call.allocation == "makes"}
FREES = {name for name, call in CONTRACT.items() if call.allocation == "ends"}
MODULES = {name for name, call in CONTRACT.items() if call.allocation == "module"}
SETTLE_AT_ONCE = 8  # the oldest work in flight looked at after each request (an event query each): not O(queue)


class Channel:
    """The main pipe: length-prefixed messages (`wire` writes them) on a Unix socket, through the socket's own C
    methods (a multiprocessing Connection's buffered read loops cost several µs a message). One message is in
    flight at a time in each direction, so a read may take a whole message at once."""

    HEAD = struct.Struct("!Q")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.poller = select.poll()  # one system call a look
        self.poller.register(sock.fileno(), select.POLLIN)

    def send(self, data: bytes) -> None:
        if len(data) < 1 << 16:
            self.sock.sendall(self.HEAD.pack(len(data)) + data)
        else:  # no copy of a large buffer's bytes
            self.sock.sendall(self.HEAD.pack(len(data)))
            self.sock.sendall(data)

    def recv(self):
        chunk = self.sock.recv(1 << 16)
        if len(chunk) < 8:
            chunk += self._exact(8 - len(chunk))
        n = self.HEAD.unpack_from(chunk)[0]
        body = chunk[8:]
        if len(body) < n:
            body += self._exact(n - len(body))
        return body

    def _exact(self, n: int) -> bytes:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise EOFError("the other end closed the pipe")
            got += k
        return bytes(buf)

    def ready(self, timeout_ms: int = 0) -> bool:
        return bool(self.poller.poll(timeout_ms))

    def close(self) -> None:
        self.sock.close()


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the shell dies, even while it waits on the GPU."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _error(e: BaseException) -> tuple:
    if isinstance(e, ShellError):
        return "error", (e.code, e.message, e.hint)
    return "bug", "".join(traceback.format_exception(e))


def _quietly(housekeeping) -> None:
    """The GPU side's housekeeping must not end the worker: what failed (a dead context) is the next request's to
    meet and report."""
    try:
        housekeeping()
    except Exception:
        pass


class Worker:
    def __init__(self, conn: Channel, rescue: Connection, side: str, ordinal: int):
        self.conn, self.rescue = conn, rescue
        self.allocs: dict[int, object] = {}  # handle number → the side's allocation
        self.tracked: dict[int, None] = {}  # tokens of work in flight handed to the shell, oldest first
        self.next_handle = 1
        if side == "sim":  # the simulator behind the same pipe: how the pipe is tested where there is no GPU
            from .sim import SimBackend

            self.side = SimBackend()
        else:
            from .gpu import GpuSide

            self.side = GpuSide(ordinal)

    def _local(self, x):
        kind = type(x)  # by exact type: this runs for every argument of every call
        if kind is BufRef:  # a fresh copy, unpickled for this call: its handle number becomes the object
            x.handle = self.allocs[x.handle]
            return x
        if kind is list:
            return [self._local(v) for v in x]
        if kind is Region:  # a kernel's pointer into a buffer
            return replace(x, buf=self._local(x.buf))
        if kind is Kernel and x.builtin:  # its numpy twin stayed behind (functions do not pickle)
            return BUILTINS[x.name]
        return x

    def _number(self, allocation) -> int:
        """The number the shell holds for an allocation that stays in this process."""
        n, self.next_handle = self.next_handle, self.next_handle + 1
        self.allocs[n] = allocation
        return n

    def handle(self, method: str, args: tuple):
        if method == "ping":
            return None
        if method == "stall":  # holds the worker as a GPU wait would: tests of giving up, where no GPU hangs
            time.sleep(args[0])
            return None
        call = CONTRACT.get(method)
        if call is None or not call.worker:  # only the contract is answered here
            raise ShellError("INTERNAL_ERROR", f"the GPU worker answers the backend contract only, not {method}")
        number = args[0].handle if method in FREES else None  # before _local makes it the object
        value = getattr(self.side, method)(*[self._local(a) for a in args])
        if method in ALLOCS:
            alloc, timing = value
            return replace(alloc, handle=self._number(alloc.handle)), timing
        if method in MODULES:  # the module's variables are allocations too: numbered here
            kernels, symbols = value
            return kernels, [replace(s, handle=self._number(s.handle)) for s in symbols]
        if method in FREES:
            del self.allocs[number]
        if method in ("resolve", "resolve_many"):  # asked and answered: no longer to be looked at
            for token in ([args[0]] if method == "resolve" else args[0]):
                if value is not None and (method == "resolve" or token in value):
                    self.tracked.pop(token, None)
        return value

    def settled(self) -> tuple[dict, list]:
        """Which of the oldest work in flight (as many as SETTLE_AT_ONCE) has finished, with its spans, and which is
        still running: the shell settles from these without asking again during this command. (Work whose times
        are not known without a costly step — CUPTI's flush — is in neither: the shell asks for it.)"""
        if not self.tracked:
            return {}, []
        looked = list(islice(self.tracked, SETTLE_AT_ONCE))
        try:
            if hasattr(self.side, "finished"):  # the GPU side: cheaply
                seen = self.side.finished(looked)
            else:  # the simulator answers every question at once
                spans = self.side.resolve_many(looked)
                seen = {t: spans.get(t) for t in looked}
        except Exception:  # a dead context: nothing finishes any more, and the shell will hear why when it asks
            return {}, []
        running = [t for t in looked if t in seen and seen[t] is None]
        for token in looked:  # the finished are reported; the rest the shell asks for when it needs them
            if token not in running:
                del self.tracked[token]
        return {t: span for t, span in seen.items() if span is not None}, running

    def serve(self) -> None:
        threading.Thread(target=self.serve_rescue, daemon=True).start()
        look, clock = self.conn.poller.poll, time.perf_counter
        # the GPU side's housekeeping, done where no request waits for it: `idle` the moment a reply is sent, `rest`
        # once no request came for a while
        idle, rest = getattr(self.side, "idle", None), getattr(self.side, "rest", None)
        while True:
            try:
                until = clock() + SPIN
                while not look(0) and clock() < until:
                    pass
                if rest is not None and not look(REST_MS):
                    _quietly(rest)
                method, args = wire.read_request(self.conn.recv())
            except (EOFError, OSError):  # the shell is gone
                self.side.close()
                return
            if method == "close":
                break
            try:
                reply = "ok", self.handle(method, args)
            except Exception as e:
                reply = _error(e)
            # callbacks that fired, and what became of work in flight, ride along: no extra round trip to settle
            self.conn.send(wire.reply((*reply, self.side.fired_callbacks(), *self.settled())))
            value = reply[1]  # work this request issued is looked at from the next reply on: it was issued µs ago, and
            if type(value) is Timing and value.token is not None:  # a command that issues work does not settle it
                self.tracked[value.token] = None
            if idle is not None and not look(0):
                _quietly(idle)
        try:
            self.side.close()
            self.conn.send(wire.reply(("ok", None)))
        except Exception as e:
            self.conn.send(wire.reply(_error(e)))
        # the context is released and CUPTI flushed: nothing is left for the interpreter's own teardown (0.1 s on the
        # H100 machine, which every `cudashell -c` waited for) to do
        os._exit(0)

    def serve_rescue(self) -> None:
        """(handle, offset, nbytes) → those host bytes, or None for memory the host cannot read."""
        while True:
            try:
                handle, offset, nbytes = self.rescue.recv()
            except (EOFError, OSError):
                return
            a = self.allocs.get(handle)
            if getattr(a, "array", None) is not None:  # the GPU side's host memory
                self.rescue.send(a.array[offset: offset + nbytes])
            elif getattr(a, "kind", "device") != "device" and hasattr(a, "data"):  # the simulator's
                self.rescue.send(a.data.read(offset, nbytes))
            else:
                self.rescue.send(None)


def main() -> None:
    """Entry point: `python -m cudashell.backends.worker FD RESCUE_FD gpu|sim ORDINAL`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the shell's to handle
    # Lazy loading (CUDA's default) loads a kernel at its first launch, which may wait for the whole context: a
    # launch while `hold` keeps the streams waiting would never return. Load every kernel with its module.
    os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
    _die_with_parent()
    fd, rescue_fd, side, ordinal = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    conn, rescue = Channel(socket.socket(fileno=fd)), Connection(rescue_fd)
    try:
        worker = Worker(conn, rescue, side, ordinal)
    except Exception as e:
        conn.send(wire.reply(_error(e)))
        return
    side = worker.side
    conn.send(wire.reply(("ok", {"info": side.info, "timing_label": side.timing_label, "versions": side.versions(), "priority_range": side.priority_range(),
                      "pin_limit": side.pin_limit(), "memory_paths": side.memory_paths(), "pid": os.getpid(),
                      "tracing": side.tracing, "tracing_why": getattr(side, "tracing_why", ""),
                      "capabilities": side.capabilities})))
    worker.serve()


if __name__ == "__main__":  # run as a module, this file is __main__: the shell pickles the real module's classes
    from cudashell.backends.worker import main as real_main

    real_main()

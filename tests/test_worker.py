"""The worker's pipe, checked without a GPU: every call the shell side forwards exists on the GPU side,
and buffers cross the pipe as references the worker can resolve."""

from __future__ import annotations

import inspect
import os
import signal
import threading
import time

import pytest

from cudashell.backends import cuda, gpu, wire
from cudashell.backends.wire import BufRef
from cudashell.backends.worker import Worker
from cudashell.errors import ShellError
from cudashell.model.session import Buffer
from tests.conftest import Cush, make_backend, until, waiting_for


def test_the_shell_side_meets_the_whole_contract():
    assert not cuda.CudaBackend.__abstractmethods__


def test_the_contract_table_covers_the_backend_and_both_sides_implement_it():
    """One table (base.CONTRACT) says what each method is; the worker's forwarders, the planner's queries and the plan
    calls come from it. Every method of the contract is in it, and both sides implement every one with the contract's
    parameters (and their defaults: a side's own option would be a keyword the other side refuses — options go in the
    contract's, such as a launch's LaunchOptions)."""
    from cudashell.backends.base import CONTRACT, Backend
    from cudashell.backends.sim import SimBackend

    def parameters(method) -> list:
        return [(p.name, p.default) for p in inspect.signature(method).parameters.values()]

    contract = {name for name in vars(Backend) if callable(getattr(Backend, name)) and not name.startswith("_")}
    assert contract - set(CONTRACT) == set(), "a contract method the table does not describe"
    for name, call in CONTRACT.items():
        if name in ("ping", "mem_info"):  # the worker's own, and a leak check's
            continue
        wanted = parameters(getattr(Backend, name))
        for side in (SimBackend, cuda.CudaBackend) + ((gpu.GpuSide,) if call.worker else ()):
            assert parameters(getattr(side, name)) == wanted, (side.__name__, name)


def test_the_worker_answers_the_contract_only():
    worker = Worker.__new__(Worker)
    worker.side, worker.allocs = object(), {}
    with pytest.raises(ShellError) as refused:
        worker.handle("__init__", ())
    assert refused.value.code == "INTERNAL_ERROR" and "contract" in refused.value.message


def test_a_buffer_crosses_as_a_reference_and_the_worker_resolves_it():
    buf = Buffer("p", "pinned", 4096, frozenset(), 0x1000, 0x1000, handle=7, registered=None)
    ref = wire.to_ref([buf, 3])[0]
    assert isinstance(ref, BufRef) and ref.handle == 7 and ref.name == "p"
    w = Worker.__new__(Worker)
    w.allocs = {7: "the allocation"}
    assert w._local([ref, 1])[0].handle == "the allocation"


# ------------------------------------------------------------------ the real pipe, the simulator behind it
def test_bytes_cross_the_pipe_unchanged(piped):
    piped.ok("alloc pinned 1MB as p; fill p random seed 9; alloc device 1MB as d; memcpy p d; "
             "alloc pageable 1MB as h; memcpy d h")
    assert piped.ok("compare p h")["equal"]
    local = Cush(make_backend("sim"))
    local.ok("alloc pinned 1MB as p; fill p random seed 9")
    assert piped.ok("checksum h")["checksums"]["h"] == local.ok("checksum p")["checksums"]["p"]
    local.shell.close()


def test_a_fault_and_reset_through_the_pipe_keep_host_contents(piped):
    piped.ok("alloc pinned 64KB as p; fill p iota; alloc pageable 4KB as q; launch sum p p q unchecked")
    before = piped.ok("checksum p")["checksums"]
    assert piped.fails("sync")["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    old = piped.backend.proc
    r = piped.ok("reset")
    assert {b["name"]: b["contents"] for b in r["buffers"]} == {"p": "kept", "q": "kept"}
    assert piped.ok("checksum p")["checksums"] == before and old.returncode == 0


def test_a_stalled_worker_is_given_up_after_the_timeout_then_reset_kills_it(piped):
    piped.ok("alloc pinned 64KB as p; fill p 3; set gpu-timeout 0.3")
    with pytest.raises(ShellError) as e:
        piped.backend._call("stall", 30)
    assert e.value.code == "GPU_ABANDONED" and "gpu-timeout" in e.value.message
    assert piped.fails("alloc device 4KB")["code"] == "GPU_ABANDONED"
    assert piped.ok("show p count 1")["values"] == [3]  # host memory is read by the rescue thread
    old = piped.backend.proc
    piped.ok("reset")
    assert old.returncode == -signal.SIGKILL
    assert piped.ok("show p count 1")["values"] == [3]


def test_ctrl_c_asks_and_waits_on_when_told_to(piped):
    """Two Ctrl-Cs, each sent once the shell side is waiting for the stalled worker's reply: the first is answered
    `wait on` (the wait goes on), the second `give up`."""
    asked, problems = [], []

    def ask(what, waited):
        asked.append((what, waited))
        return len(asked) > 1

    def waiting() -> bool:  # inside the wait for the stall's reply, and not inside the question
        return waiting_for("stall", besides=frozenset({"ask"}))

    def ctrl_c_twice():
        try:
            until(waiting, "the shell never waited for the stall")
            os.kill(os.getpid(), signal.SIGINT)
            until(lambda: len(asked) == 1 and waiting(), "the first Ctrl-C was not asked about, or the wait ended")
            os.kill(os.getpid(), signal.SIGINT)
        except TimeoutError as e:
            problems.append(str(e))

    piped.backend.ask_abandon = ask
    sender = threading.Thread(target=ctrl_c_twice)
    sender.start()
    with pytest.raises(ShellError) as e:
        piped.backend._call("stall", 30)
    sender.join()
    assert problems == []
    assert e.value.code == "GPU_ABANDONED" and "waiting in stall (Ctrl-C)" in e.value.message
    assert [what for what, _ in asked] == ["stall", "stall"] and asked[0][1] <= asked[1][1] < 30
    assert piped.fails("alloc device 4KB")["code"] == "GPU_ABANDONED"  # given up: nothing more runs until `reset`


def test_a_worker_that_dies_is_reported_and_reset_starts_another(piped):
    piped.ok("alloc pinned 4KB as p; alloc device 4KB as d")
    piped.backend.proc.kill()
    piped.backend.proc.wait()
    assert piped.fails("memcpy p d")["code"] == "GPU_WORKER_DIED"
    r = piped.ok("reset")
    assert {b["name"]: b["contents"] for b in r["buffers"]} == {"p": "lost: unreadable (GPU_WORKER_DIED)",
                                                              "d": "lost: device memory"}
    piped.ok("memcpy p d; sync")


def test_a_bug_in_the_worker_is_one_line_and_the_session_goes_on(piped):
    piped.ok("alloc pinned 4KB as p")
    with pytest.raises(RuntimeError, match="the GPU worker failed in memcpy"):
        piped.backend._call("memcpy")  # its arguments missing: a TypeError inside the worker
    piped.ok("fill p 1; checksum p")


@pytest.mark.parametrize("state, status", [("answering", 0), ("abandoned", -signal.SIGKILL),
                                           ("died", -signal.SIGKILL)])
def test_exit_ends_the_worker_in_every_state(piped, state, status):
    """Closing the shell ends the worker however it stands: one that answers is asked to close and exits 0 (it
    pops its context); one given up while it still sleeps in a wait is killed; one already dead is reaped."""
    piped.ok("alloc pinned 4KB as p")
    proc = piped.backend.proc
    if state == "abandoned":
        piped.ok("set gpu-timeout 0.2")
        with pytest.raises(ShellError) as e:
            piped.backend._call("stall", 30)
        assert e.value.code == "GPU_ABANDONED" and proc.poll() is None  # still asleep in the stall
    elif state == "died":
        proc.kill()
        proc.wait()
    t0 = time.monotonic()
    piped.shell.close()
    assert proc.returncode == status and time.monotonic() - t0 < 5  # not the stall's 30 s, nor CLOSE_WAIT's 10
    assert piped.backend.closed


def test_the_backend_adopts_the_worker_the_command_started_before_its_imports(monkeypatch):
    from cudashell.backends import prestart

    started = prestart.spawn("sim", 0)
    monkeypatch.setattr(prestart, "_started", (*started, "sim", 0))
    backend = cuda.CudaBackend(side="sim")
    try:
        assert backend.proc is started[0] and prestart._started is None
        backend.alloc("pinned", 4096, frozenset())
    finally:
        backend.close()


def test_a_started_worker_that_is_not_the_one_wanted_is_ended(monkeypatch):
    from cudashell.backends import prestart

    started = prestart.spawn("sim", 0)
    monkeypatch.setattr(prestart, "_started", (*started, "gpu", 0))
    assert prestart.take("sim", 0) is None
    assert started[0].wait(timeout=10) != 0


@pytest.mark.parametrize("argv, wanted", [(["--backend", "sim", "-c", "ls"], False), (["--backend=sim"], False),
                                          (["--version"], False)])
def test_the_worker_is_started_early_only_when_the_gpu_may_be_wanted(argv, wanted):
    from cudashell.frontends import entry

    assert entry._wanted(argv) is wanted


def test_a_command_makes_one_round_trip_and_settles_from_its_reply(piped, monkeypatch):
    """Work in flight rides back with every reply (as fired callbacks do): a command settles from its own call's
    reply, and asks again only for work nobody looked at since it began (`ls` after a while)."""
    backend, trips = piped.backend, []
    real = backend._call
    monkeypatch.setattr(backend, "_call", lambda method, *args: trips.append(method) or real(method, *args))
    piped.ok("alloc pinned 4KB as p; alloc device 4KB as d; launch spin 50000")

    def trips_of(line):
        trips.clear()
        result = piped.ok(line)
        return trips[:], result

    assert trips_of("memcpy p d 4 async")[0] == ["memcpy"]
    assert trips_of("ls")[0] == ["resolve_many"]  # nothing looked at the copy since this command began
    assert trips_of("stream query 0")[0] == ["stream_idle"]
    done, result = trips_of("sync")
    assert done == ["device_sync"] and [c["op"] for c in result["completed"]] == ["kernel spin", "memcpy h2d"]
    assert trips_of("ls")[0] == [] and all(b["state"] == "ready" for b in piped.ok("ls")["buffers"])


def test_every_call_that_returns_an_allocation_is_declared_so_for_the_workers_handle_table():
    """The worker numbers the handle of what a "makes" call returns and forgets it at an "ends" call: a contract
    method returning an Allocation without the declaration would hand the shell the worker's own object."""
    import inspect

    from cudashell.backends.base import CONTRACT, Backend

    makes = {name for name in CONTRACT if hasattr(Backend, name)
             and "Allocation" in str(inspect.signature(getattr(Backend, name)).return_annotation)}
    assert makes == {name for name, call in CONTRACT.items() if call.allocation == "makes"} >= {"alloc", "alloc_async"}
    assert {name for name, call in CONTRACT.items() if call.allocation == "ends"} == {"free", "free_async", "vmm_free"}


def test_the_worker_does_its_sides_housekeeping_only_where_no_request_waits():
    """`idle` runs once a reply is sent and no request waits, `rest` once none came for a while (CUPTI's records
    are read then, not by the command that next settles them): after each reply, never before it; one that fails
    (a dead context) does not end the worker."""
    import socket
    from multiprocessing import Pipe

    from cudashell.backends.worker import Channel

    class Side:
        def __init__(self):
            self.calls = []

        def idle(self):
            self.calls.append("idle")

        def rest(self):
            self.calls.append("rest")
            if len(self.calls) > 1:
                raise ShellError("CUDA_ERROR_LAUNCH_FAILED", "a dead context")  # the worker goes on regardless

        def fired_callbacks(self):
            return []

        def close(self):
            self.calls.append("close")

    mine, theirs = socket.socketpair()
    rescue_mine, rescue_theirs = Pipe()
    worker = Worker.__new__(Worker)
    worker.conn, worker.rescue, worker.side, worker.tracked = Channel(theirs), rescue_theirs, Side(), {}
    serving = threading.Thread(target=worker.serve, daemon=True)
    serving.start()
    conn = Channel(mine)
    until(lambda: worker.side.calls == ["rest"], "the worker's rest before any request")
    for _ in range(2):
        worker.side.calls.clear()
        conn.send(wire.request("ping", ()))
        assert wire.read_reply(conn.recv())[0] == "ok"
        until(lambda: "rest" in worker.side.calls, "the worker's rest after a reply")
        assert worker.side.calls == ["idle", "rest"]
    conn.close()  # the shell is gone: the worker closes its side and ends
    serving.join(5)
    rescue_mine.close()
    assert not serving.is_alive() and worker.side.calls[-1] == "close"

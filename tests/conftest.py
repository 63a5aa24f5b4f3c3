"""Fixtures: a shell on each backend. The GPU half follows pycuda's test layout: each test gets a
fresh context (the backend's worker process makes it) that is popped when the test ends, and it skips
without a GPU."""

from __future__ import annotations

import functools
import io
import json
from pathlib import Path

import pytest

from cudashell.backends.profile import Profile
from cudashell.language.confinement import Confinement
from cudashell.backends.sim import SimBackend
from cudashell.frontends.shell import Shell


@functools.cache
def gpu_missing() -> str | None:
    """Why the GPU tests cannot run here, or None: the packages, then whether the driver sees a GPU."""
    from cudashell.backends.cuda import cuda_unavailable_reason

    why = cuda_unavailable_reason()
    if why:
        return why
    try:
        from cudashell.backends.bindings import call

        call("cuInit", 0)
        return None if call("cuDeviceGetCount") else "the CUDA driver sees no GPU"
    except Exception as e:  # no libcuda.so.1, or the driver refused
        return f"no GPU answers: {e}"


def make_backend(name: str):
    if name == "sim":
        return SimBackend()
    if name == "sim-worker":  # the cuda backend's pipe and worker, with the simulator as its GPU side
        from cudashell.backends.cuda import CudaBackend

        return CudaBackend(side="sim")
    why = gpu_missing()
    if why:
        pytest.skip(f"no GPU: {why}")
    from cudashell.backends.cuda import CudaBackend

    return CudaBackend()


def confined_shell(backend, folder: Path, **options) -> Shell:
    """A shell as `cudashell grade` makes one: no file outside `folder` is opened, and paths start there."""
    return Shell(backend, out=io.StringIO(), err=io.StringIO(), confinement=Confinement.submission(folder),
                 workdir=folder, **options)


class Cush:
    """A shell in JSON mode whose every command's JSON object comes back to the test."""

    def __init__(self, backend, **options):
        self.out, self.err = io.StringIO(), io.StringIO()
        self.shell = Shell(backend, "test", out=self.out, err=self.err, json_mode=True, **options)
        self.backend = backend

    def run(self, line: str) -> list[dict]:
        start = self.out.tell()
        self.shell.execute(line)
        self.out.seek(start)
        objs = [json.loads(x) for x in self.out.read().splitlines() if x.strip()]
        return objs

    def ok(self, line: str) -> dict:
        """Run one command that must succeed; return its result."""
        objs = self.run(line)
        assert objs and objs[-1]["ok"], objs
        return objs[-1]["result"]

    def fails(self, line: str) -> dict:
        """Run one command that must fail; return its error."""
        objs = self.run(line)
        assert objs and not objs[-1]["ok"], objs
        return objs[-1]["error"]

    def buffer(self, name: str) -> dict:
        return next(b for b in self.ok("ls")["buffers"] if b["name"] == name)


def text_run(lines: list[str], width: int = 80, profile: str | None = None) -> str:
    """What a terminal of `width` columns shows for these commands (errors included, in order)."""
    out = io.StringIO()
    shell = Shell(SimBackend(Profile.load(profile) if profile else None), out=out, err=out)
    shell.session.settings["width"] = width
    try:
        for line in lines:
            shell.execute(line)
    finally:
        shell.close()
    return out.getvalue()


def first(cush: Cush, name: str, dtype: str = "uint8"):
    """The first value of buffer `name`, read as `dtype`."""
    return cush.ok(f"show {name} dtype {dtype} count 1")["values"][0]


@pytest.fixture(params=["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def cush(request):
    c = Cush(make_backend(request.param))
    yield c
    c.shell.close()


@pytest.fixture
def sim():
    c = Cush(SimBackend())
    yield c
    c.shell.close()


@pytest.fixture
def piped(request):
    """The cuda backend's pipe and worker process, with the simulator behind it."""
    c = Cush(make_backend("sim-worker"))
    request.addfinalizer(c.shell.close)
    return c


@pytest.fixture(params=["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def two(request):
    """A session on a machine with two GPUs: the simulator's pair, or the real GPUs where there are two."""
    if request.param == "sim":
        c = Cush(SimBackend(Profile.load("two-h200")))
    else:
        c = Cush(make_backend("cuda"))
        if len(c.ok("devices")["devices"]) < 2:
            c.shell.close()
            pytest.skip("one GPU here: the two-GPU kind of the device machine runs this")
    yield c
    c.shell.close()


def _on_profile(name: str):
    """A simulator session on a built-in profile, closed after the test."""
    c = Cush(SimBackend(Profile.load(name)))
    yield c
    c.shell.close()


@pytest.fixture
def pair():
    """The simulator's two H200s joined by NVLink."""
    yield from _on_profile("two-h200")


@pytest.fixture
def no_uva():
    """The simulator's teaching pair without UVA (pre-UVA rules for pinned memory and contexts)."""
    yield from _on_profile("two-gpus-no-uva")



# ------------------------------------------------------------------ what real runs give: codes, results, arguments
class RealRuns:
    """What came out of fuzzed lines on the simulator (every command but the slow ones, with good, edge and hostile
    arguments, on one GPU and on two), every shipped demo and a cheap line of each bench: each error code reported,
    results of each kind, and what each command's handler asked of its arguments."""

    def __init__(self):
        self.codes: set[str] = set()
        self.results: dict[str, list] = {}  # kind → a few of its results, as the handlers returned them
        self.ran: set[str] = set()  # the commands whose handlers ran
        self.declared: dict[str, set[frozenset]] = {}  # command → the names its arguments said it declares
        self.asked: dict[str, set[str]] = {}  # command → the names its handler asked for (get, col)


BENCH_LINES = ["bench memcpy h2d pinned pageable sizes 4KB reps 1", "bench alloc pinned device sizes 4KB",
               "bench zerocopy 2^10", "bench overlap streams 1", "bench latency",
               # a batch of copies: the fuzzer's rarely all succeed
               "alloc pinned 8KB as bp; alloc device 8KB as bd; stream create as bs; "
               "memcpy batch <<< memcpy bp[0:4KB] bd[4KB:]; memcpy bp[4KB:] bd[0:4KB] >>> stream bs"]


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory) -> RealRuns:
    import dataclasses
    import os

    import cudashell.commands  # noqa: F401
    from cudashell.frontends.shell import Shell
    from cudashell.language import registry
    from cudashell.language.grammar import Parsed
    from cudashell.teaching.shipped import demos
    from tests import fuzzing

    runs, work = RealRuns(), tmp_path_factory.mktemp("real_runs")

    def collect(result, error):
        if error is not None:
            runs.codes.add(error.code)
        elif result is not None and len(runs.results.setdefault(result.kind, [])) < 3:
            runs.results[result.kind].append(result)

    def watched(spec):
        def handler(session, backend, args):
            runs.ran.add(spec.name)
            runs.declared.setdefault(spec.name, set()).add(frozenset(args.names))
            args._command = spec.name
            return spec.handler(session, backend, args)
        return dataclasses.replace(spec, handler=handler)

    def asking(real):
        def ask(self, name, *rest):
            if hasattr(self, "_command"):
                runs.asked.setdefault(self._command, set()).add(name)
            return real(self, name, *rest)
        return ask

    def shell_on(profile=None):
        # a fuzzed `quit` does not end the shell: the fuzzing goes on
        return Shell(SimBackend(dataclasses.replace(Profile.load(profile), storage_budget=fuzzing.STORAGE)),
                     "real runs", out=io.StringIO(), err=io.StringIO(), workdir=work, on_report=collect,
                     quit_ends_shell=False)

    home = os.getcwd()
    registry._PARSED.clear()  # a cached parse would name the unwatched spec
    with pytest.MonkeyPatch.context() as mp:
        for name, spec in list(registry.REGISTRY.items()):
            mp.setitem(registry.REGISTRY, name, watched(spec))
        mp.setattr(Parsed, "get", asking(Parsed.get))
        mp.setattr(Parsed, "col", asking(Parsed.col))
        os.chdir(work)
        try:
            fuzz = fuzzing.Fuzzer(7, work)
            for profile in (None, None, "two-h200"):
                shell = shell_on(profile)
                try:
                    for _ in range(400):
                        shell.execute(fuzz.line(shell))
                        shell.out.seek(0), shell.out.truncate(), shell.err.seek(0), shell.err.truncate()
                finally:
                    shell.close()
            for name in demos():
                shell = shell_on()
                try:
                    shell.execute(f"demo {name}")
                finally:
                    shell.close()
            for profile, lines in ((None, BENCH_LINES), ("two-h200", ["bench peer 1MB reps 1"])):
                shell = shell_on(profile)
                try:
                    for line in lines:
                        shell.execute(line)
                finally:
                    shell.close()
        finally:
            os.chdir(home)
            registry._PARSED.clear()  # parses cached meanwhile name the watched specs: parse afresh from here on
    return runs


# ------------------------------------------------------------------ Ctrl-C once the shell side waits for the worker
def waiting_for(method: str, besides: frozenset = frozenset()) -> bool:
    """Whether the main thread is now waiting for the GPU worker's reply to `method` (CudaBackend._reply), and
    inside none of the functions named in `besides` (read from another thread: its stack as it stands)."""
    import sys
    import threading

    frame, waiting = sys._current_frames().get(threading.main_thread().ident), False
    while frame is not None:
        if frame.f_code.co_name in besides:
            return False
        if frame.f_code.co_name == "_reply" and frame.f_locals.get("what") == method:
            waiting = True
        frame = frame.f_back
    return waiting


def until(ready, what: str, timeout: float = 30) -> None:
    """Poll `ready()` until it is true; TimeoutError naming `what` when it never is."""
    import time

    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.001)


def ctrl_c_once(ready, what: str):
    """A thread that sends this process SIGINT once `ready()` is true (as Ctrl-C in the terminal would); its
    `problems` list holds the reason when that never happens. Join it after the call it interrupts."""
    import os
    import signal
    import threading

    def send():
        try:
            until(ready, what)
            os.kill(os.getpid(), signal.SIGINT)
        except TimeoutError as e:
            thread.problems.append(str(e))

    thread = threading.Thread(target=send, daemon=True)
    thread.problems = []
    thread.start()
    return thread

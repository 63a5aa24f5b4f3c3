"""Fixtures: a shell on each backend. The GPU half follows pycuda's test layout: each test gets a
fresh context (the backend's worker process makes it) that is popped when the test ends, and it skips
without a GPU."""

from __future__ import annotations

import functools
import io
import json

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.shell import Shell


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


class Cush:
    """A shell in JSON mode whose every command's JSON object comes back to the test."""

    def __init__(self, backend):
        self.out, self.err = io.StringIO(), io.StringIO()
        self.shell = Shell(backend, "test", out=self.out, err=self.err, json_mode=True)
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


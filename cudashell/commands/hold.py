"""hold and release: keep every stream from starting while work is issued, then let it all go at once — so an
experiment times the GPU, not the pace at which a person or a script issues commands (nvbandwidth's gate)."""

from __future__ import annotations

from typing import TypedDict

from ..errors import ShellError
from ..export.cemit import RELEASE
from ..language.registry import c_writer, command
from ..output.render import fmt_seconds, plural
from ..output.results import Result


def held_streams(session) -> list:
    """The current context's default stream and every stream made (another context's default stream has no handle
    that reaches it from here)."""
    return [session.default_stream, *session.streams.values()]


@command("hold", "streams", "hold every stream: what is issued next waits, until `release` lets it all go",
         "hold", "cuStreamWaitValue32 on a pinned flag per stream (or a kernel polling it); release writes it",
         details="Every stream (the default stream too, and streams made while held) waits for a flag in pinned "
                 "memory. Work issued meanwhile queues up; `release` sets the flag and the GPU runs it back to "
                 "back. While held, a call that would wait for the GPU (`sync`, a synchronous copy, `free` of GPU "
                 "memory, reading device memory) is refused with STREAMS_HELD: it would never return.")
def hold(session, backend, args):
    if session.held is not None:
        raise ShellError("ALREADY_HELD", "the streams are already held", "`release` lets them go")
    how = backend.hold([s.handle for s in held_streams(session)])
    try:
        session.held = {"since": backend.clock(), "how": how, "traced": session.traced()}
    except BaseException:  # Ctrl-C before the session knew: a hold it does not know of would never be released
        backend.release()
        raise
    return Held({"streams": [s.name for s in held_streams(session)], "how": how})


EAGER = 'setenv("CUDA_MODULE_LOADING", "EAGER", 1);  // `hold`: no kernel may load (and wait) while streams are held'
HOLD_FLAG = ("if (!hold_flag) { CHECK(cudaHostAlloc((void **)&hold_flag, sizeof(unsigned int), "
             "cudaHostAllocPortable | cudaHostAllocMapped)); *hold_flag = 0; }")


@c_writer("hold")
def c_hold(w, a, i, text):
    """Every stream (the current context's default stream too) waits on the gate kernel for `release`."""
    w.helper("hold")
    if EAGER not in w.first:
        w.first.append(EAGER)
    w.declare("unsigned int *hold_flag = nullptr;")
    w.declare("unsigned int hold_gen = 0;")
    w.emit(HOLD_FLAG, i, "cuMemHostAlloc")
    w.emit("hold_gen++;", i)
    for s in ["0", *w.stream_ctx]:
        w.in_ctx(w.ctx_of_stream(s), i, lambda s=s: w.emit(
            f"k_hold<<<1, 1, 0, {w.stream(s)}>>>(hold_flag, hold_gen); CHECK(cudaGetLastError());", i,
            "cuLaunchKernel"))
    w.held = True


@command("release", "streams", "let the held streams go: what was issued since `hold` runs at once",
         "release", "a host write of the flag the streams wait for",
         details="Says how long the streams were held and how many operations were waiting; `timeline` then "
                 "shows them running back to back.")
def release(session, backend, args):
    if session.held is None:
        raise ShellError("NOT_HELD", "no streams are held", "`hold` holds them")
    early = backend.release()
    held, session.held = session.held, None
    return Released({"held_seconds": backend.clock() - held["since"], "early": early,
                              "queued": session.traced() - held["traced"], "timing": backend.timing_label})


@c_writer("release")
def c_release(w, a, i, text):
    w.emit(RELEASE, i, "(none: a host write of the flag)")
    w.held = False


# ------------------------------------------------------------------ the results of these commands
class HoldData(TypedDict):
    streams: list[str]
    how: str


class Held(Result, kind="hold"):
    Data = HoldData

    def text(self):
        d = self.data
        return ([f"held streams {', '.join(d['streams'])} ({d['how']}): what is issued now waits for "
                "`release`"])


class ReleaseData(TypedDict):
    held_seconds: float
    early: str | None
    queued: int
    timing: str


class Released(Result, kind="release"):
    Data = ReleaseData

    def text(self):
        d = self.data
        return ([f"released after {fmt_seconds(d['held_seconds'])}: {plural(d['queued'], 'operation')} "
                f"{'was' if d['queued'] == 1 else 'were'} waiting and now run back to back ({d['timing']})"]
                + ([f"  note: {d['early']}"] if d.get("early") else []))

"""Contexts and the current GPU: `contexts`, `context create|use|destroy`, `device use N`. What each context reaches
is `info BUF`'s to show; `launch` refuses memory its context cannot reach (checks.check_reach)."""

from __future__ import annotations

import re
from typing import NotRequired, TypedDict

from ..errors import ShellError
from ..export.cemit import ident, refuse
from ..language.grammar import Arg, Opt
from ..language.registry import c_writer, command
from ..model.session import Context
from ..output.render import fit, fmt_seconds
from ..output.results import Result, timing_data
from .checks import check_name


def context_row(session, c: Context) -> dict:
    def names(group):
        return [n for n, x in group.items() if x.context == c.name]

    return {"name": c.name, "device": c.device, "kind": "primary" if c.primary else "created",
            "current": c.name == session.current, "buffers": names(session.buffers),
            "streams": [c.default.name] + names(session.streams), "events": names(session.events)}


def _switch(session, backend, c: Context, action: str, call: str, t=None) -> Result:
    """`c` current; the result carries `t` (what made it) where given, else the switch's own time."""
    used = backend.context_use(c.handle)
    session.current = c.name
    t = t or used
    return ContextChange({**context_row(session, c), "action": action, "call": call, **timing_data(t)})


@command("contexts", "session", "the contexts: each one's GPU, whether it is the GPU's primary, what lives in it",
         "contexts", "cuCtxGetCurrent (the shell keeps the list)", exported=False,
         details="`gpuN` is GPU N's primary context — the one the runtime API (cudaSetDevice) uses; `*` marks the "
                 "current one. Buffers, streams and events belong to the context they were made in; each context "
                 "has its own default stream (`ctx1:0` in the trace). `info BUF` shows which contexts reach a "
                 "buffer.")
def contexts(session, backend, args):
    return ContextList({"contexts": [context_row(session, c) for c in session.contexts.values()],
                               "current": session.current, "timing": backend.timing_label})


@command("context create", "session", "make another context on a GPU (the current one's unless told) and make it "
         "current", "context create device 0 as mine",
         "cuCtxCreate (the driver API: the runtime API has one context per GPU, its primary)",
         opts=(Opt("device", Arg("GPU", "int")), Opt("as", Arg("NAME", "newname"))),
         details="What is made from now on (buffers, streams, events) belongs to it; `context use` goes back. Under "
                 "UVA it reaches every pinned buffer — portable or not — and its GPU's memory; without UVA "
                 "(`--sim-profile two-gpus-no-uva`) only portable pinned memory and its own. `demo portable` "
                 "shows both. Names default to ctx1, ctx2, …")
def context_create(session, backend, args):
    gpu = args.get("GPU", session.context.device)
    name = args.get("NAME")
    if name is None:
        n = 1
        while f"ctx{n}" in session.contexts:
            n += 1
        name = f"ctx{n}"
    check_name(name, args.col("NAME"), "a context")
    if name in session.contexts:
        raise ShellError("NAME_TAKEN", f"a context named '{name}' exists", "pick another name", args.col("NAME"))
    handle, t = backend.context_create(gpu)
    c = Context(name, gpu, handle, primary=False)
    session.contexts[name] = c
    return _switch(session, backend, c, "created", "cuCtxCreate", t)


@c_writer("context create")
def c_context_create(w, a, i, text):
    name = a.get("NAME")
    if name is None:  # the shell's default name: the first ctxN free
        n = 1
        while f"ctx{n}" in w.created:
            n += 1
        name = f"ctx{n}"
    gpu = a.get("GPU", w.device)
    var = ident("ctx", name)
    w.helper("driver")
    w.declare(f"CUcontext {var} = nullptr;")
    w.emit(f"{var} = ctx_create({gpu});", i, "cuCtxCreate, cuCtxPopCurrent, cuCtxSetCurrent")
    w.created[name] = gpu
    w.driver_on = True
    w.ctx, w.device = name, gpu
    w.devices.add(gpu)


@command("context use", "session", "make a context current", "context use ctx1", "cuCtxSetCurrent",
         args=(Arg("NAME", "context"),))
def context_use(session, backend, args):
    c = session.context_named(args.get("NAME"), args.col("NAME"))
    return _switch(session, backend, c, "current", "cuCtxSetCurrent")


@c_writer("context use")
def c_context_use(w, a, i, text):
    name = a.get("NAME")
    if name not in w.created and not re.fullmatch(r"gpu\d+", name):
        raise refuse(text, f"the program never made context {name}")
    w.helper("driver")
    w.driver_on = True  # a primary after a made context: set through the driver, not cudaSetDevice alone
    w.ctx, w.device = name, w.ctx_device(name)
    w.devices.add(w.device)
    w.emit(w.switch(name), i, "cuCtxSetCurrent")


@command("device use", "session", "work on GPU N: its primary context becomes current", "device use 1",
         "cudaSetDevice (cuDevicePrimaryCtxRetain + cuCtxSetCurrent)", args=(Arg("GPU", "int"),),
         details="Buffers, streams, events and kernels made from now on are GPU N's (`ls` shows the GPU); a kernel "
                 "there reaches another GPU's memory after `peer enable N M`. `device use 0` goes back.")
def device_use(session, backend, args):
    c = session.primary_context(backend, args.get("GPU"))
    return _switch(session, backend, c, "current", "cudaSetDevice")


@c_writer("device use")
def c_device_use(w, a, i, text):
    w.device = a.get("GPU")
    w.ctx = f"gpu{w.device}"
    w.devices.add(w.device)
    w.emit(w.switch(w.ctx), i, "cuDevicePrimaryCtxRetain, cuCtxSetCurrent")


@command("context destroy", "session", "destroy a context made by `context create`, once nothing lives in it",
         "context destroy ctx1", "cuCtxDestroy", args=(Arg("NAME", "context"),))
def context_destroy(session, backend, args):
    c = session.context_named(args.get("NAME"), args.col("NAME"))
    if c.primary:
        raise ShellError("USAGE", f"{c.name} is GPU {c.device}'s primary context: it stays while the session lives",
                         "only contexts made by `context create` can be destroyed", args.col("NAME"))
    held = session.holdings(c.name)
    if held:
        raise ShellError("CONTEXT_IN_USE", f"{c.name} still holds {', '.join(held)}",
                         "free its buffers and destroy its streams and events first", args.col("NAME"))
    backend.context_destroy(c.handle)
    for name in [n for n, b in session.buffers.items() if b.symbol and b.context == c.name]:
        del session.buffers[name]  # its module was unloaded with it
        session.gone[name] = f"went with context {c.name}, whose module it was"
    del session.contexts[c.name]
    if session.current == c.name:
        session.current = "gpu0"
    return ContextChange({**context_row(session, c), "current": False, "action": "destroyed",
                              "call": "cuCtxDestroy", "now": session.current, "timing": backend.timing_label})


@c_writer("context destroy")
def c_context_destroy(w, a, i, text):
    name = a.get("NAME")
    if name not in w.created:
        raise refuse(text, f"the program never made context {name}")
    var = ident("ctx", name)
    w.helper("driver")
    w.emit(f"ctx_sync({var});", i, "cuCtxSynchronize", replay=True)
    del w.created[name]
    if w.ctx == name:  # the shell goes back to GPU 0's primary context
        w.ctx, w.device = "gpu0", 0
    w.emit(w.switch(w.ctx), i, replay=True)
    w.emit(f"ctx_destroy({var}); {var} = nullptr;", i, "cuCtxDestroy_v2")


# ------------------------------------------------------------------ the results of these commands
class ContextData(TypedDict):
    name: str
    device: int
    kind: str
    current: bool
    buffers: list[str]
    streams: list[str]
    events: list[str]
    action: str
    call: str
    seconds: NotRequired[float | None]
    host_seconds: NotRequired[float]
    blocking: NotRequired[bool]
    timing: str
    sync_rule: NotRequired[str | None]
    blocking_basis: NotRequired[str | None]
    now: NotRequired[str]


class ContextChange(Result, kind="context"):
    Data = ContextData

    def text(self):
        d = self.data
        what = {"created": f"context {d['name']} created on GPU {d['device']}, now current",
                "current": f"context {d['name']} ({d['kind']}, GPU {d['device']}) is current",
                "destroyed": f"context {d['name']} destroyed; {d.get('now')} is current"}[d["action"]]
        took = f" — {d['call']}" + (f", {fmt_seconds(d['host_seconds'])} ({d['timing']})" if "host_seconds" in d else "")
        return [what + took]


class ContextsDataContextsItem(TypedDict):
    name: str
    device: int
    kind: str
    current: bool
    buffers: list[str]
    streams: list[str]
    events: list[str]


class ContextsData(TypedDict):
    contexts: list[ContextsDataContextsItem]
    current: str
    timing: str


class ContextList(Result, kind="contexts"):
    Data = ContextsData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        rows = [[("* " if c["current"] else "  ") + c["name"], c["device"], c["kind"],
                 ", ".join(c["buffers"]) or "-", ", ".join(c["streams"]), ", ".join(c["events"]) or "-"]
                for c in d["contexts"]]
        return [fit(rows, ["context", "GPU", "kind", "buffers", "streams", "events"], tablefmt, width),
                "(* current: what is made now is made in it; `info BUF` says which contexts reach a buffer)"]

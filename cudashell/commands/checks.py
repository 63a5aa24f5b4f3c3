"""Checks every handler runs before it calls the backend, so the driver never sees a bad range."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import ShellError
from ..export.cemit import ident
from ..language.grammar import Arg, Opt
from ..model.regions import check_range, check_within, common_size, region  # noqa: F401  (the commands' checks)
from ..model.session import MemPool
from ..output.files import replace_file
from ..sizes import format_size, format_size_exact

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
RESERVED = {"all", "default", "as", "async", "stream", "device", "host", "size", "dtype", "count",
            "offset", "seed", "grid", "block", "n", "iota", "random", "unchecked"}


def check_host_accessible(buf, col: int | None) -> None:
    if not buf.host_accessible:
        raise ShellError("NOT_HOST_ACCESSIBLE", f"{buf.name} is device memory: the host cannot read or write it",
                         f"device memory is not host-accessible: `memcpy d2h {buf.name} HOSTBUF` it into a "
                         "host buffer first", col)


def check_device_accessible(buf, col: int | None, uva: bool) -> None:
    if buf.device_accessible:
        return
    if buf.kind == "pageable":
        hint = f"pageable memory is host-only: `register {buf.name}` pins it, or copy it to a device buffer"
    else:
        hint = ("without UVA only mapped memory is reachable: allocate it `mapped`"
                if not uva else "copy it to a device buffer first")
    raise ShellError("NOT_DEVICE_ACCESSIBLE", f"the GPU cannot reach {buf.name} ({buf.kind})", hint, col)


def check_reach(backend, buf, ctx, col: int | None) -> None:
    """A kernel in context `ctx` gets a buffer only where its context reaches it (else the GPU faults, stickily):
    asked of the backend (`reach`) unless the buffer was made in that very context."""
    if buf.context == ctx.name and buf.device == ctx.device:
        return
    got = backend.reach(buf, ctx.handle).refusal
    if got is None:
        return
    where = f"a kernel in {ctx.name} (GPU {ctx.device})"
    if got == "NO_PEER_ACCESS":
        hint = (f"`peer enable {ctx.device} {buf.device}` first, or copy it over" if ctx.primary else
                f"peer access is given to primary contexts (`peer enable`): launch after `device use {ctx.device}`, "
                "or copy it over")
        raise ShellError("NO_PEER_ACCESS", f"{buf.name} is on GPU {buf.device}: {where} cannot reach it", hint, col)
    if got == "OTHER_CONTEXT":
        raise ShellError("OTHER_CONTEXT", f"{buf.name} is device memory of context {buf.context}: without UVA {where} cannot "
                         "reach it", f"`context use {buf.context}` to launch there, or copy it over", col)
    raise ShellError(got, f"{buf.name} is not mapped in context {ctx.name}: cuMemHostGetDevicePointer there says {got}",
                     "without UVA, pinned memory is mapped only in the context that made it unless it is `portable`",
                     col)


def check_on_this_gpu(buf, gpu: int, col: int | None, what: str) -> None:
    if buf.kind == "device" and buf.device != gpu:
        raise ShellError("OTHER_GPU", f"{what} runs on GPU {gpu}; {buf.name} is on GPU {buf.device}",
                         "copy into it (`memcpy`), or launch a kernel on it after `peer enable`", col)


def check_name(name: str, col: int | None, what: str) -> None:
    if not _NAME.match(name) or name.lower() in RESERVED:
        raise ShellError("USAGE", f"'{name}' cannot name {what}",
                         "names start with a letter or _, then letters, digits, _ . -; not a keyword", col)


def check_new_name(session, name: str, col: int | None) -> None:
    check_name(name, col, "a buffer")
    if name.lower() == "ref":  # `compare ref …` is the reference figures: `compare ref h0` could not mean this buffer
        raise ShellError("USAGE", "'ref' cannot name a buffer: `compare ref` sets figures beside a reference",
                         "pick another name", col)
    if name in session.buffers:
        raise ShellError("NAME_TAKEN", f"a buffer named '{name}' exists", "pick another name or `free` it", col)


def check_pin_limit(session, backend, nbytes: int, col: int | None) -> None:
    """Refuse to page-lock past the limit: pinning most of RAM can freeze the machine."""
    limit, why = backend.pin_limit()
    if session.settings["pinlimit"] != "auto":
        limit, why = int(session.settings["pinlimit"]), "set pinlimit"
    now = session.pinned_bytes()
    if now + nbytes > limit:
        raise ShellError("PIN_LIMIT",
                         f"pinning {format_size_exact(nbytes)} more would lock {format_size(now + nbytes)}; "
                         f"{format_size(now)} is pinned and the limit is {format_size(limit)} ({why})",
                         "pinning most of RAM can freeze the machine; `set pinlimit SIZE` overrides it", col)


def check_writable(path, force: bool, col: int | None) -> None:
    """Before anything is written or settled: the folder is there and writable, and an existing file is replaced
    only when asked (`force`)."""
    folder = path.parent if str(path.parent) else Path(".")
    try:
        there = path.exists()
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise ShellError("IO_ERROR", f"cannot write {path}: "
                             f"{'no such folder' if not folder.is_dir() else 'no permission'}", None, col)
    except OSError as e:  # a name too long, a path the OS refuses to look at
        raise ShellError("IO_ERROR", f"cannot write {str(path)[:60]}…: {e.strerror}" if len(str(path)) > 60 else
                         f"cannot write {path}: {e.strerror}", None, col) from None
    if there and path.is_dir():  # not even `force` writes a folder: refused before anything settles
        raise ShellError("IO_ERROR", f"cannot write {path}: it is a folder", "give a file's name", col)
    if there and not force:
        raise ShellError("FILE_EXISTS", f"{path} exists", "add `force` to replace it, or give another name", col)


def write_file(path, text: str, col: int | None) -> None:
    """`save`, `export c`, `trace export`: the file is replaced whole or left as it was (a full disk)."""
    replace_file(path, text, col)


# `points N` on every expect line: what the check is worth when `cudashell grade` runs a checks file
POINTS = Opt("points", Arg("POINTS", "points"))
GRADED = "With `points N` it is a check worth N points in a checks file (`cudashell grade`); elsewhere points change nothing."


# ------------------------------------------------------------------ a copy's direction (memcpy, memcpy batch)
SIDE_WORD = {"h": "host", "d": "device", "hd": "managed (host or device)"}


def infer_direction(src, dst) -> str:
    """Like cudaMemcpyDefault: the direction the two buffers imply (managed counts as device)."""
    s = "d" if "d" in src.side else "h"
    d = "d" if "d" in dst.side else "h"
    return f"{s}2{d}"


def check_direction(direction: str, src, dst, col: int) -> None:
    """With managed memory on either side, cudaMemcpy's own rule (probed on the H100, under UVA): a side the direction
    calls device must be memory the GPU reaches — pageable memory there is CUDA_ERROR_INVALID_VALUE — and a side it
    calls host takes any memory. Otherwise the shell's stricter check, which teaches which direction is which."""
    s, d = direction[0], direction[2]
    if "managed" in (src.kind, dst.kind):
        for side, buf in ((s, src), (d, dst)):
            if side == "d" and buf.kind == "pageable" and buf.registered is None:
                raise ShellError("CUDA_ERROR_INVALID_VALUE",
                                 f"{direction} takes {buf.name} as device memory, but it is pageable host memory",
                                 "cudaMemcpy refuses it; leave the direction out, or `register` it first", col)
        return
    if s not in src.side or d not in dst.side:
        right = infer_direction(src, dst)
        raise ShellError("KIND_MISMATCH",
                         f"{direction} copies {SIDE_WORD[s]} to {SIDE_WORD[d]}, but {src.name} is {src.kind} "
                         f"and {dst.name} is {dst.kind}",
                         f"did you mean `memcpy {right} {src.name} {dst.name}`? (or leave the direction out)", col)


# ------------------------------------------------------------------ pools (`alloc … pool P` and the pool commands)
def default_name(device: int) -> str:
    return "default" if device == 0 else f"gpu{device}:default"


def resolve_pool(session, backend, name: str, col: int | None) -> MemPool:
    """A pool by name: a GPU's default pool (asked of the backend: cuDeviceGetDefaultMemPool) or one `pool create`
    made."""
    if name in session.pools:
        return session.pools[name]
    device = 0 if name == "default" else int(name[3:-8]) if name.startswith("gpu") and name.endswith(":default") \
        and name[3:-8].isdigit() else None
    if device is None:
        made = ", ".join(session.pools) or "none yet"
        raise ShellError("NO_SUCH_POOL", f"no pool named '{name}'",
                         f"pools: default (GPU 0's default pool), gpuN:default, made: {made}", col)
    if device and f"gpu{device}" not in session.contexts:
        session.primary_context(backend, device)  # the GPU must be known to the session (and exist)
    return MemPool(name, backend.pool_default(device), device, True)


def c_pool(w, name: str, use) -> str:
    """A statement using pool `name` as `mp`: a made pool is its variable, a default pool asked for in place."""
    if name == "default" or name.endswith(":default"):
        device = 0 if name == "default" else int(name[3:-8])
        return f"{{ cudaMemPool_t mp; CHECK(cudaDeviceGetDefaultMemPool(&mp, {device})); {use('mp')} }}"
    return use(ident("mp", name))
def pitch_word(session, text: str, col: int | None) -> str:
    """A scalar argument `img.pitch` — pitched memory's pitch, as a kernel needs it to find row y — as its number;
    any other text as it is."""
    name, dot, field = text.rpartition(".")
    if not dot or field != "pitch" or name not in session.buffers:
        return text
    shape = session.buffers[name].shape
    if shape is None:
        raise ShellError("USAGE", f"{name} is not pitched memory: it has no pitch", "alloc pitched WIDTHxHEIGHT as "
                         f"{name} makes memory with one (a linear buffer's rows are as wide as you say)", col)
    return str(shape.pitch)

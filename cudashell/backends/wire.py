"""What crosses the GPU worker's pipe, and how it is written. Most messages are a copy's, a query's or a launch's:
a method name, buffers and numbers one way, a Timing and the worker's news the other. Those go by marshal with
the buffers and the Timing as plain tuples — pickling the two dataclasses was most of a round trip's cost (about
9 µs of 17 here, measured with benchmarks/worker_roundtrip.py). Anything else goes by pickle.

marshal writes whatever has a buffer (a numpy array, a numpy scalar) as bytes and reads it back as bytes, so a
message goes by marshal only when every value in it was checked to be of an exact plain type."""

from __future__ import annotations

import marshal
import pickle
from dataclasses import dataclass, fields, replace
from operator import itemgetter

from ..model.session import Buffer, Region
from .base import Timing

MARSHALLED, PICKLED = b"M", b"P"
SCALARS = frozenset({int, float, bool, str, bytes, type(None)})
TIMING_FIELDS = tuple(f.name for f in fields(Timing))
_timing_fields = itemgetter(*TIMING_FIELDS)  # a Timing's __dict__ → its fields in order, as one tuple


@dataclass
class BufRef:
    """A session buffer as the worker sees it: the worker's handle number and the fields GpuSide reads."""

    handle: object
    name: str
    kind: str
    size: int
    host_ptr: int | None
    device_ptr: int | None
    registered: frozenset | None


def _buffer_fields(b) -> tuple:
    return b.handle, b.name, b.kind, b.size, b.host_ptr, b.device_ptr, b.registered


def to_ref(x):
    """A session Buffer becomes a BufRef (in a Region too); a kernel loses its simulator function (it does not
    pickle, and the worker has its own)."""
    kind = type(x)
    if kind in SCALARS or kind is tuple or kind is frozenset:  # most arguments (looking for attributes costs µs)
        return x
    if kind is Buffer or (hasattr(x, "registered") and hasattr(x, "host_ptr")):
        return BufRef(*_buffer_fields(x))
    if kind is Region:
        return replace(x, buf=to_ref(x.buf))
    if kind is list:
        return [to_ref(v) for v in x]
    if hasattr(x, "params") and hasattr(x, "sim"):  # functions do not pickle: the worker has its own built-ins
        return replace(x, sim=None, runs_for=None)
    return x


def plain(x) -> bool:
    """Whether marshal gives x back as it was: exact plain types all the way down. (A container of scalars alone —
    a Timing's fields, a span — is seen in one look at its items' types, not one call per item.)"""
    kind = type(x)
    if kind in SCALARS:
        return True
    if kind is tuple or kind is list or kind is frozenset:
        return _scalars(x) or all(map(plain, x))
    if kind is dict:
        return (_scalars(x) or all(map(plain, x))) and (_scalars(x.values()) or all(map(plain, x.values())))
    return False


def _scalars(items) -> bool:
    return SCALARS.issuperset(map(type, items))


def request(method: str, args: tuple) -> bytes:
    """(method, args) → bytes: buffers as their fields, with their places beside them."""
    out, places = [], []
    for i, a in enumerate(args):
        if type(a) is Buffer:
            out.append(_buffer_fields(a))
            places.append(i)
        elif plain(a):
            out.append(a)
        else:
            return PICKLED + pickle.dumps((method, tuple(map(to_ref, args))), pickle.HIGHEST_PROTOCOL)
    return MARSHALLED + marshal.dumps((method, tuple(out), tuple(places)))


def read_request(data: bytes) -> tuple[str, tuple]:
    if data[:1] == PICKLED:
        return pickle.loads(data[1:])
    method, args, places = marshal.loads(data[1:])
    if places:
        args = list(args)
        for i in places:
            args[i] = BufRef(*args[i])
    return method, tuple(args)


def reply(message: tuple) -> bytes:
    """(status, value, …the worker's news) → bytes: a Timing as its fields, marked as one."""
    value = message[1]
    if type(value) is Timing:
        wired = (message[0], _timing_fields(value.__dict__), *message[2:], True)
    else:
        wired = (*message, False)
    if plain(wired):
        return MARSHALLED + marshal.dumps(wired)
    return PICKLED + pickle.dumps(message, pickle.HIGHEST_PROTOCOL)


def read_reply(data: bytes) -> tuple:
    if data[:1] == PICKLED:
        return pickle.loads(data[1:])
    message = marshal.loads(data[1:])
    if message[-1]:
        return (message[0], _timing(message[1]), *message[2:-1])
    return message[:-1]


def _timing(values: tuple) -> Timing:
    """The Timing a reply's fields make, without the frozen dataclass's checked __init__ (half the cost, on every
    reply of work): the fields are the worker's Timing's own, in order."""
    timing = object.__new__(Timing)
    timing.__dict__.update(zip(TIMING_FIELDS, values))
    return timing

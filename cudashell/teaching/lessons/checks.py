"""The vocabulary of a lesson step's `check` (docs/lessons.md): small declarative conditions over the session —
its buffers and streams, the results of the commands since the step began, the last error, the trace's times —
never over the text typed. Each check is written once here: how a lesson file's table for it is validated (one
message per problem, so a teacher sees them all) and how it is decided. Nothing in a lesson file is evaluated as
code. Checks are about order and relations (blocking or not, overlap, which is faster), never absolute times, so
one lesson passes on the simulator and on a GPU."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass

from ...errors import ShellError
from ...model.operations import TraceEntry
from ...model.session import KIND_LETTER, Session
from ...sizes import format_size, parse_size


@dataclass
class Seen:
    """What a check looks at after a command: the session, that command's result (kind, data) or error code, the
    results since the step began (oldest first: kind, data, and the trace entries of the work the command queued)
    and how much of the trace was there when the step began."""

    session: Session
    last: tuple[str, dict] | None
    error: str | None
    results: list[tuple[str, dict, list[TraceEntry]]]
    traced_from: int


# ------------------------------------------------------------------ buffers
BUFFER_KEYS = {
    "kind": "pageable, pinned, device or managed",
    "min_size": "a size such as 64MB: at least this big",
    "flags": "a list of alloc flags it has (portable, mapped, writecombined; managed: global, host)",
    "registered": "true or false: registered with cudaHostRegister",
    "device_pointer": "true or false: the GPU has an address for it",
    "same_pointer": "true or false: its device address is its host address (UVA)",
    "pending": "true or false: GPU work on it has not finished",
}


def _size(value) -> int | None:
    """A size from a lesson file: a whole number of bytes or the shell's size words (`64MB`); None if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str):
        try:
            return parse_size(value)
        except ShellError:
            return None
    return None


def alloc_flags() -> list[str]:
    """The flag words a buffer can have: alloc's (a step asking for another could never pass) but `async`, which says
    how the memory is allocated (cudaMallocAsync), not what it is: the buffer does not keep it."""
    from ...language.registry import lookup

    return [f.word for f in lookup("alloc").flags if f.word != "async"]


def validate_buffer(spec, where: str) -> list[str]:
    if not isinstance(spec, dict):
        return [f"{where}: a table of buffer keys ({', '.join(BUFFER_KEYS)}), got {spec!r}"]
    out = []
    for key, value in spec.items():
        if key not in BUFFER_KEYS:
            out.append(f"{where}: no buffer key '{key}' (keys: {', '.join(BUFFER_KEYS)})")
        elif key == "kind" and value not in KIND_LETTER:
            out.append(f"{where}.kind: {BUFFER_KEYS['kind']}, got {value!r}")
        elif key == "min_size" and _size(value) is None:
            out.append(f"{where}.min_size: a size such as 64MB, got {value!r}")
        elif key == "flags" and not (isinstance(value, list) and all(isinstance(f, str) for f in value)):
            out.append(f"{where}.flags: a list of flag words, got {value!r}")
        elif key == "flags" and set(value) - set(alloc_flags()):
            out += [f"{where}.flags: no alloc flag '{f}' (flags: {', '.join(alloc_flags())})" for f in value
                    if f not in alloc_flags()]
        elif key not in ("kind", "min_size", "flags") and not isinstance(value, bool):
            out.append(f"{where}.{key}: true or false, got {value!r}")
    return out


def buffer_matches(spec: dict, buf) -> bool:
    if buf is None:
        return False
    tests = {
        "kind": lambda v: buf.kind == v,
        "min_size": lambda v: buf.size >= _size(v),
        "flags": lambda v: set(v) <= set(buf.flags),
        "registered": lambda v: (buf.registered is not None) == v,
        "device_pointer": lambda v: (buf.device_ptr is not None) == v,
        "same_pointer": lambda v: (buf.device_ptr is not None and buf.device_ptr == buf.host_ptr) == v,
        "pending": lambda v: bool(buf.pending) == v,
    }
    return all(tests[k](v) for k, v in spec.items())


# ------------------------------------------------------------------ results: a spec against a result's data
def _members(hint) -> list:
    """The types a field may hold, None left out (`float | None` → [float])."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(hint) if a is not type(None)]
    return [hint]


def _scalar_fits(value, hint) -> bool:
    if isinstance(value, bool):
        return hint is bool
    if isinstance(value, (int, float)):
        return hint in (int, float)
    return isinstance(value, str) and hint is str


def validate_value(spec, hint, where: str) -> list[str]:
    """Problems of `spec` as a match for a field of type `hint` (from the result's Data); [] when it fits."""
    tried: list[str] = []
    for member in _members(hint):
        problems = _validate_member(spec, member, where)
        if not problems:
            return []
        tried += problems
    return tried[:1] or [f"{where}: does not fit the field"]


def _validate_member(spec, hint, where: str) -> list[str]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(spec, dict):
        if hint is str:  # a field naming a buffer: what that buffer must be
            return validate_buffer(spec, where)
        if origin is list:
            out = [f"{where}: no key '{k}' for a list (any, all, nonempty)" for k in spec
                   if k not in ("any", "all", "nonempty")]
            out += [p for k in ("any", "all") if k in spec for p in validate_value(spec[k], args[0], f"{where}.{k}")]
            if "nonempty" in spec and not isinstance(spec["nonempty"], bool):
                out.append(f"{where}.nonempty: true or false")
            return out
        if typing.is_typeddict(hint):
            hints = typing.get_type_hints(hint)
            return [p for k, v in spec.items() for p in
                    ([f"{where}: no field '{k}' (fields: {', '.join(hints)})"] if k not in hints
                     else validate_value(v, hints[k], f"{where}.{k}"))]
        if origin is dict:
            return [] if set(spec) <= {"nonempty"} and isinstance(spec.get("nonempty", True), bool) else \
                [f"{where}: a table of this field takes only nonempty = true|false"]
        if hint in (int, float):
            return [f"{where}: no key '{k}' for a number (at_least, at_most)" for k in spec
                    if k not in ("at_least", "at_most")] + \
                [f"{where}.{k}: a number or a size, got {v!r}" for k, v in spec.items()
                 if k in ("at_least", "at_most") and _size(v) is None and not isinstance(v, float)]
        return [f"{where}: a table does not fit this field"]
    if isinstance(spec, list):
        if origin is not list:
            return [f"{where}: a list does not fit this field"]
        return [f"{where}: {x!r} does not fit the list's elements" for x in spec
                if not any(_scalar_fits(x, m) for m in _members(args[0]))]
    return [] if _scalar_fits(spec, hint) else [f"{where}: {spec!r} does not fit this field"]


def _number(value) -> float:
    return value if isinstance(value, float) else _size(value)


def value_matches(spec, value, session: Session) -> bool:
    if isinstance(spec, dict):
        if isinstance(value, str):
            return buffer_matches(spec, session.buffers.get(value))
        if isinstance(value, (list, dict)):
            if "nonempty" in spec and bool(value) != spec["nonempty"]:
                return False
            if isinstance(value, dict):
                return all(value_matches(v, value.get(k), session) for k, v in spec.items() if k != "nonempty")
            return (all(value_matches(spec["all"], x, session) for x in value) if "all" in spec else True) and \
                (any(value_matches(spec["any"], x, session) for x in value) if "any" in spec else True)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value >= _number(spec.get("at_least", value)) and value <= _number(spec.get("at_most", value))
        return False
    if isinstance(spec, list):
        return isinstance(value, list) and all(x in value for x in spec)
    if isinstance(spec, bool) or isinstance(value, bool):
        return isinstance(spec, bool) and isinstance(value, bool) and spec == value
    return spec == value


def validate_result(spec, where: str) -> list[str]:
    """A result spec: `kind` (a result kind) and fields of that kind's data, each a match for it."""
    from ...output.results import Result

    if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str):
        return [f"{where}: a table with kind = \"…\" (a result kind: copy, launch, show, …) and its fields"]
    cls = Result.KINDS.get(spec["kind"])
    if cls is None:
        return [f"{where}.kind: no result kind '{spec['kind']}' (docs/json-schema.json lists them)"]
    fields = typing.get_type_hints(cls.Data)
    out = []
    for key, value in spec.items():
        if key == "kind":
            continue
        if key not in fields:
            out.append(f"{where}: a {spec['kind']} result has no field '{key}' (fields: {', '.join(fields)})")
        else:
            out += validate_value(value, fields[key], f"{where}.{key}")
    return out


def result_matches(spec: dict, got: tuple[str, dict] | None, session: Session) -> bool:
    if got is None or got[0] != spec["kind"]:
        return False
    return all(value_matches(v, got[1].get(k), session) for k, v in spec.items() if k != "kind")


# ------------------------------------------------------------------ the checks
def _overlapping_streams(entries: list[TraceEntry]) -> int:
    """The most streams whose traced work was running at one moment (an end at t comes before a start at t)."""
    edges = sorted((t, kind, e.stream) for e in entries if e.start is not None and e.end is not None
                   and e.end > e.start for t, kind in ((e.start, 1), (e.end, 0)))
    running: dict[str, int] = {}
    most = 0
    for _, starts, stream in edges:
        running[stream] = running.get(stream, 0) + (1 if starts else -1)
        if not running[stream]:
            del running[stream]
        most = max(most, len(running))
    return most


GPU_SECONDS = "gpu_seconds"  # `by`: the GPU time of the work a command queued, as the trace knows it


def _measure(by: str, data: dict, entries: list[TraceEntry]):
    """The figure `faster` compares: a number field of the result, or the GPU time of its trace entries (None
    while any of them has not finished: on a GPU, until a `sync`)."""
    if by != GPU_SECONDS:
        value = data.get(by)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    times = [e.seconds for e in entries]
    return sum(times) if times and all(isinstance(t, (int, float)) for t in times) else None


def _faster(spec: dict, seen: Seen) -> bool:
    by, same = spec.get("by", "seconds"), spec.get("same", [])
    fast = [(d, _measure(by, d, e)) for k, d, e in seen.results if result_matches(spec["fast"], (k, d), seen.session)]
    slow = [(d, _measure(by, d, e)) for k, d, e in seen.results if result_matches(spec["slow"], (k, d), seen.session)]
    return any(ta is not None and tb is not None and ta < tb and all(a.get(f) == b.get(f) for f in same)
               for a, ta in fast for b, tb in slow)


def _validate_faster(spec, where: str) -> list[str]:
    from ...output.results import Result

    if not isinstance(spec, dict) or "fast" not in spec or "slow" not in spec:
        return [f"{where}: a table with fast = {{…}} and slow = {{…}} (result specs), by = \"FIELD\", same = [\"FIELD\"]"]
    out = [f"{where}: no key '{k}' (fast, slow, by, same)" for k in spec if k not in ("fast", "slow", "by", "same")]
    out += validate_result(spec["fast"], f"{where}.fast") + validate_result(spec["slow"], f"{where}.slow")
    if out:
        return out
    fields = [typing.get_type_hints(Result.KINDS[spec[s]["kind"]].Data) for s in ("fast", "slow")]
    by = spec.get("by", "seconds")
    if by != GPU_SECONDS and not all(any(m in (int, float) for m in _members(f.get(by, str))) for f in fields):
        out.append(f"{where}.by: '{by}' is not a number in both results (or {GPU_SECONDS})")
    same = spec.get("same", [])
    if not isinstance(same, list) or not all(isinstance(x, str) and all(x in f for f in fields) for x in same):
        out.append(f"{where}.same: a list of fields both results have, got {same!r}")
    return out


def _validate_streams(spec, where: str) -> list[str]:
    if not isinstance(spec, dict):
        return [f"{where}: a table (at_least = N, nonblocking = true|false)"]
    out = [f"{where}: no key '{k}' (at_least, nonblocking)" for k in spec if k not in ("at_least", "nonblocking")]
    if "at_least" in spec and (isinstance(spec["at_least"], bool) or not isinstance(spec["at_least"], int)):
        out.append(f"{where}.at_least: a whole number")
    if "nonblocking" in spec and not isinstance(spec["nonblocking"], bool):
        out.append(f"{where}.nonblocking: true or false")
    return out


def _validate_overlap(spec, where: str) -> list[str]:
    if not isinstance(spec, dict) or set(spec) != {"streams"} or isinstance(spec["streams"], bool) \
            or not isinstance(spec["streams"], int) or spec["streams"] < 2:
        return [f"{where}: a table streams = N (N ≥ 2)"]
    return []


def _validate_waited(spec, where: str) -> list[str]:
    if not isinstance(spec, dict) or set(spec) != {"stream"} or not isinstance(spec["stream"], str) \
            or not spec["stream"].strip():
        return [f"{where}: a table stream = \"NAME\" (a stream's name or number)"]
    return []


def _waited(spec: dict, seen: Seen) -> bool:
    """Whether the host has waited for every operation queued on the stream: the effect of `sync stream S`,
    reached just as well by a device-wide `sync` or by `event sync` of an event recorded on S after its work
    (the session's stream order knows what the host waited for, model/streamorder.py). A stream with no work
    traced holds; one the session does not have, does not."""
    s = seen.session
    name = spec["stream"]
    if name not in s.streams:
        return False
    last = next((s.trace_dropped + i for i in range(len(s.trace) - 1, -1, -1) if s.trace[i].stream == name), None)
    return last is None or last <= max(s.order.host_all, s.order.host.get(name, -1))


def _trace_since(seen: Seen) -> list[TraceEntry]:
    s = seen.session
    return s.trace[max(0, seen.traced_from - s.trace_dropped):]


@dataclass(frozen=True)
class Check:
    """One word of the vocabulary: what it means (for docs/lessons.md), how its table is validated, how it holds."""

    meaning: str
    validate: typing.Callable[[object, str], list[str]]
    holds: typing.Callable[[object, Seen], bool]


CHECKS: dict[str, Check] = {
    "buffer": Check(
        "a buffer of the session matches the buffer keys (a list of tables: one for each)",
        lambda spec, where: [p for i, one in enumerate(spec) for p in validate_buffer(one, f"{where}[{i + 1}]")]
        if isinstance(spec, list) and spec else validate_buffer(spec, where),
        lambda spec, seen: all(any(buffer_matches(one, b) for b in seen.session.buffers.values())
                               for one in (spec if isinstance(spec, list) else [spec]))),
    "streams": Check(
        "at least `at_least` (1) streams made with `stream create` exist (`nonblocking`: of that kind)",
        _validate_streams,
        lambda spec, seen: sum(1 for s in seen.session.streams.values()
                               if spec.get("nonblocking", s.nonblocking) == s.nonblocking) >= spec.get("at_least", 1)),
    "last_result": Check(
        "the command just run succeeded and its result matches",
        validate_result,
        lambda spec, seen: result_matches(spec, seen.last, seen.session)),
    "any_result": Check(
        "a command since the step began succeeded with a result that matches",
        validate_result,
        lambda spec, seen: any(result_matches(spec, r[:2], seen.session) for r in seen.results)),
    "no_result": Check(
        "no command since the step began had a result that matches",
        validate_result,
        lambda spec, seen: not any(result_matches(spec, r[:2], seen.session) for r in seen.results)),
    "error": Check(
        "the command just run failed with this error code",
        lambda spec, where: [] if isinstance(spec, str) and spec.strip() else [f"{where}: an error code, e.g. "
                                                                              "\"CUDA_ERROR_INVALID_VALUE\""],
        lambda spec, seen: seen.error == spec.upper()),
    "faster": Check(
        "since the step began, a result matching `fast` has a smaller `by` than one matching `slow`, the fields in "
        "`same` equal in both; `by` is a number field of both (seconds by default) or gpu_seconds, the GPU time of "
        "the work each queued as the trace knows it (on a GPU: after a `sync`)",
        _validate_faster,
        _faster),
    "waited": Check(
        "the host has waited for all the work queued on `stream` (by `sync stream`, a device-wide `sync`, or "
        "`event sync` of an event recorded on it after that work): the effect, however it was reached",
        _validate_waited,
        _waited),
    "overlap": Check(
        "the work traced since the step began has `streams` streams running at one moment (times as the trace "
        "knows them: after a `sync` on a GPU)",
        _validate_overlap,
        lambda spec, seen: _overlapping_streams(_trace_since(seen)) >= spec["streams"]),
}


# ------------------------------------------------------------------ near misses: what differs, said to the student
@dataclass(frozen=True)
class Miss:
    """Where the student came close: `what` (a buffer's name, or the kind of the result just shown) has `have` for
    `key` where the goal wants `want` (`bound`: at_least or at_most where the goal is a bound, else "")."""

    what: str
    key: str
    have: str
    want: str
    bound: str = ""
    buffer: bool = True


def buffer_shapes(session: Session) -> dict[str, tuple]:
    """Each buffer's kind, size and flags: what tells the buffers a command made or remade (`near_misses`' fresh)."""
    return {b.name: (b.kind, b.size, b.flags) for b in session.buffers.values()}


def _buffer_misses(spec: dict, buf) -> list[Miss]:
    """What a buffer of the table's kind lacks that was fixed when it was made (its size, its flags); what a later
    command gives it (registering it, finishing its work) is not a miss but a step still to take."""
    out = []
    if "min_size" in spec and not buffer_matches({"min_size": spec["min_size"]}, buf):
        out.append(Miss(buf.name, "size", format_size(buf.size), format_size(_size(spec["min_size"])), "at_least"))
    if "flags" in spec and not buffer_matches({"flags": spec["flags"]}, buf):
        out.append(Miss(buf.name, "flags", ",".join(sorted(buf.flags)) or "-", ",".join(spec["flags"])))
    return out


def _closeness(spec: dict, buf) -> int:
    """How much of a buffer table a buffer meets; 0 for a buffer of another kind than the table's (a pageable
    buffer too small is a near miss of "64 MB pageable"; a device buffer of 64 MB is another buffer)."""
    if "kind" in spec and buf.kind != spec["kind"]:
        return 0
    return sum(1 for key, want in spec.items() if buffer_matches({key: want}, buf))


def _shown(value) -> str:
    return str(value).lower() if isinstance(value, bool) else "-" if value is None else str(value)


def _result_misses(spec: dict, got: tuple[str, dict], session: Session) -> list[Miss]:
    out = []
    for key, want in spec.items():
        have = got[1].get(key)
        if key == "kind" or value_matches(want, have, session):
            continue
        if isinstance(want, dict) and set(want) <= {"at_least", "at_most"} and isinstance(have, (int, float)):
            bound = next(iter(want))
            out.append(Miss(got[0], key, _shown(have), str(want[bound]), bound, buffer=False))
        elif not isinstance(want, (dict, list)):
            out.append(Miss(got[0], key, _shown(have), _shown(want), buffer=False))
    return out


def near_misses(check: dict, seen: Seen, fresh: set[str]) -> list[Miss]:
    """What differs where a step's goal is missed narrowly, for the lesson to say (`h is 64 B where the goal wants at
    least 64 MiB`): for each table of a `buffer` check no buffer meets, the buffer of its kind that meets most of it
    (not one that meets another of its tables), where the command just run made or changed it (`fresh`: a buffer
    left from an earlier step is not the student's miss); for a result check, the command just run where its
    result is of the kind asked."""
    out = []
    if "buffer" in check:
        specs = check["buffer"] if isinstance(check["buffer"], list) else [check["buffer"]]
        bufs = list(seen.session.buffers.values())
        taken = {b.name for b in bufs for spec in specs if buffer_matches(spec, b)}
        for spec in specs:
            if any(buffer_matches(spec, b) for b in bufs):
                continue
            close = [(_closeness(spec, b), i, b) for i, b in enumerate(bufs) if b.name not in taken]
            best = max((c for c in close if c[0] > 0), key=lambda c: c[:2], default=None)
            if best is not None and best[2].name in fresh:
                out += _buffer_misses(spec, best[2])
    for name in ("last_result", "any_result"):
        spec = check.get(name)
        if spec and seen.last is not None and seen.last[0] == spec["kind"] and \
                not CHECKS[name].holds(spec, seen):
            out += _result_misses(spec, seen.last, seen.session)
    return out


def validate(check, where: str) -> list[str]:
    """Problems of a step's `check` table (every key a check, all of which must hold)."""
    if not isinstance(check, dict) or not check:
        return [f"{where}: a table of one or more checks ({', '.join(CHECKS)})"]
    out = []
    for name, spec in check.items():
        if name not in CHECKS:
            out.append(f"{where}: no check '{name}' (checks: {', '.join(CHECKS)})")
        else:
            out += CHECKS[name].validate(spec, f"{where}.{name}")
    return out


def holds(check: dict, seen: Seen) -> bool:
    return all(CHECKS[name].holds(spec, seen) for name, spec in check.items())

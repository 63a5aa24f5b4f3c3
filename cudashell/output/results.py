"""What a handler returns: a Result — one class per kind of result, defined beside the handler that makes it, owning
the type of its data (`Data`: what `--json` prints and the JSON Schema publishes), its text, its HTML and its
figure — and an optional action: work only the Shell can do (run a script, repeat a block, quit), as an object
that carries what it needs. Handlers never print. The kinds several modules return (message, settings, sync,
expect) and the ones the backends report (callback, kernel output) are here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NotRequired, TypedDict

from ..model.operations import of_text
from ..model.settings import SETTINGS
from ..sizes import format_size
from .render import fmt_seconds, timing_note, wrap


@dataclass(frozen=True)
class RunScript:
    """`run FILE`, or a demo: `scope` (its settings) runs it on a session of its own, released at its end."""

    path: str
    col: int | None
    scope: dict | None = None


@dataclass(frozen=True)
class Repeat:
    """`repeat N <<< … >>>`: the block N times, output held back; `shell`: every round through the shell."""

    times: int
    commands: str
    col: int | None
    shell: bool = False


@dataclass(frozen=True)
class Block:
    """`if gpus N <<< … >>>` where the machine has them, a lesson's answers: the block's commands, each shown as a
    typed one is. `confined`: they come from a file someone else wrote (a lesson's), and write only inside the
    folder they run from."""

    commands: str
    col: int | None
    confined: bool = False


@dataclass(frozen=True)
class Quit:
    """`quit`: release everything and leave."""


@dataclass(frozen=True)
class Output:
    """`output FILE`: the results that follow are appended to FILE; None (`output off`) brings them back."""

    path: str | None
    col: int | None


@dataclass(frozen=True)
class Edit:
    """`edit [FILE]`: the text (the last command) or the file opened in the user's editor; what comes back waits
    at the next prompt, to run with Enter."""

    text: str
    path: str | None
    col: int | None


Action = RunScript | Repeat | Block | Quit | Output | Edit


class Result:
    """Subclass per kind: `class Copy(Result, kind="copy")` with its `Data` and `text()` (prose, wrapped to the
    width) or `lines()` (a table that fits itself); `figure()` where it draws one."""

    kind: ClassVar[str] = ""
    Data: ClassVar[type]  # a TypedDict: the data's keys and their types
    prose: ClassVar[bool] = False  # no CSV form
    KINDS: ClassVar[dict[str, type[Result]]] = {}  # every kind, by name: for the JSON Schema and the backends' reports

    def __init_subclass__(cls, kind: str = "", **kw):
        super().__init_subclass__(**kw)
        if kind:
            if kind in Result.KINDS:
                raise TypeError(f"two result types for {kind!r}: {Result.KINDS[kind].__name__} and {cls.__name__}")
            cls.kind = kind
            Result.KINDS[kind] = cls

    def __init__(self, data: dict, action: Action | None = None, *, as_json: bool = False, named: str | None = None):
        self.data = data  # JSON-ready, of the type Data
        self.action = action
        self.as_json = as_json  # `bench … --json`: shown as its JSON object even in text mode (not part of the data)
        self.named = named  # the name the shell gave what it made (`alloc` → p0): history records `as p0`

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.data!r})"

    @property
    def api_call(self) -> tuple[str, float] | None:
        """(the CUDA call the command made, the host's seconds in it) for `profile`'s API table; None when the
        command made none, or did not time it."""
        if "call" in self.data and "host_seconds" in self.data:
            return self.data["call"], self.data["host_seconds"]
        return None

    @property
    def interrupted(self) -> bool:
        """Ctrl-C stopped it part way and it kept what it had (a bench): a script stops after it."""
        return bool(self.data.get("interrupted"))

    def text(self) -> list[str]:
        """Its lines of text, before they are wrapped to the terminal."""
        raise NotImplementedError(type(self).__name__)

    def lines(self, tablefmt: str = "simple", width: int = 0) -> list[str]:
        """What the terminal shows: the text wrapped to `width` (tables override this and fit themselves)."""
        return wrap(self.text(), width)

    def figure(self):
        """A matplotlib figure of it (a notebook shows it inline), or None."""
        return None


class MessageData(TypedDict):
    """A sentence, and what it is about: many commands answer so (destroy, query, advise, export, …)."""

    text: str
    name: NotRequired[str]
    advice: NotRequired[str]
    where: NotRequired[str | None]
    gpus: NotRequired[int]
    needs: NotRequired[int]
    runs: NotRequired[bool]
    commands: NotRequired[int | str]
    col: NotRequired[int]
    stream: NotRequired[str]
    call: NotRequired[str]
    seconds: NotRequired[float | None]
    host_seconds: NotRequired[float]
    blocking: NotRequired[bool]
    timing: NotRequired[str]
    sync_rule: NotRequired[str | None]
    blocking_basis: NotRequired[str | None]
    path: NotRequired[str | None]
    ms: NotRequired[float]
    ops: NotRequired[int]
    pending: NotRequired[int]
    event: NotRequired[str]
    busy: NotRequired[bool]
    number: NotRequired[int]
    nonblocking: NotRequired[bool]
    priority: NotRequired[int]
    legacy_default: NotRequired[bool]
    idle: NotRequired[bool]
    context: NotRequired[str]
    done: NotRequired[bool]
    skipped: NotRequired[list[str]]


class Message(Result, kind="message"):
    Data = MessageData
    prose = True

    def text(self):
        return [self.data["text"]]


def hexptr(p: int | None) -> str | None:
    """A pointer as the driver's tools print it: 8 hex digits where it fits 32 bits (a 32-bit system's, such as the
    `no-uva` profile's), 12 for a 48-bit virtual address."""
    return None if p is None else f"0x{p:08x}" if p < 1 << 32 else f"0x{p:012x}"


# the fields every timed result carries (timing_data), once: a kind's Data takes them by inheritance or `**`
TIMING_FIELDS = {"seconds": float | None, "host_seconds": float, "blocking": bool, "timing": str,
                 "sync_rule": str | None, "blocking_basis": str | None}
TimingData = TypedDict("TimingData", TIMING_FIELDS)


def timing_data(t) -> TimingData:
    return {"seconds": t.seconds, "host_seconds": t.host_seconds, "blocking": t.blocking, "timing": t.label,
            "sync_rule": t.rule, "blocking_basis": t.basis or None}


def json_schema() -> dict:
    """The JSON Schema of one `--json` line, built from the result types (each Result subclass's Data): "result" is
    the data of the result named by "kind". A key no type declares is refused (additionalProperties false), so the schema
    cannot fall behind the output unnoticed."""
    import types
    import typing

    from ..language.registry import load

    load()  # every command module: each defines the results it returns

    defs: dict[str, dict] = {}

    def schema(t) -> dict:
        origin, args = typing.get_origin(t), typing.get_args(t)
        if t is type(None) or t is None:
            return {"type": "null"}
        simple = {int: "integer", float: "number", str: "string", bool: "boolean"}
        if t in simple:
            return {"type": simple[t]}
        if origin in (typing.Union, types.UnionType):
            return {"anyOf": [schema(a) for a in args]}
        if origin is list:
            return {"type": "array", "items": schema(args[0])}
        if origin is dict:
            return {"type": "object", "additionalProperties": schema(args[1])}
        if typing.is_typeddict(t):
            if t.__name__ not in defs:
                defs[t.__name__] = {}  # a placeholder while its fields are built
                # NotRequired read from the hints: under `from __future__ import annotations` the class's own
                # __required_keys__ cannot see it (Python 3.11)
                hints = typing.get_type_hints(t, include_extras=True)
                optional = {k for k, v in hints.items() if typing.get_origin(v) is NotRequired}
                defs[t.__name__] = {"type": "object", "properties": {
                    k: schema(typing.get_args(v)[0] if k in optional else v) for k, v in hints.items()},
                    "required": sorted(set(hints) - optional), "additionalProperties": False}
            return {"$ref": f"#/$defs/{t.__name__}"}
        raise TypeError(f"no JSON Schema for {t!r}")

    kinds = [{"if": {"properties": {"kind": {"const": kind}}},
              "then": {"properties": {"result": {"anyOf": [schema(t), {"type": "null"}]}}}}
             for kind, t in sorted((k, c.Data) for k, c in Result.KINDS.items())]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://cudashell.dev/schema/json-line.json",
        "title": "one line of cudashell --json: a command, whether it succeeded, its error or its result",
        "type": "object",
        "required": ["cmd", "ok", "kind", "error", "result"],
        "properties": {
            "cmd": {"type": "string"},
            "ok": {"type": "boolean"},
            "kind": {"anyOf": [{"enum": sorted(Result.KINDS)}, {"type": "null"}]},
            "error": {"anyOf": [{"type": "null"}, {
                "type": "object", "required": ["code", "message", "hint", "file", "line", "col"],
                "additionalProperties": False,
                "properties": {"code": {"type": "string"}, "message": {"type": "string"},
                               "hint": {"type": ["string", "null"]}, "file": {"type": ["string", "null"]},
                               "line": {"type": ["integer", "null"]}, "col": {"type": ["integer", "null"]}}}]},
            "result": {"type": ["object", "null"]},
            "wall_seconds": {"type": "number"},
            "explain": {"type": "object", "required": ["c", "driver"], "additionalProperties": False,
                        "properties": {"c": {"type": "string"}, "driver": {"type": "string"}}},
        },
        "additionalProperties": False,
        "allOf": kinds,
        "$defs": dict(sorted(defs.items())),
    }


class CallbackData(TypedDict):
    text: str
    stream: str
    at: float


class Callback(Result, kind="callback"):
    Data = CallbackData

    def text(self):
        d = self.data
        return [f"callback on stream {d['stream']} at {fmt_seconds(d['at'])}: {d['text']}"]


class ExpectData(TypedDict):
    expected: str
    passed: bool
    ms: NotRequired[list[float]]
    speedup: NotRequired[float]
    timing: NotRequired[str]
    a: NotRequired[str]
    b: NotRequired[str]
    a_offset: NotRequired[int]
    b_offset: NotRequired[int]
    a_part: NotRequired[str]
    b_part: NotRequired[str]
    bytes: NotRequired[int]
    equal: NotRequired[bool]
    host_seconds: NotRequired[float]  # expect equal: the host's time to compare (its `timing` says how it is known)
    pending: NotRequired[dict[str, list[str]]]


class Expectation(Result, kind="expect"):
    Data = ExpectData

    def text(self):
        d = self.data
        return ([f"expect faster: {d['ms'][0]:.3f} ms < {d['ms'][1]:.3f} ms ("
                + (f"{d['speedup']:.2f}× faster" if d["speedup"] else "no time at all") + f", {d['timing']})"]
                if d["expected"] == "faster" else [])


class KernelOutputData(TypedDict):
    result: str
    kernel: str
    lines: list[str]
    warnings: list[str]
    dropped: int


class KernelOutput(Result, kind="kernel_output"):
    Data = KernelOutputData

    def text(self):
        """A user kernel's printf lines (flushed when it completes, as the GPU's buffer is) and racecheck's warnings."""
        d = self.data
        out = list(d["lines"])
        if d["dropped"]:
            out.append(f"({d['dropped']} more printf lines dropped: the buffer holds {len(d['lines'])})")
        return out + [f"warning: {w}" for w in d["warnings"]]


class SettingsData(TypedDict):
    settings: dict[str, float | str]


class Settings(Result, kind="settings"):
    Data = SettingsData
    prose = True

    def text(self):
        d = self.data
        return [f"{k} = {SETTINGS[k].show(v) if k in SETTINGS else v}" for k, v in d["settings"].items()]


class SyncDataCompletedItem(TypedDict):
    op: str
    stream: str
    bytes: int
    seconds: float | None
    start: float
    end: float


class SyncData(TimingData):
    what: str
    call: str
    completed: list[SyncDataCompletedItem]


class Synced(Result, kind="sync"):
    Data = SyncData

    def text(self):
        d = self.data
        out = [f"sync {d['what']}: host waited {fmt_seconds(d['host_seconds'])} {timing_note(d)}"]
        finished: dict[str, int] = {}  # a repeat's 200 copies are one line each alike: each line once, counted
        for e in d["completed"]:
            operation, _ = of_text(e["op"])
            rate = f" = {e['bytes'] / e['seconds'] / 1e9:.2f} GB/s" if e["seconds"] and operation.moves_bytes else ""
            kernel = operation.runs_kernel  # what it moved (read and written); spin: nothing, so no figure
            size = f", {format_size(e['bytes'])}{' moved' if kernel else ''}" if e["bytes"] or not kernel else ""
            line = f"  finished: {e['op']} on stream {e['stream']}{size} in {fmt_seconds(e['seconds'])}{rate}"
            finished[line] = finished.get(line, 0) + 1
        return out + [line + (f" ×{n}" if n > 1 else "") for line, n in finished.items()]


def schema_json() -> str:
    """The JSON Schema of a `--json` line, as published in docs/ (and printed by `cudashell --json-schema`)."""
    import json

    return json.dumps(json_schema(), indent=1, ensure_ascii=False) + "\n"

"""The GPU operations the trace records, one row each, and the trace entry itself. A row is all the shell knows
about a kind of operation — the engine it runs on, how the timeline, nvprof and a figure show it, the
synchronisation rule that says who blocks (syncrules.py stays the truth), which command and contract method issue
it, and what the advice rules make of it — so views, plans and rules read the row, and nothing else matches an
operation's text. Pure: imports only syncrules (itself pure)."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import syncrules as R

ENGINES = ("copy H2D", "copy D2H", "compute", "host")  # the hardware, as the timeline names it, in its order

# What the advice rules match (advice.py), instead of a command's name:
STREAM = "stream"  # queues work on a stream: the host may go on while it runs
COPY = "copy"  # copies a source (SRC) to a destination (DST): a copy's sync rule, tiny copies, new data from the host
DEVICE = "device"  # the GPU touches the buffers it names where they are (a managed buffer's pages come to it)
PLACES = "places"  # says where a managed buffer's pages live
KERNEL_RUN = "kernel"  # runs a kernel over the arguments it names (what it read, how it accessed memory)


@dataclass(frozen=True)
class Operation:
    key: str  # its text in the trace ("memcpy h2d"); a kernel's adds the kernel's name ("kernel add")
    command: str | None  # the command that issues it (None: none of its own)
    method: str | None  # the contract method that issues it (backends/base.CONTRACT)
    engine: str  # one of ENGINES
    glyph: str  # its letter in the timeline
    nvprof: str | None  # nvprof's name for the activity; None: the kernel's own name
    colour: str  # its bars in a figure (matplotlib's colour names)
    legend: str  # its name in a figure's legend (rows that look alike share one)
    sync: object  # syncrules' Rule for it, or the syncrules function that picks one; None: each of its parts' own
    moves_bytes: bool  # copies its bytes between buffers: their count over its time is a bandwidth
    tags: frozenset = field(default=frozenset())  # what the advice rules match (STREAM, COPY, …)

    def text(self, name: str | None = None) -> str:
        """Its text in the trace and in JSON: the key, and a kernel's name after it."""
        return f"{self.key} {name}" if name else self.key

    @property
    def runs_kernel(self) -> bool:
        return KERNEL_RUN in self.tags


def _memcpy(direction: str, engine: str, glyph: str, nvprof: str, colour: str) -> Operation:
    return Operation(f"memcpy {direction}", "memcpy", "memcpy", engine, glyph, f"[CUDA memcpy {nvprof}]", colour,
                     f"memcpy {direction}", R.memcpy_rule, True, frozenset({STREAM, COPY}))


def _prefetch(where: str, engine: str, nvprof: str) -> Operation:
    return Operation(f"prefetch {where}", "prefetch", "prefetch", engine, "P", f"[Unified Memory prefetch {nvprof}]",
                     "tab:olive", "prefetch", R.prefetch_rule, False, frozenset({STREAM, PLACES}))


MEMCPY = {  # by the direction the command names
    "h2d": _memcpy("h2d", "copy H2D", "H", "HtoD", "tab:blue"),
    "d2h": _memcpy("d2h", "copy D2H", "D", "DtoH", "tab:orange"),
    "d2d": _memcpy("d2d", "compute", "C", "DtoD", "tab:purple"),
    "h2h": _memcpy("h2h", "host", "h", "HtoH", "tab:brown"),
}
# 2-D and 3-D copies (cudaMemcpy2D, cudaMemcpy3D): copies on the same engines, drawn with the same letters and named
# as nvprof names them (one activity kind for every copy); their own keys, so `profile` and the advice tell them apart
MEMCPY_SHAPED = {
    (dims, direction): Operation(f"memcpy{dims} {direction}", f"memcpy{dims}", "memcpy_shaped", row.engine, row.glyph,
                                 row.nvprof, row.colour, row.legend, R.memcpy_rule, True, row.tags)
    for dims in ("2d", "3d") for direction, row in MEMCPY.items()
}
MEMSET = Operation("memset", "memset", "memset", "compute", "M", "[CUDA memset]", "tab:gray", "memset",
                   R.memset_rule, False, frozenset({STREAM, DEVICE}))
KERNEL = Operation("kernel", "launch", "launch", "compute", "K", None, "tab:green", "kernel", R.QUEUED, False,
                   frozenset({STREAM, DEVICE, KERNEL_RUN}))
PREFETCH = {"device": _prefetch("device", "copy H2D", "HtoD"), "host": _prefetch("host", "copy D2H", "DtoH")}
# cudaMemcpyBatchAsync: one call, many copies, run in stream order as one piece of work; its entry's engine is that of
# its copies' direction (session.track's `engine`), this row's when they go several ways. No COPY tag: the rules that
# read a copy's SRC and DST read one copy's.
MEMCPY_BATCH = Operation("memcpy batch", "memcpy batch", "memcpy_batch", "copy H2D", "B", "[CUDA memcpy batch]",
                         "tab:cyan", "memcpy batch", R.batch_rule, True, frozenset({STREAM}))
# The stream-ordered allocator (cudaMallocAsync / cudaFreeAsync): no engine moves anything — the driver hands the
# address back at once, on the host, and the stream reaches the allocation (or the free) in its order — so their
# engine row is the host's. No advice tags: tags are a command's (tags_of), and `alloc`/`free` issue these only with
# `async`: STREAM would make every cudaMalloc and cudaFree look like stream work to the rules.
ALLOC_ASYNC = Operation("alloc async", "alloc", "alloc_async", "host", "A", "[cudaMallocAsync]", "tab:pink",
                        "alloc async", R.QUEUED, False)
FREE_ASYNC = Operation("free async", "free", "free_async", "host", "F", "[cudaFreeAsync]", "tab:red", "free async",
                       R.QUEUED, False)
# A `repeat` run whose operations' records are not read yet (or were lost): one entry for all of them, on their
# engine (compute when they used several). The rounds' operations are issued as their own kinds.
REPEAT = Operation("repeat", None, "run_plan", "compute", "E", "repeat", "tab:cyan", "repeat (its operations)",
                   None, False)

OPERATIONS: tuple[Operation, ...] = (*MEMCPY.values(), *MEMCPY_SHAPED.values(), MEMCPY_BATCH, MEMSET, KERNEL,
                                     *PREFETCH.values(), ALLOC_ASYNC, FREE_ASYNC, REPEAT)
BY_KEY = {op.key: op for op in OPERATIONS}


def of_text(text: str) -> tuple[Operation, str | None]:
    """The row and the kernel's name (else None) of an operation's text, as JSON shows it (`sync`'s finished list, a
    timeline's spans): the one place that reads the text."""
    if text in BY_KEY:
        return BY_KEY[text], None
    key, _, name = text.partition(" ")
    if BY_KEY.get(key) is KERNEL and name:
        return KERNEL, name
    raise KeyError(f"no GPU operation '{text}'")


def issued_by(command: str) -> tuple[Operation, ...]:
    """The rows a command issues (memcpy: one a direction)."""
    return tuple(op for op in OPERATIONS if op.command == command)


def tags_of(command: str) -> frozenset:
    """What the advice rules see in a command: the tags of the operations it issues."""
    return frozenset().union(*(op.tags for op in issued_by(command)))


@dataclass(slots=True)
class TraceEntry:
    """One GPU operation as the trace knows it: where it ran and, once it finished, when (its times fill in as the
    backend resolves its token and, on a GPU with CUPTI, as its engine record is read by its tag). JSON shows it
    through `fields()`, with the keys the dicts it replaced had."""

    operation: Operation
    stream: str
    bytes: int
    seconds: float | None
    start: float | None
    end: float | None
    timing: str  # "measured" or "modeled"
    token: object = None  # the backend's, while the work runs
    issued: float | None = None  # when the host issued it
    tag: int | None = None  # the backend's id for its profiler record, until asked once
    name: str | None = None  # a kernel's name
    engine: str = ""  # the row's, unless a `repeat` run's operations ran on another
    counts: dict | None = None  # what a user kernel moved, as the simulator counted it (for `profile`)
    source: str | None = None  # who timed it, where not its timing label (CUPTI)
    plan: tuple | None = None  # a `repeat` run's (records tag, templates, partial) while its records are unread

    def __post_init__(self):
        self.engine = self.engine or self.operation.engine

    @property
    def op(self) -> str:
        """Its text: the row's key, and a kernel's name."""
        return self.operation.text(self.name)

    def fields(self, *keys: str) -> dict:
        """The given keys as a dict (`op` is the text): what JSON shows of it."""
        return {k: getattr(self, k) for k in keys}


def plan_entries(templates: dict[int, TraceEntry], records, label: str) -> list[TraceEntry]:
    """The trace entries of a `repeat` plan's rounds, one per operation the backend timed (CUPTI, the simulator):
    `templates` by call index, round 1's entries; `records` (call index, issued, start, end)."""
    return [TraceEntry(t.operation, t.stream, t.bytes, end - start, start, end, label, None, issued, name=t.name,
                       engine=t.engine) for k, issued, start, end in records if (t := templates.get(k)) is not None]

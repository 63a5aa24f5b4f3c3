"""The kernel corpus (tests/kernel_corpus.py) run through the shell, with shell commands only: `kernel
load`/`kernel define`, `alloc` (and `register`), `fill` and `memcpy` of parts for the inputs (`memcpy h2d` into
a module's symbols), `launch … grid … block … shared …`, `sync`, then `memcpy` and `show` to read the outputs'
bytes. tests/test_public_kernels.py runs code nobody here wrote through this same runner.

On the simulator every case must give the numpy reference's bytes (or the expected error at the sync, after
which `reset` recovers, or the refusal of code outside the subset); on a GPU the same cases run on both
backends and must give identical bytes — the GPU is the truth the simulator is held to."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from cudashell.model.kernels import BUILTINS
from tests.conftest import Cush, make_backend
from tests.kernel_corpus import (
    CASES,
    HOST_KINDS,
    KERNELS,
    REFUSED,
    RESERVED,
    RUNNABLE,
    SYMBOL_KINDS,
    Buf,
    Case,
)

ALLOC = {"device": "alloc device {size} as {name}",
         "managed": "alloc managed {size} as {name}",
         "pinned": "alloc pinned {size} as {name}",
         "mapped": "alloc pinned {size} mapped as {name}",
         "registered": "alloc pageable {size} as {name}; register {name} mapped",
         "readonly": "alloc pageable {size} as {name}; register {name} readonly"}


def ids(cases):
    return [c.name for c in cases]


# ------------------------------------------------------------------ the runner
@dataclass
class Run:
    outputs: dict[str, bytes]  # each output buffer's bytes after the sync
    error: dict | None  # the sync's error, if it failed
    said: str  # every string the load, launch and sync answered with, and the shell's stderr


def ok(c: Cush, line: str) -> dict:
    """Run a line of `;`-separated commands that must all succeed; the last one's result."""
    objs = c.run(line)
    assert objs and all(o["ok"] for o in objs), objs
    return objs[-1]["result"]


def dims(d) -> str:
    """A grid or block in the shell's syntax: `16` or `16,16` or `4,4,2`."""
    return ",".join(map(str, d)) if isinstance(d, tuple) else str(d)


def put(c: Cush, buf: Buf, target: str) -> None:
    """Give `buf` (the shell's `target`) its initial bytes: `fill` it where the host can write it; otherwise
    (device memory, a module's symbol, or a buffer made of several fills) fill a pinned staging buffer — part by
    part through `memcpy … stage[OFF:+N]` — and copy that in. A symbol as loaded keeps its initialiser's bytes."""
    layout = buf.layout()
    if buf.kind == "as-loaded":
        return
    if len(layout) == 1 and buf.kind in HOST_KINDS:
        ok(c, f"fill {buf.name} {layout[0][2].words(buf.dtype)}")
        return
    stage = f"{buf.name}_stage"
    ok(c, f"alloc pinned {buf.nbytes} as {stage}")
    if len(layout) == 1:
        ok(c, f"fill {stage} {layout[0][2].words(buf.dtype)}")
    else:
        part = f"{buf.name}_part"
        for offset, count, fill in layout:
            nbytes = count * np.dtype(fill.dtype or buf.dtype).itemsize
            ok(c, f"alloc pinned {nbytes} as {part}; fill {part} {fill.words(buf.dtype)}; "
                  f"memcpy {part} {stage}[{offset}:+{nbytes}]; free {part}")
    into = "h2d " if buf.kind in SYMBOL_KINDS else ""  # cudaMemcpyToSymbol; else the direction is inferred
    ok(c, f"memcpy {into}{stage} {target}; free {stage}")


def read(c: Cush, buf: Buf, source: str) -> bytes:
    """A buffer's bytes (the shell's `source`) through `show`: device memory and symbols are copied into pinned
    memory first (`memcpy d2h`: cudaMemcpy, or cudaMemcpyFromSymbol for a symbol)."""
    name = source
    if buf.kind not in HOST_KINDS:
        name = f"{buf.name}_back"
        if name not in {b["name"] for b in c.ok("ls")["buffers"]}:
            ok(c, f"alloc pinned {buf.nbytes} as {name}")
        ok(c, f"memcpy d2h {source} {name}")
    return bytes(ok(c, f"show {name} dtype uint8 count {buf.nbytes}")["values"])


def strings(obj) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


def load(c: Cush, case: Case) -> list[dict]:
    if case.source is not None:
        return c.run(f"kernel define {case.kernel} <<< {case.source} >>>")
    return c.run(f'kernel load "{case.file}"' + (f" as {case.module}" if case.module else ""))


def execute(c: Cush, case: Case) -> Run:
    """Load (which makes the module's symbols), set the case's buffers up, check that they hold what the
    reference starts from, launch, sync, and read the outputs back (unless the sync failed)."""
    loaded = load(c, case)
    assert loaded and loaded[-1]["ok"], loaded
    for buf in case.buffers:
        if buf.kind not in SYMBOL_KINDS:
            ok(c, ALLOC[buf.kind].format(size=buf.nbytes, name=buf.name))
        put(c, buf, case.shell_name(buf))
    for buf in case.buffers:
        assert read(c, buf, case.shell_name(buf)) == buf.initial().tobytes(), \
            f"{buf.name}: the shell's fill (or the module's initialiser) is not the corpus's"
    line = f"launch {case.launch_name} {case.args} grid {dims(case.grid)} block {dims(case.block)}"
    launched = c.run("; ".join([*case.launched_before, line + (f" shared {case.shared}" if case.shared else "")]))
    assert launched and all(o["ok"] for o in launched), launched
    synced = c.run("sync")
    error = None if synced[-1]["ok"] else synced[-1]["error"]
    outputs = {} if error else {b.name: read(c, b, case.shell_name(b)) for b in case.outputs}
    said = "\n".join(strings(loaded + launched + synced) + [c.err.getvalue()])
    return Run(outputs, error, said)


def recover(c: Cush, case: Case) -> None:
    """After a fault: `reset` brings the session back, host memory keeps its bytes, and a kernel runs again."""
    ok(c, "reset")
    for name in case.intact:
        assert read(c, case.buf(name), name) == case.buf(name).initial().tobytes(), f"{name} changed"
    ok(c, "alloc device 4KB as probe; launch increment probe; sync")


# ------------------------------------------------------------------ what a run must show
def elements(buf: Buf, raw: bytes) -> np.ndarray:
    """The bytes as unsigned integers of the element size, to compare bit for bit (NaN and -0.0 included)."""
    return np.frombuffer(raw, f"u{np.dtype(buf.dtype).itemsize}")


def compared(case: Case, buf: Buf) -> np.ndarray:
    """The elements that must match: all but those racing atomics set (case.check judges those)."""
    keep = np.ones(buf.count, bool)
    keep[list(case.unordered.get(buf.name, ()))] = False
    return keep


def ordered_bits(x: np.ndarray) -> np.ndarray:
    """float32 bits mapped to integers that count ulps across zero."""
    i = x.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def check_reference(case: Case, outputs: dict[str, bytes], where: str) -> None:
    expected = case.expected()
    for buf in case.outputs:
        keep = compared(case, buf)
        if buf.name in case.ulps:
            got, want = np.frombuffer(outputs[buf.name], buf.dtype), expected[buf.name]
            off = np.abs(ordered_bits(got) - ordered_bits(want))[keep]
            worst = int(np.argmax(off))
            assert off.max() <= case.ulps[buf.name], (
                f"{where}: {buf.name}[{worst}] = {got[keep][worst]!r} is {off[worst]} ulps from numpy's "
                f"{want[keep][worst]!r} (at most {case.ulps[buf.name]})")
            continue
        got, want = elements(buf, outputs[buf.name]), elements(buf, expected[buf.name].tobytes())
        bad = np.flatnonzero((got != want) & keep)
        if bad.size:
            k = int(bad[0])
            typed_got = np.frombuffer(outputs[buf.name], buf.dtype)[k]
            raise AssertionError(f"{where}: {buf.name} differs from the reference at {bad.size} of {buf.count} "
                                 f"elements; first [{k}]: {typed_got!r} vs {expected[buf.name][k]!r}")
    if case.check:
        case.check({b.name: np.frombuffer(outputs[b.name], b.dtype) for b in case.outputs})


def check_printf(case: Case, text: str, where: str) -> None:
    """Every expected line was printed (as many times as expected); the order between warps is free."""
    lines = Counter(line.strip() for line in text.splitlines())
    missing = Counter(case.printf) - lines
    assert not missing, f"{where}: lines not printed: {sorted(missing)}; printed: {text[-2000:]!r}"


def sha256(buf: Buf, raw: bytes, keep: np.ndarray) -> str:
    return hashlib.sha256(elements(buf, raw)[keep].tobytes()).hexdigest()


# ------------------------------------------------------------------ what each test holds, for any case
def on_the_simulator(sim: Cush, case: Case) -> None:
    """The case gives the reference's bytes, its printed lines or its error (after which `reset` recovers)."""
    run = execute(sim, case)
    if case.error:
        assert run.error is not None and run.error["code"] == case.error, run.error
        recover(sim, case)
        return
    assert run.error is None, run.error
    if case.printf:
        check_printf(case, run.said, "simulator")
    if case.reference:
        check_reference(case, run.outputs, "simulator")


def refused_by_the_simulator(sim: Cush, case: Case) -> None:
    """The load is NOT_SUPPORTED_ON_SIM, naming the construct, and registers nothing."""
    error = sim.fails(f'kernel load "{case.file}"')
    assert error["code"] == "NOT_SUPPORTED_ON_SIM", error
    said = f"{error['message']} {error.get('hint') or ''}".lower()
    assert any(word.lower() in said for word in case.refused), f"the refusal should name {case.refused}: {error}"
    assert all(k["builtin"] for k in sim.ok("kernels")["kernels"])  # nothing of it was registered


def on_both_backends(sim: Cush, case: Case, capfd) -> None:
    """The GPU and the simulator give SHA-256-identical outputs (or the same error), and the GPU the reference's
    bytes: the GPU is the truth the simulator is held to."""
    gpu = Cush(make_backend("cuda"))  # skips where there is no GPU
    try:
        on_gpu = execute(gpu, case)
        if case.error:
            assert on_gpu.error is not None and on_gpu.error["code"] in (case.error, *case.gpu_also), on_gpu.error
            recover(gpu, case)
    finally:
        gpu.shell.close()
    printed = capfd.readouterr().out  # device printf goes to the worker's stdout, flushed when it ends
    on_sim = execute(sim, case)
    if case.error:
        assert on_sim.error is not None and on_sim.error["code"] == case.error, on_sim.error
        return
    assert on_gpu.error is None and on_sim.error is None, (on_gpu.error, on_sim.error)
    for buf in case.outputs:
        keep = compared(case, buf)
        if buf.name in case.ulps:  # the transcendentals the guide says may differ in the last bits: say by how much
            g = np.frombuffer(on_gpu.outputs[buf.name], buf.dtype)
            s = np.frombuffer(on_sim.outputs[buf.name], buf.dtype)
            off = np.abs(ordered_bits(g) - ordered_bits(s))[keep]
            print(f"{case.name}: {buf.name}: worst GPU vs simulator difference {off.max()} ulp, "
                  f"{np.count_nonzero(off)} of {off.size} elements differ")
            assert off.max() <= case.ulps[buf.name]
            continue
        g, s = sha256(buf, on_gpu.outputs[buf.name], keep), sha256(buf, on_sim.outputs[buf.name], keep)
        print(f"checksum {case.name} {buf.name}: GPU {g[:16]} simulator {s[:16]} {'same' if g == s else 'DIFFERENT'}")
        assert g == s, f"{buf.name}: GPU sha256 {g} != simulator sha256 {s}"
    if case.printf:
        check_printf(case, on_gpu.said + "\n" + printed, "GPU")
        check_printf(case, on_sim.said, "simulator")
    if case.reference:
        check_reference(case, on_gpu.outputs, "GPU")


# ------------------------------------------------------------------ (a) the simulator against numpy
@pytest.mark.parametrize("case", RUNNABLE, ids=ids(RUNNABLE))
def test_the_simulator_gives_the_reference_bytes(sim, case):
    on_the_simulator(sim, case)


@pytest.mark.parametrize("case", REFUSED, ids=ids(REFUSED))
def test_the_simulator_refuses_what_is_outside_its_subset(sim, case):
    refused_by_the_simulator(sim, case)


# ------------------------------------------------------------------ (b) the GPU against the simulator
@pytest.mark.gpu
@pytest.mark.parametrize("case", RUNNABLE, ids=ids(RUNNABLE))
def test_the_gpu_and_the_simulator_give_the_same_bytes(sim, case, capfd):
    on_both_backends(sim, case, capfd)


# ------------------------------------------------------------------ the corpus itself (no backend)
@pytest.mark.parametrize("case", [c for c in CASES if c.reference], ids=ids([c for c in CASES if c.reference]))
def test_each_reference_gives_every_output_whole(case):
    got = case.expected()
    for buf in case.outputs:
        assert got[buf.name].nbytes == buf.nbytes, buf.name
    if case.check:
        case.check(got)


def well_formed(case: Case, text: str) -> None:
    """What the runner needs of a case whose source (its file with what it includes) is `text`."""
    kinds = [bool(case.reference or case.printf), bool(case.error), bool(case.refused)]
    assert sum(kinds) == 1, f"{case.name}: one of reference/printf, error or refused"
    bufs = [b.name for b in case.buffers]
    assert len(bufs) == len(set(bufs)), case.name
    for buf in case.buffers:
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", buf.name) and buf.name not in RESERVED, buf.name
        assert buf.kind in ALLOC or buf.kind in SYMBOL_KINDS, buf.kind
        assert buf.kind not in SYMBOL_KINDS or (case.module and re.search(rf"\b{buf.name}\b", text)), \
            f"{case.name}: {buf.name} is a variable of the file, loaded `as` a module"
        assert sum(n * np.dtype(f.dtype or buf.dtype).itemsize for _, n, f in buf.layout()) == buf.nbytes, buf.name
        assert buf.kind != "readonly" or len(buf.layout()) == 1, "read-only memory is filled by the host, whole"
    for name in list(case.ulps) + list(case.unordered) + list(case.intact):
        assert name in bufs, (case.name, name)
    if not case.refused:
        assert case.kernel in text, case.name
        assert all(line.startswith(f"launch {case.module}.") for line in case.launched_before), case.name
        assert case.module or case.kernel not in BUILTINS, f"{case.name}: load it `as` a module"


def test_the_corpus_is_well_formed():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        assert (case.file is None) != (case.source is None) and (case.file is None or case.file.is_file()), case.name
        well_formed(case, case.source or with_includes(case.file))


def with_includes(path) -> str:
    """A file's text and that of the files it #includes from beside it."""
    text = path.read_text()
    return text + "".join(with_includes(path.parent / m) for m in re.findall(r'#include\s+"([^"]+)"', text))


def test_the_corpus_uses_every_kernel_file():
    """Each file in tests/kernels is a case's (or included by one), and there are more than 25 course kernels."""
    used = {c.file.resolve() for c in CASES if c.file}
    included = {(f.parent / m).resolve() for f in used for m in re.findall(r'#include\s+"([^"]+)"', with_includes(f))}
    files = {p.resolve() for p in KERNELS.rglob("*") if p.suffix in (".cu", ".cuh")}
    assert files == used | included, sorted(str(p) for p in files ^ (used | included))
    course = {f for f in used if f.parent == KERNELS.resolve() and not f.name.startswith("refuse_")}
    assert len(course) >= 26


"""Generated command lines for the fuzz test and benchmarks/fuzz.py: commands from the registry with
arguments drawn from pools of good, edge and hostile values, chained with `;`, mixed with noise — and, for the
fuzzer proper (`mutate`), mutated: an argument of the wrong kind, a huge size, unicode, control characters, an
empty word, a very long one, a line cut short. The checker runs them on a simulator shell, one command at a time,
groups crashes (an INTERNAL_ERROR or an exception escaping the shell) by exception type and the place in cudashell
that raised it, and checks invariants after each command: the simulator's accounting equals what is alive, every
named buffer is alive on the backend and nothing alive is unnamed, virtual time never goes backwards, and a failed
command leaves the session as it was."""

from __future__ import annotations

import io
import os
import random
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.backends.sparse import CHUNK
from cudashell.backends.sim.vmm import SimReservation
from cudashell.frontends.shell import Shell
from cudashell.language.argkinds import DTYPES
from cudashell.language.grammar import split_commands
from cudashell.language.registry import REGISTRY

SLOW = {"calibrate", "bench memcpy", "bench latency", "bench alloc", "bench zerocopy", "bench overlap", "bench peer", "demo"}
COMPOSITE = {"repeat", "run", "demo"}  # they run other commands: those that succeed before one fails stay done
SIZES = ["4KB", "1", "0", "4096", "64KB", "1MB", "3", "2^20", "010", "0x1000", "1_", "4_KB", "-1", "2^64",
         "99999999999^64", "9" * 60, "16MB", "1.5MB", "64GB", "1TB", "1e3", "", "4 KB"]
COUNTS = ["1", "2", "0", "8", "1024", "2^31", "-3", "1M", "x"]
DIM3S = ["16", "16,16", "8,8,4", "0", "4,0", "1025", "32,32,2", "1,1,65", "1,65536", "2^31", "2^32", "16,",
         ",16", "1,2,3,4", "16,x", "16, 16"]
INTS = ["0", "1", "-1", "7", "255", "256", "2^64", "18446744073709551616", "9" * 400, "0x10", "1__0"]
VALUES = ["0", "1", "7", "iota", "random", "-1", "2.5", "nan", "inf", "1e999", "9" * 400, "0x41", "abc"]
WORDS = ["all", "", "x", "ü", "名前", "a" * 5000, "\t", "'quoted'", "\"", "<<<", ">>>", "#", "on", "off", "?"]
# what a mutation puts in place of an argument (or inserts): the wrong kind, huge, unicode, control characters,
# empty, very long; a path stays inside the run's temporary folder (`../x` is the seed folder's parent)
MUTANTS = ["9" * 30 + "GB", "2^63", "2^64-1", "18446744073709551615", "-9223372036854775808", "1e308", "٤٠٩٦",
           "４KB", "4\u200bKB", "\u202e4KB", "e\u0301", "名前", "🙂", "\x00", "\x07", "\r", "\x1b[2J",
           "\x1b]0;x\x07", '""', "''", "x" * 3000, "1" * 3000, "[" * 50, "<<<", ">>>", ";", "#", "\\", "%s%n",
           "../x", "~", "/dev/null", "nan", "-0", "0x", "0x" + "f" * 40, "1,2,3,4,5", "all", "?"]
# slow commands, capped so a line stays well under a second; drawn now and then
CAPPED = ["bench memcpy h2d pinned sizes 4KB reps 2", "bench memcpy bidir registered sizes 64KB reps 2",
          "bench memcpy h2d mapped managed sizes 4KB reps 2", "bench latency rounds 10",
          "bench alloc device pinned async sizes 4KB", "bench zerocopy 2^10..2^11", "bench overlap streams 1,2",
          "demo register", "demo uva", "demo managed", "demo portable", "bench memcpy d2d sizes 4KB reps 2"]
NOISE = ["", ";;;", "<<< unterminated", "alloc", "alloc pinned", "\x1b[2J", "🙂🙂", "a" * 5000,
         "memcpy ; memcpy", "free all; free all", "expect error", "expect ok", "run", "'unterminated",
         "launch sum a b c d e f g", "set gpu-timeout 0.001", "set gpu-timeout off", "reset", "sync",
         "stream create; stream create; stream destroy 2; launch spin 10 stream 1; stream destroy 1"]


@dataclass
class Tally:
    lines: int = 0
    commands: int = 0
    seconds: float = 0.0
    crashes: list = field(default_factory=list)  # (line, class) of every INTERNAL_ERROR or exception
    changed: list = field(default_factory=list)  # failed commands that changed the session
    leaks: list = field(default_factory=list)  # what `free all` left behind
    broken: list = field(default_factory=list)  # (line, invariant, detail): an invariant after a command
    slowest: list = field(default_factory=list)  # (seconds, line): the slowest lines

    @property
    def violations(self) -> int:
        return len(self.crashes) + len(self.changed) + len(self.leaks) + len(self.broken)

    def add(self, other: Tally) -> None:
        self.lines += other.lines
        self.commands += other.commands
        self.seconds = max(self.seconds, other.seconds)
        for kind in ("crashes", "changed", "leaks", "broken"):
            getattr(self, kind).extend(getattr(other, kind))
        self.slowest = sorted(self.slowest + other.slowest, reverse=True)[:5]

    def crash_classes(self) -> Counter:
        """How many crashes of each class: exception type and where in cudashell it was raised."""
        return Counter(cls for _, cls in self.crashes)

    def invariant_classes(self) -> Counter:
        return Counter(inv for _, inv, _ in self.broken)


class Fuzzer:
    def __init__(self, seed: int, workdir: Path, mutate: bool = False):
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.mutate = mutate
        (workdir / "self.cush").write_text("alloc pinned 4KB\nrun self.cush\n")
        (workdir / "ok.cush").write_text("alloc pinned 4KB as s_p\nfill s_p 3\nfree s_p\n")
        (workdir / "bin.cush").write_bytes(b"\xff\xfe\x00alloc")
        (workdir / "k.cu").write_bytes(b"\xff__global__ void k(float *a) {}")
        self.files = ["self.cush", "ok.cush", "bin.cush", "missing.cush", "k.cu", ".", str(workdir / "out.txt"),
                      "/", "/proc/version", "x/y/z.cush"]
        self.specs = [s for name, s in sorted(REGISTRY.items()) if name not in SLOW]

    def value(self, arg, shell) -> str:
        r, s = self.rng, shell.session
        pick = r.choice
        if arg.choices:
            return pick(list(arg.choices) + ["nope"])
        kind = arg.kind.name
        if kind == "buffer":
            names = list(s.buffers) or ["p0"]
            return pick(names * 4 + ["all", "nosuch", ""])
        if kind == "part":
            names = list(s.buffers) or ["p0"]
            ranges = ["", "", "[0:]", "[1MB:]", "[4KB:+4KB]", "[:64]", "[8:4]", "[x:]", "[0:+]", "[", "[1:2:3]",
                      "[2^70:]", "[0:+1GB]"]
            return pick(names * 2 + ["nosuch"]) + pick(ranges)
        if kind == "newname":
            return pick([f"n{r.randrange(50)}", *list(s.buffers)[:2], "all", "1bad", "a.b-c", "x" * 300])
        if kind == "size":
            return pick(SIZES)
        if kind == "count":
            return pick(COUNTS)
        if kind == "dim3":
            return pick(DIM3S)
        if kind == "extent":  # pitched memory and 2-D/3-D copies: good, edge and hostile
            return pick(["100x4", "1000x4", "4x64", "64x8x2", "1x1", "0x4x1", "4KBx16", "1000x4x2", "64KB", "3x",
                         "x", "1x2x3x4", "2^40x2^40"])
        if kind == "int":
            return pick(INTS)
        if kind == "stream":
            return pick(list(s.streams) + ["0", "default", "99", "x"])
        if kind == "event":
            return pick(list(s.events) + ["e", "f", '""', "0"])
        if kind in ("file", "file-or-off", "cuda-file"):
            return pick(self.files)
        if kind == "dtype":
            return pick(list(DTYPES) + ["float128"])
        if kind == "value":
            return pick(VALUES)
        if kind == "kernel":
            return pick(list(s.kernels) + ["nosuch"])
        if kind in ("commands", "cuda-source"):
            return pick(["<<< __global__ void k(float *a) {} >>>", "<<< >>>", "<<< __global__ void k(__restrict__) {} >>>"])
        return pick(WORDS + SIZES[:4])

    def command(self, shell) -> str:
        r = self.rng
        spec = r.choice(self.specs)
        words = [spec.name]
        for arg in spec.args:
            if arg.optional and r.random() < 0.3:
                continue
            for _ in range(r.choice([1, 1, 1, 2, 3]) if arg.many else 1):
                words.append(self.value(arg, shell))
        for opt in spec.opts:
            if r.random() < 0.3:
                words += [opt.keyword, self.value(opt.arg, shell)]
        for flag in spec.flags:
            if r.random() < 0.3:
                words.append(flag.word)
        if spec.name == "output":  # results to one file of its own: not into the scripts `run` reads, not forever
            words = ["output", r.choice([str(self.workdir / "results.txt"), "off", "off", "/", "x/y/z.txt"])]
        if spec.name == "repeat":  # a block with a bounded count: the point is the block, not the time it takes
            words = ["repeat", r.choice(["1", "2", "3", "0", "-1"]), "<<<", self.command(shell), ";",
                     self.command(shell), r.choice([">>>", ""])]
        if spec.name == "memcpy batch":  # a block of copies, as `memcpy` takes them, on a stream
            copy = REGISTRY["memcpy"]
            block = " ; ".join(f"memcpy {self.value(copy.args[1], shell)} {self.value(copy.args[2], shell)}"
                               for _ in range(r.choice([1, 2])))
            words = ["memcpy batch", f"<<< {block} {r.choice(['>>>', ''])}", "stream",
                     self.value(spec.opts[0].arg, shell)]
        if r.random() < 0.1:
            words.insert(r.randrange(len(words) + 1), r.choice(WORDS))
        if r.random() < 0.05 and len(words) > 1:
            del words[r.randrange(1, len(words))]
        return " ".join([words[0]] + [w if " " not in w or w.startswith("<<<") else f'"{w}"' for w in words[1:]])

    def line(self, shell) -> str:
        r = self.rng
        if self.mutate and r.random() < 0.004:
            return r.choice(CAPPED)
        if r.random() < 0.08:
            return r.choice(NOISE)
        line = " ; ".join(self.command(shell) for _ in range(r.choice([1, 1, 1, 2, 3])))
        return self.mutated(line) if self.mutate and r.random() < 0.3 else line

    def mutated(self, line: str) -> str:
        """The line with one word swapped for a mutant (or one inserted), or cut short, or a character of it
        doubled or dropped."""
        r = self.rng
        words = line.split(" ")
        how = r.random()
        if how < 0.5 and len(words) > 1:
            words[r.randrange(1, len(words))] = r.choice(MUTANTS)
        elif how < 0.7:
            words.insert(r.randrange(1, len(words) + 1), r.choice(MUTANTS))
        elif how < 0.8:
            return line[:r.randrange(len(line) + 1)]
        elif how < 0.9 and line:
            i = r.randrange(len(line))
            return line[:i] + line[i] * 2 + line[i + 1:]
        elif line:
            i = r.randrange(len(line))
            return line[:i] + line[i + 1:]
        return " ".join(words)


def snapshot(session) -> tuple:
    return (tuple((b.name, b.kind, b.size, b.host_ptr, b.device_ptr, b.registered, b.handle is not None,
                   tuple(b.pending_streams())) for b in session.buffers.values()),
            tuple((name, id(s)) for name, s in session.streams.items()),
            tuple(session.events), tuple(session.kernels), tuple(sorted(session.settings.items())))


STORAGE = 256 << 20  # real RAM a fuzzed simulator may fill: several run side by side on a small CI machine
SESSION_LINES = 2000  # lines per shell: `history`, `save` and `export c` read all of it, so sessions stay short


def run(seed: int, lines: int, workdir: Path, tally: Tally | None = None) -> Tally:
    """Run `lines` generated (and mutated) lines on fresh simulator shells, checking the invariants after each
    command."""
    tally = tally or Tally()
    fuzz = Fuzzer(seed, workdir, mutate=True)
    home = os.getcwd()
    os.chdir(workdir)  # commands that write a relative path (`trace export on`, `--plot .png`) write here
    t0 = time.perf_counter()
    try:
        for start in range(0, lines, SESSION_LINES):
            run_session(fuzz, min(SESSION_LINES, lines - start), workdir, tally)
    finally:
        os.chdir(home)
    tally.seconds = time.perf_counter() - t0
    return tally


def crash_class(e: BaseException) -> str:
    """An exception's type and the innermost place in cudashell it passed through: one class of crash."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "cudashell" in f.filename]
    where = f"{frames[-1].filename.split('cudashell/', 1)[-1]}:{frames[-1].lineno}" if frames else "?"
    return f"{type(e).__name__} at {where}"


def run_session(fuzz: Fuzzer, lines: int, workdir: Path, tally: Tally) -> None:
    backend = SimBackend(replace(Profile.load(None), storage_budget=STORAGE))
    # a fuzzed `quit` does not end the shell: the fuzzing goes on; --debug: a bug raises, with where it was
    shell = Shell(backend, "fuzz", out=io.StringIO(), err=io.StringIO(), workdir=workdir, quit_ends_shell=False,
                  debug=True)
    clock = backend.now
    for n in range(lines):
        line = fuzz.line(shell)
        tally.lines += 1
        t0 = time.perf_counter()
        try:
            segments = split_commands(line)
        except Exception:
            segments = None
        for seg in segments if segments is not None else [None]:
            tally.commands += 1
            shell.out.seek(0), shell.out.truncate(), shell.err.seek(0), shell.err.truncate()
            before = snapshot(shell.session)
            try:
                ok = shell.execute(line) if seg is None else shell.run_segment(seg)
            except BaseException as e:  # nothing may escape the shell (--debug: a bug's own exception does)
                tally.crashes.append((line, crash_class(e)))
                continue
            text = seg.text if seg else line
            error = shell.last_error
            if error is not None and error.code == "INTERNAL_ERROR":
                tally.crashes.append((text, f"INTERNAL_ERROR {error.message[:60]}"))
            first = seg.tokens[0].text.lower() if seg is not None else ""
            if not ok and seg is not None and first not in COMPOSITE and snapshot(shell.session) != before:
                tally.changed.append((seg.text, error.code if error else "?"))
            for invariant, detail in broken_invariants(shell, backend, clock):
                tally.broken.append((text, invariant, detail))
            clock = backend.now
            if not ok and seg is None:
                break
        tally.slowest = sorted(tally.slowest + [(time.perf_counter() - t0, line[:120])], reverse=True)[:5]
        if n % 500 == 499 or n == lines - 1:
            check_free_all(shell, backend, tally)
            clock = backend.now
    shell.close()


def broken_invariants(shell, backend, clock: float) -> list[tuple[str, str]]:
    """What does not hold after a command: (invariant, detail) for each."""
    out = []
    if backend.now < clock:
        out.append(("virtual time went backwards", f"{clock} → {backend.now}"))
    counted = [a for a in backend.live if not isinstance(a, SimReservation)]  # a reservation is addresses
    device = sum(a.size for a in counted if a.kind == "managed" or a.kind == "device" and not a.device) + \
        sum(h.size for h in backend.vmm_handles.values() if not h.device)
    host = sum(a.size for a in counted if a.kind not in ("device", "managed"))
    if (backend.device_used, backend.host_used) != (device, host):
        out.append(("memory in use ≠ what is alive",
                    f"device {backend.device_used} vs {device}, host {backend.host_used} vs {host}"))
    if not backend.ops:  # queued work holds copies of what it read: counted only when nothing is queued
        held = {id(c) for a in [*counted, *backend.stale.values(), *backend.vmm_handles.values()]
                for c in a.data.chunks.values()}
        if backend.budget.used != CHUNK * len(held):
            out.append(("storage ≠ the chunks alive", f"{backend.budget.used} vs {CHUNK * len(held)}"))
    buffers = shell.session.buffers.values()
    stale = [b.name for b in buffers if b.handle not in backend.live and not backend.dead]
    if stale:
        out.append(("a named buffer is not alive on the backend", ", ".join(stale)))
    named = {id(b.handle) for b in buffers}
    # (freed in stream order and not seen done yet; a module's variable; a dead context's, which nothing can free:
    # it goes with the context at `reset`)
    unnamed = [f"{a.kind} {a.size}" for a in backend.live
               if id(a) not in named and a.freed_by is None and not a.space and not backend.dead]
    if unnamed:
        out.append(("memory alive that no buffer names", ", ".join(unnamed)))
    return out


def json_output(seed: int, lines: int, workdir: Path) -> str:
    """What `--json` prints for `lines` generated lines on one simulator shell: a JSON object a command (the
    schema test validates each)."""
    fuzz = Fuzzer(seed, workdir)
    out = io.StringIO()
    shell = Shell(SimBackend(replace(Profile.load(None), storage_budget=STORAGE)), "fuzz", out=out,
                  err=io.StringIO(), json_mode=True, workdir=workdir, quit_ends_shell=False)
    home = os.getcwd()
    os.chdir(workdir)
    try:
        for _ in range(lines):
            shell.execute(fuzz.line(shell))
    finally:
        os.chdir(home)
        shell.close()
    return out.getvalue()


def check_free_all(shell, backend, tally: Tally) -> None:
    """`free all` (after `reset`, when the GPU side is dead) leaves no buffer and no simulated memory."""
    if backend.dead:
        shell.execute("reset")
    shell.execute("output off")
    (Path(shell.session.script_dir) / "results.txt").write_text("")
    if shell.session.held is not None:  # held streams: `free` of GPU memory would wait forever, and says so
        shell.execute("free all")
        shell.execute("release")
    shell.execute("sync")
    if backend.dead:  # the sync gave up (`set gpu-timeout`)
        shell.execute("reset")
    shell.execute("free all")
    if shell.session.buffers or backend.device_used or backend.host_used or backend.budget.used:
        tally.leaks.append((list(shell.session.buffers), backend.device_used, backend.host_used,
                            backend.budget.used))
        shell.session.buffers.clear()

"""Generated command lines for the fuzz test and benchmarks/fuzz.py: commands from the registry with
arguments drawn from pools of good, edge and hostile values, chained with `;`, mixed with noise. The
checker runs them on a simulator shell, one command at a time, and counts what breaks an invariant."""

from __future__ import annotations

import io
import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
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
NOISE = ["", ";;;", "<<< unterminated", "alloc", "alloc pinned", "\x1b[2J", "🙂🙂", "a" * 5000,
         "memcpy ; memcpy", "free all; free all", "expect error", "expect ok", "run", "'unterminated",
         "launch sum a b c d e f g", "set gpu-timeout 0.001", "set gpu-timeout off", "reset", "sync",
         "stream create; stream create; stream destroy 2; launch spin 10 stream 1; stream destroy 1"]


@dataclass
class Tally:
    lines: int = 0
    commands: int = 0
    crashes: list = field(default_factory=list)  # (line, message) of every INTERNAL_ERROR or exception
    changed: list = field(default_factory=list)  # failed commands that changed the session
    leaks: list = field(default_factory=list)  # what `free all` left behind

    @property
    def violations(self) -> int:
        return len(self.crashes) + len(self.changed) + len(self.leaks)


class Fuzzer:
    def __init__(self, seed: int, workdir: Path):
        self.rng = random.Random(seed)
        self.workdir = workdir
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
        if r.random() < 0.08:
            return r.choice(NOISE)
        return " ; ".join(self.command(shell) for _ in range(r.choice([1, 1, 1, 2, 3])))


def snapshot(session) -> tuple:
    return (tuple((b.name, b.kind, b.size, b.host_ptr, b.device_ptr, b.registered, b.handle is not None)
                  for b in session.buffers.values()),
            tuple((name, id(s)) for name, s in session.streams.items()),
            tuple(session.events), tuple(session.kernels), tuple(sorted(session.settings.items())))


STORAGE = 256 << 20  # real RAM a fuzzed simulator may fill: several run side by side on a small CI machine
SESSION_LINES = 2000  # lines per shell: `history`, `save` and `export c` read all of it, so sessions stay short


def run(seed: int, lines: int, workdir: Path, tally: Tally | None = None) -> Tally:
    """Run `lines` generated lines on fresh simulator shells, checking the invariants after each command."""
    tally = tally or Tally()
    fuzz = Fuzzer(seed, workdir)
    home = os.getcwd()
    os.chdir(workdir)  # commands that write a relative path (`trace export on`, `--plot .png`) write here
    try:
        for start in range(0, lines, SESSION_LINES):
            run_session(fuzz, min(SESSION_LINES, lines - start), workdir, tally)
    finally:
        os.chdir(home)
    return tally


def run_session(fuzz: Fuzzer, lines: int, workdir: Path, tally: Tally) -> None:
    backend = SimBackend(replace(Profile.load(None), storage_budget=STORAGE))
    # a fuzzed `quit` does not end the shell: the fuzzing goes on
    shell = Shell(backend, "fuzz", out=io.StringIO(), err=io.StringIO(), workdir=workdir, quit_ends_shell=False)
    for n in range(lines):
        line = fuzz.line(shell)
        tally.lines += 1
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
            except BaseException as e:  # nothing may escape the shell
                tally.crashes.append((line, f"{type(e).__name__}: {e}"))
                continue
            error = shell.last_error
            if error is not None and error.code == "INTERNAL_ERROR":
                tally.crashes.append((seg.text if seg else line, error.message))
            first = seg.tokens[0].text.lower() if seg is not None else ""
            if not ok and seg is not None and first not in COMPOSITE and snapshot(shell.session) != before:
                tally.changed.append((seg.text, error.code if error else "?"))
            if not ok and seg is None:
                break
        if n % 500 == 499 or n == lines - 1:
            check_free_all(shell, backend, tally)
    shell.close()


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

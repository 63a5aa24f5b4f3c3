"""`cudashell grade CHECKS.cush [SUBMISSION…]`: a teacher's checks file run against students' submissions.

The checks file is a script whose `expect … points N` lines are checks, grouped by `section "TITLE" [points N]`
lines (docs/guide.md, "Grading"). Its paths are the submission's: `run copies.cush` runs the student's script,
`kernel load scale.cu` loads the student's kernel, from the submission's folder. Each section runs on a fresh
session in a process of its own (forked, with the submission's folder as its working directory and the shell's
confinement root): a submission that crashes that process, loops past the time limit of a check, or names a file
outside its folder (OUTSIDE_SUBMISSION) scores zero for the checks it cost, and grading goes on with the next
section and the next submission. On the simulator timings are modeled, so a grade is the same on every machine."""

from __future__ import annotations

import io
import multiprocessing
import os
import re
import shlex
import signal
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from ..backends.choice import open_backend
from ..backends.profile import BUILTIN, Profile
from ..errors import STICKY, ShellError
from ..language import registry
from ..language.confinement import Confinement
from ..language.grammar import Segment
from ..model.inputs import read_capped
from ..output import render
from ..sizes import format_size, parse_size
from . import config
from .environment import Environment, ExitStatus
from .limits import (
    DEFAULT_LIMITS,
    DEFAULT_MEMORY,
    DEFAULT_OUTPUT,
    LIMIT_CODES,
    Limits,
    confine,
    die_with,
    finished,
    running,
    sections_end_with_grader,
)
from .shell import BadLine, Shell, script_text, syntax_errors

DEFAULT_PASS = "60%"
DEFAULT_TIME_LIMIT = 60.0  # seconds a check may take, from the check before it (compiling a kernel included)
GRACE = 5.0  # on a GPU the section's own gpu-timeout gives a hung wait up first; the process is killed after this


@dataclass
class Check:
    """An expect line of the checks file, and what it scored."""

    index: int  # its place among the section's commands
    line: int
    command: str
    points: float
    own: bool  # its points were written on it (not a share of the section's)
    score: float = 0.0
    status: str = "error"
    code: str | None = "CHECK_CRASHED"
    message: str | None = "not run"
    seconds: float | None = None

    def data(self) -> dict:
        return {"line": self.line, "command": self.command, "points": self.points, "score": self.score,
                "status": self.status, "code": self.code, "message": self.message, "seconds": self.seconds}


@dataclass
class Section:
    title: str
    line: int
    points: float | None
    items: list = field(default_factory=list)  # (Segment | BadLine, line number), the section line excluded
    checks: dict[int, Check] = field(default_factory=dict)
    file: str = ""  # the checks file, for its errors' file:line


def located(e: ShellError, path: Path, line: int | None = None) -> ShellError:
    """An error in the checks file, shown where it is (file:line:col) as a script's are: main passes these on."""
    e.file, e.line = str(path), line
    return e


def is_check(item) -> bool:
    return isinstance(item, Segment) and item.tokens[0].text.lower() == "expect"


def plan(path: Path) -> list[Section]:
    """The checks file as sections of commands, each check worth its points; a file that is not a valid checks
    file is a ShellError naming file:line."""
    try:
        text = script_text(read_capped(path, "script"), path)
    except OSError as e:
        raise ShellError("NO_SUCH_FILE", f"cannot read the checks file {path}: {e.strerror}") from None
    items = Shell.script_items(text)
    errors = syntax_errors(items)
    if errors:
        e, lineno, _ = errors[0]
        raise located(ShellError(e.code, e.message, e.hint, e.col), path, lineno)
    titled = any(isinstance(i, Segment) and registry.parse_segment(i).spec.grading == "section" for i, _ in items)
    prelude: list = []  # with sections: the commands before the first, run at the start of each
    sections = [] if titled else [Section(path.name, 1, None, file=path.name)]
    for item, lineno in items:
        cmd = registry.parse_segment(item) if isinstance(item, Segment) else None
        if cmd is not None and cmd.spec.grading == "section":
            sections.append(Section(cmd.args.get("TITLE"), lineno, cmd.args.get("POINTS"), list(prelude), file=path.name))
            continue
        if not sections:
            if cmd is not None and cmd.args.values.get("POINTS") is not None:
                raise located(ShellError("USAGE", "points before the first section",
                                         "the lines before the first `section` are run at the start of each "
                                         "section; put checks inside a section", cmd.args.col("POINTS")), path, lineno)
            prelude.append((item, lineno))
            continue
        sec = sections[-1]
        if cmd is not None and is_check(item):
            own = cmd.args.values.get("POINTS")
            sec.checks[len(sec.items)] = Check(len(sec.items), lineno, item.text, float(own or 0), own is not None)
        sec.items.append((item, lineno))
    for s in sections:
        taken = sum(c.points for c in s.checks.values())
        shared = [c for c in s.checks.values() if not c.own]
        if s.points is None:
            continue
        if taken > s.points or (taken < s.points and not shared):
            raise located(ShellError("USAGE", f"section {s.title!r} is worth {s.points:g} points, and its checks' own "
                                     f"points add up to {taken:g}", "leave `points` off some of its expect lines to "
                                     "share the rest, or fix the numbers"), path, s.line)
        for c in shared:
            c.points = (s.points - taken) / len(shared)
    if not sum(c.points for s in sections for c in s.checks.values()):
        raise located(ShellError("USAGE", "no check is worth any points",
                                 "write `points N` on expect lines, or on `section` lines"), path)
    return sections


# ------------------------------------------------------------------ one section, in a process of its own
def _section_child(conn, sec: Section, root: Path, choice: str, profile: str | None, limit: float, limits: Limits,
                   grader: int) -> None:
    """Runs in the forked process: the section's commands on a fresh session, a message to the parent after each
    check, and one when the section stops early (what stopped it) or ends. A limit met (limits.py) stops it. Ctrl-C
    is the grader's to answer (it ends this process), not a submission's interrupted command."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with(grader)
    os.chdir(root)
    try:
        backend, _ = open_backend(choice, profile)
    except ShellError as e:
        conn.send(("no-backend", e.code, e.message, e.hint))
        return
    confine(limits, backend)
    conn.send(("backend", backend.name, backend.timing_label, [backend.proc.pid] if backend.proc else []))
    # each error the shell reports (a script's nested ones too, with their file:line): a check says what went
    # wrong first, not only that a `run` stopped
    errors: list[tuple[str, str]] = []  # (code, the error's line)
    # the submission's output is not the grade's; its `quit` ends its script, not the grading
    shell = Shell(backend, out=io.StringIO(), err=io.StringIO(), confinement=Confinement.submission(root), workdir=root,
                  quit_ends_shell=False,
                  on_error=lambda e, line: errors.append(limits.reported(e, line)))
    if not backend.capabilities.models_time:  # a hung GPU wait is given up by the shell itself (GPU_ABANDONED)
        shell.session.settings["gpu-timeout"] = backend.gpu_timeout = limit
    before = None  # what the command before a check met first, when it failed
    dead = None  # a failure nothing after can recover from (a dead context): its check is told, then the section stops
    i = 0
    try:
        for i, (item, lineno) in enumerate(sec.items):
            mark = len(errors)
            if isinstance(item, BadLine):  # a line that did not split: recorded, and told to on_error
                ok = shell.run_items([(item, lineno)])
            else:
                ok = shell.run_segment(item, sec.file, lineno)
            first = errors[mark] if len(errors) > mark else (getattr(limits.named(shell.last_error), "code", None)
                                                                        or "INTERNAL_ERROR", "failed")
            if i in sec.checks:
                e = limits.named(shell.last_error)
                why = None if ok else e.message + (f" — hint: {e.hint}" if e.hint else "")
                conn.send(("check", i, ok, None if ok else e.code, why if ok or not before else f"{why} ({before})"))
                if not ok and e.code in LIMIT_CODES:
                    conn.send(("stop", i, e.code, e.message))
                    break
                if dead is not None:  # one rule: the check after a failure fails, a fault's as a typo's
                    conn.send(("stop", *dead))
                    break
            elif not ok and (first[0] in LIMIT_CODES or i + 1 == len(sec.items)
                             or not is_check(sec.items[i + 1][0])):
                conn.send(("stop", i, *first))  # nothing after it can be trusted (a dead context: nothing can run)
                break
            elif not ok and first[0] in STICKY:
                dead = (i, *first)
            before = None if ok or i in sec.checks else first[1]
        conn.send(("done",))
    except MemoryError:  # met outside a command (between them, or telling the grader)
        with suppress(Exception):
            conn.send(("stop", i, "MEMORY_LIMIT", limits.memory_error().message))
    finally:
        with suppress(Exception):
            shell.close()


def _kill(process, pids: list[int]) -> None:
    """The section's process and the GPU worker it started (a worker in a hung kernel would hold the GPU)."""
    for pid in pids:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    process.kill()
    process.join()


def run_section(sec: Section, root: Path, choice: str, profile: str | None, limit: float,
                limits: Limits = DEFAULT_LIMITS) -> tuple[str | None, str | None]:
    """Grade one section in a forked process, under `limits` (its CPU time from `limit`), filling its checks; returns
    (backend, timing) as the process reported them. A check not reported in `limit` seconds (from the one before) is
    TIME_LIMIT; the ones after it, and any after a crash, a limit met or an early stop, score zero with what
    stopped them."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    limits = limits.for_section(len(sec.checks), limit)
    process = ctx.Process(target=_section_child, args=(send, sec, root, choice, profile, limit, limits, os.getpid()),
                          daemon=True)
    process.start()
    send.close()
    pending = sorted(sec.checks)
    backend = timing = None
    pids: list[int] = []
    started = time.monotonic()
    stop: tuple[str, str] | None = None
    running(process, pids)  # SIGTERM to the grader ends it
    try:
        while pending:
            wait = started + limit + (GRACE if backend == "cuda" else 0) - time.monotonic()
            if wait <= 0 or not recv.poll(wait):
                _kill(process, pids)
                c = sec.checks[pending.pop(0)]
                c.code, c.message = "TIME_LIMIT", f"no result within {limit:g} s: the process running it was stopped"
                c.seconds = round(time.monotonic() - started, 3)
                stop = ("TIME_LIMIT", f"not reached: line {c.line} ran past the time limit")
                break
            try:
                msg = recv.recv()
            except (EOFError, OSError):
                process.join()
                c = sec.checks[pending.pop(0)]
                c.code, c.message = limits.ended(process.exitcode)  # CHECK_CRASHED, unless a limit ended it
                stop = (c.code, f"not reached: the process running line {c.line} ended ({c.code})")
                break
            if msg[0] == "no-backend":
                raise ShellError(*msg[1:])
            if msg[0] == "backend":
                backend, timing, pids[:] = msg[1], msg[2], msg[3]
                continue
            if msg[0] == "check":
                _, i, ok, code, said = msg
                c = sec.checks[pending.pop(0)]
                assert c.index == i
                c.status, c.code, c.message = ("passed", None, None) if ok else \
                    ("failed" if code == "EXPECT_FAILED" else "error", code, said)
                c.score = c.points if ok else 0.0
                c.seconds = round(time.monotonic() - started, 3)
                started = time.monotonic()
                continue
            if msg[0] == "stop":
                stop = (msg[2], f"not reached: line {sec.items[msg[1]][1]} failed — {msg[3] or msg[2]}")
            break
        for i in pending:
            c = sec.checks[i]
            c.status, c.score = "error", 0.0
            c.code, c.message = stop if stop else ("CHECK_CRASHED", "the section ended before this check")
    except BaseException:  # Ctrl-C: the section's process goes with the grader, at once
        _kill(process, pids)
        raise
    finally:
        if process.is_alive():
            process.join(GRACE)
        if process.is_alive():
            _kill(process, pids)
        recv.close()
        finished(process)
    return backend, timing


# ------------------------------------------------------------------ the command
def threshold(text: str, total: float) -> float:
    """`--pass 60%` (of the total) or `--pass 42` (points): the score that passes."""
    try:
        value = float(text[:-1]) * total / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= total:
        said = f"--pass {text} is outside 0..{total:g} points" if value == value else f"--pass got '{text}'"
        raise ShellError("USAGE", said, f"--pass takes N% of the total (0% to 100%) or a number of points up to "
                                        f"{total:g}")
    return value


def limit_size(text: str, option: str, default: int) -> int:
    """`--memory-limit 4GB`: a size as the shell reads one, above 0."""
    try:
        value = parse_size(text)
    except ShellError:
        value = 0
    if value <= 0:
        raise ShellError("USAGE", f"{option} takes a size above 0, got '{text}'",
                         f"a size such as {format_size(default).replace(' ', '')} (the default)")
    return value


def grade(checks: Path, submission: Path, sections: list[Section], choice: str, profile: str | None,
          limit: float, pass_text: str, limits: Limits = DEFAULT_LIMITS) -> dict:
    """One submission graded: the Grade result's data."""
    backend = timing = None
    for sec in sections:
        for c in sec.checks.values():  # a fresh copy of the plan's scores for this submission
            c.score, c.status, c.code, c.message, c.seconds = 0.0, "error", "CHECK_CRASHED", "not run", None
        got = run_section(sec, submission.resolve(), choice, profile, limit, limits)
        backend, timing = backend or got[0], timing or got[1]
    total = sum(c.points for s in sections for c in s.checks.values())
    score = sum(c.score for s in sections for c in s.checks.values())
    pass_at = threshold(pass_text, total)
    return {"checks_file": str(checks), "submission": str(submission), "backend": backend, "timing": timing,
            "score": score, "total": total, "percent": 100 * score / total, "pass_at": pass_at,
            "passed": score >= pass_at,
            "sections": [{"title": s.title, "line": s.line, "points": sum(c.points for c in s.checks.values()),
                          "score": sum(c.score for c in s.checks.values()),
                          "checks": [s.checks[i].data() for i in sorted(s.checks)]} for s in sections]}


# ------------------------------------------------------------------ a class: in parallel (--jobs), in slices (--shard)
def default_jobs(choice: str) -> int:
    """The machine's cores on the simulator; one at a time on a GPU, whose measured timings several sections at once
    would disturb (an `expect faster` would grade the neighbours' load)."""
    from ..backends.cuda import cuda_unavailable_reason

    on_gpu = choice == "cuda" or (choice == "auto" and cuda_unavailable_reason() is None)
    return 1 if on_gpu else len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def shard(submissions: list[Path], text: str) -> list[Path]:
    """`--shard I/N`: the I-th (1…N) of N slices of the submissions sorted by path — so N CI machines, each given the
    same list, grade every submission once between them — in the order they were given."""
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise ShellError("USAGE", f"--shard takes I/N with 1 ≤ I ≤ N, not '{text}'",
                         "`--shard 2/4` grades the second quarter of the submissions (sorted by path)")
    i, n = int(m[1]), int(m[2])
    order = sorted(range(len(submissions)), key=lambda k: (str(submissions[k]), k))
    mine = set(order[(i - 1) * len(order) // n: i * len(order) // n])
    return [s for k, s in enumerate(submissions) if k in mine]


_CLASS: tuple = ()  # what each grading process grades from: set before it is forked (nothing is pickled)


def _graded_one(index: int) -> tuple:
    """In a grading process: one submission, as ("ok", its grade) or ("error", what stopped the grading)."""
    checks, submissions, rest = _CLASS[0], _CLASS[1], _CLASS[2:]
    try:
        return "ok", grade(checks, submissions[index], *rest)
    except ShellError as e:  # sent back as its fields: the exception does not survive pickling
        return "error", e.code, e.message, e.hint, getattr(e, "file", None), getattr(e, "line", None)


def grade_class(checks: Path, submissions: list[Path], sections: list[Section], choice: str, profile: str | None,
                limit: float, pass_text: str, jobs: int, limits: Limits = DEFAULT_LIMITS) -> list[dict]:
    """Every submission's grade, in the order given. With jobs > 1, that many processes grade one submission each at a
    time (each section still in a process of its own, as `run_section` makes it): the same grades, sooner. The
    grading processes die with the grader, and their sections with them."""
    global _CLASS
    if jobs <= 1 or len(submissions) <= 1:
        return [grade(checks, s, sections, choice, profile, limit, pass_text, limits) for s in submissions]
    from concurrent.futures import ProcessPoolExecutor

    _CLASS = (checks, submissions, sections, choice, profile, limit, pass_text, limits)
    try:  # forked before any thread runs here; its processes are not daemons, so they may fork each section
        with ProcessPoolExecutor(min(jobs, len(submissions)), mp_context=multiprocessing.get_context("fork"),
                                 initializer=die_with, initargs=(os.getpid(),)) as pool:
            try:
                answers = list(pool.map(_graded_one, range(len(submissions))))
            except BaseException:  # SIGTERM or Ctrl-C: the executor has no terminate, so its processes are ended
                for process in list(pool._processes.values()):
                    process.kill()
                raise
    finally:
        _CLASS = ()
    for answer in answers:
        if answer[0] == "error":
            e = ShellError(*answer[1:4])
            e.file, e.line = answer[4], answer[5]
            raise e
    return [answer[1] for answer in answers]


NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """Text XML 1.0 can hold: a character it cannot (a control character a submission printed) as its escape."""
    return NOT_XML.sub(lambda m: ascii(m.group())[1:-1], text)


def junit(grades: list[dict]) -> ElementTree.ElementTree:
    """JUnit XML for CI: a testsuite per submission, a testcase per check (a failed expect is a <failure>, a check
    not reached, stopped or refused an <error>), the score in the suite's properties."""
    suites = ElementTree.Element("testsuites", name="cudashell grade")
    for g in grades:
        checks = [(s, c) for s in g["sections"] for c in s["checks"]]
        suite = ElementTree.SubElement(
            suites, "testsuite", name=xml_text(g["submission"]), tests=str(len(checks)),
            failures=str(sum(c["status"] == "failed" for _, c in checks)),
            errors=str(sum(c["status"] == "error" for _, c in checks)),
            time=f"{sum(c['seconds'] or 0 for _, c in checks):.3f}")
        props = ElementTree.SubElement(suite, "properties")
        for key in ("score", "total", "percent", "pass_at", "passed", "backend", "timing"):
            ElementTree.SubElement(props, "property", name=key, value=str(g[key]).lower() if key == "passed"
                                   else f"{g[key]:g}" if isinstance(g[key], float) else str(g[key]))
        for s, c in checks:
            case = ElementTree.SubElement(suite, "testcase", classname=xml_text(f"{g['submission']}.{s['title']}"),
                                          name=xml_text(f"line {c['line']}: {c['command']} ({c['points']:g} points)"),
                                          time=f"{c['seconds'] or 0:.3f}")
            if c["status"] != "passed":
                tag = "failure" if c["status"] == "failed" else "error"
                said = xml_text(c["message"] or c["code"])
                ElementTree.SubElement(case, tag, message=said.splitlines()[0], type=c["code"]).text = said
    tree = ElementTree.ElementTree(suites)
    ElementTree.indent(tree)
    return tree


JUNIT_HINT = "name a file in a folder that exists and that you may write"


def writable(path: Path) -> None:
    """The --junit file can be written, said before any submission is graded (not after all of them)."""
    why = "its folder does not exist" if not path.parent.is_dir() else \
        "it is a folder" if path.is_dir() else \
        "permission denied" if not os.access(path if path.exists() else path.parent, os.W_OK) else None
    if why:
        raise ShellError("IO_ERROR", f"cannot write --junit {path}: {why}", JUNIT_HINT)


def build_parser(env: Environment):
    from .arguments import Parser

    p = Parser(prog="cudashell grade", env=env,
               description="Run a teacher's checks file against submissions (folders of .cush scripts and .cu "
                           "kernels) and score them.",
               epilog="exit status: 0 every submission passed, 1 one did not, 2 a usage error (the command line, the "
                      "checks file, a submission that is not a folder, a backend that cannot start)")
    p.add_argument("checks", metavar="CHECKS.cush", help="the checks file (`expect … points N`, `section` lines)")
    p.add_argument("submissions", nargs="*", metavar="SUBMISSION", help="folders to grade (default: .)")
    p.add_argument("--backend", choices=("auto", "sim", "cuda"),
                   help="as cudashell's; sim gives the same grade on every machine (modeled timings)")
    p.add_argument("--sim-profile", metavar="FILE|NAME", help=f"h100 (the default), {', '.join(BUILTIN)} or a file")
    p.add_argument("--pass", dest="pass_at", default=DEFAULT_PASS, metavar="N%|N",  # argparse %-formats help:
                   help=f"the score that passes: a share of the total or points (default {DEFAULT_PASS})"
                   .replace("%", "%%"))
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="SECONDS",
                   help=f"how long one check may take before it scores zero (default {DEFAULT_TIME_LIMIT:g})")
    p.add_argument("--memory-limit", default=format_size(DEFAULT_MEMORY).replace(" ", ""), metavar="SIZE",
                   help=f"memory (address space) a section's process may take on the simulator before it scores "
                        f"zero as MEMORY_LIMIT (default {format_size(DEFAULT_MEMORY)})")
    p.add_argument("--output-limit", default=format_size(DEFAULT_OUTPUT).replace(" ", ""), metavar="SIZE",
                   help=f"how large a file a submission writes may grow before its section stops as OUTPUT_LIMIT "
                        f"(default {format_size(DEFAULT_OUTPUT)})")
    p.add_argument("--json", action="store_true", help="one JSON line per submission (kind grade)")
    p.add_argument("--junit", metavar="FILE", help="also write JUnit XML for CI")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="grade N submissions at once, each in processes of its own (default: the machine's cores on "
                        "the simulator, 1 on a GPU, whose timings sections at once would disturb); the same grades, "
                        "in the same order")
    p.add_argument("--shard", metavar="I/N",
                   help="grade only the I-th of N slices of the submissions (sorted by path): one per CI machine")
    return p


def main(argv: list[str], env: Environment) -> ExitStatus:
    """`cudashell grade`; Ctrl-C ends it as it ends a script: one line, 130 (the section's process goes with it)."""
    try:
        return _graded(argv, env)
    except KeyboardInterrupt:
        env.say("interrupted")
        return ExitStatus.INTERRUPTED


def _graded(argv: list[str], env: Environment) -> ExitStatus:
    from .arguments import ParserExit, startup_error

    parser = build_parser(env)
    cmd = shlex.join(["cudashell", "grade", *argv])
    if "--json" in argv:
        parser.json_cmd = cmd
    try:
        args = parser.parse_args(argv)
    except ParserExit as e:
        return e.status
    registry.load()
    try:
        if args.time_limit <= 0:
            raise ShellError("USAGE", "--time-limit takes a number of seconds above 0",
                             f"how long one check may take, such as {DEFAULT_TIME_LIMIT:g} (the default)")
        limits = Limits(memory=limit_size(args.memory_limit, "--memory-limit", DEFAULT_MEMORY),
                        output=limit_size(args.output_limit, "--output-limit", DEFAULT_OUTPUT))
        if args.junit:
            writable(Path(args.junit))
        choice = args.backend or config.load(env=env, only={"backend"})["backend"]
        if choice != "cuda":
            Profile.load(args.sim_profile)  # a bad profile is one line now, not one per section
        checks = Path(args.checks)
        sections = plan(checks)
        threshold(args.pass_at, sum(c.points for sec in sections for c in sec.checks.values()))  # before any runs
        submissions = [Path(s) for s in args.submissions or ["."]]
        if args.shard:
            submissions = shard(submissions, args.shard)
        if args.jobs is not None and args.jobs < 1:
            raise ShellError("USAGE", f"--jobs takes a number of processes, 1 or more, not {args.jobs}",
                             "`--jobs 1` grades one submission at a time")
        for s in submissions:
            if not s.is_dir():
                raise ShellError("NO_SUCH_FILE", f"submission {s} is not a folder",
                                 "a submission is the folder of a student's .cush and .cu files")
        with sections_end_with_grader(lambda line: print(line, file=env.stderr or io.StringIO())):
            grades = grade_class(checks, submissions, sections, choice, args.sim_profile, args.time_limit,
                                 args.pass_at, args.jobs or default_jobs(choice), limits)
    except ShellError as e:
        return startup_error(env, args.json, cmd, e, getattr(e, "file", None), getattr(e, "line", None))
    code = ExitStatus.SUCCESS if all(g["passed"] for g in grades) else ExitStatus.ERROR
    unwritten = _write_junit(grades, args.junit) if args.junit else None  # first: the output may fail (`| head`)
    lost = _print_grades(grades, cmd, args.json, env)
    if unwritten is not None:
        code = startup_error(env, args.json and not lost, cmd, unwritten)  # on stderr where stdout failed
    return env.output_lost(lost, code) if lost else code


def _write_junit(grades: list[dict], path: str) -> ShellError | None:
    """The --junit file, replaced whole (a full disk leaves the one before); what went wrong, if anything."""
    from ..output.files import replace_file

    def write(f) -> None:
        junit(grades).write(f, encoding="utf-8", xml_declaration=True)

    try:
        replace_file(path, write)
    except ShellError as e:
        return ShellError(e.code, e.message.replace("cannot write ", "cannot write --junit ", 1), JUNIT_HINT)
    return None


def _print_grades(grades: list[dict], cmd: str, json_mode: bool, env: Environment) -> str | None:
    """The grades on stdout; why they could not all be written (a reader that left, a full disk), else None."""
    from ..commands.grading import Grade

    width = env.terminal_size().columns if env.stdout_isatty else 0
    try:
        for n, g in enumerate(grades):
            result = Grade(g)
            text = render.json_line(cmd, result) if json_mode else \
                "\n" * (n > 0) + render.human(result, "simple", width)
            if env.stdout is not None:
                env.stdout.write(text + "\n")
        if env.stdout is not None:
            env.stdout.flush()
    except (OSError, ValueError) as e:  # BrokenPipeError, ENOSPC, a closed stdout
        return getattr(e, "strerror", None) or str(e) or type(e).__name__
    return None

"""Issue 36, "nothing lost": a full disk never destroys the file being replaced, two shells sharing a state folder
keep each other's lesson progress and history, damaged state is named once and set aside, and `cudashell grade`
writes its JUnit file before its output and ends as the CLI does on a reader that left, a full stdout or Ctrl-C.

The full disk is a fake one (no tmpfs without root): whatever Python opens for writing through io.open —
open(), Path.write_text, os.fdopen, matplotlib's and ElementTree's writes into a file object — takes the bytes
that fit and then fails with ENOSPC, as write(2) does on a full file system."""

from __future__ import annotations

import builtins
import errno
import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from cudashell.backends.sim import SimBackend
from cudashell.commands.lessons import PROGRESS_FILE, damage
from cudashell.errors import ShellError
from cudashell.frontends.shell import Shell
from cudashell.output.files import locked, replace_file
from cudashell.teaching import lessons as L
from tests.conftest import Cush

ROOT = Path(__file__).resolve().parents[1]
ORIGINAL = "# a script written by hand, over many hours\n" + "alloc pinned 1MB as keep\n" * 40


class FullDisk:
    """A disk with `room` bytes left for every file opened for writing."""

    def __init__(self, monkeypatch, room: int):
        self.room = room
        real = io.open

        def opening(file, mode="r", *args, **kwargs):
            f = real(file, mode, *args, **kwargs)
            return Filling(f, self) if any(c in mode for c in "wax+") else f
        monkeypatch.setattr(builtins, "open", opening)
        monkeypatch.setattr(io, "open", opening)


class Filling:
    """A file on the full disk: a write takes what fits (flushed, as the kernel would have written it), then
    ENOSPC."""

    def __init__(self, f, disk: FullDisk):
        self._f, self._disk = f, disk

    def write(self, data):
        size = len(data.encode() if isinstance(data, str) else data)
        if size <= self._disk.room:
            self._disk.room -= size
            return self._f.write(data)
        self._f.write(data[:self._disk.room])
        self._f.flush()
        self._disk.room = 0
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()

    def __iter__(self):
        return iter(self._f)


# ------------------------------------------------------------------ 1. a full disk
REPLACING = {  # each writing command, over a file that is there (`force` where the command asks for it)
    "save": "save {f} force",
    "export c": "export c {f} force",
    "trace export": "trace export {f} force",
    "bench --csv": "bench memcpy sizes 4KB,64KB reps 1 --csv {f}",
    "calibrate out": "calibrate out {f}",
}


@pytest.mark.parametrize("command", list(REPLACING))
def test_a_full_disk_leaves_the_file_being_replaced_as_it_was(sim, tmp_path, monkeypatch, command):
    target = tmp_path / "keep.cush"
    target.write_text(ORIGINAL)
    sim.ok("alloc pinned 1MB as p; alloc device 1MB as d; memcpy p d")
    FullDisk(monkeypatch, room=10)
    error = sim.fails(REPLACING[command].format(f=target))
    assert error["code"] == "DISK_FULL"
    assert error["message"] == f"cannot write {target}: No space left on device; the file is as it was before"
    assert target.read_text() == ORIGINAL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.cush"]  # the temporary file is gone too
    monkeypatch.undo()
    sim.ok(REPLACING[command].format(f=target))  # room again: replaced
    assert target.read_text() != ORIGINAL


def test_a_full_disk_leaves_the_picture_as_it_was(sim, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    target = tmp_path / "b.png"
    target.write_bytes(b"an earlier picture")
    FullDisk(monkeypatch, room=100)
    error = sim.fails(f"bench memcpy sizes 4KB,64KB reps 1 --plot {target}")
    assert error["code"] == "DISK_FULL" and target.read_bytes() == b"an earlier picture"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.png"]
    monkeypatch.undo()
    sim.ok(f"bench memcpy sizes 4KB,64KB reps 1 --plot {target}")
    assert target.read_bytes().startswith(b"\x89PNG")
    # a name with no format is refused: savefig would write noext.png, a file confinement never saw
    assert sim.fails(f"bench memcpy sizes 4KB reps 1 --plot {tmp_path / 'noext'}")["code"] == "USAGE"
    assert sim.fails(f"bench memcpy sizes 4KB reps 1 --plot {tmp_path / 'b.xyz'}")["code"] == "USAGE"
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    target = tmp_path / "t.txt"
    target.write_text("old")

    def interrupted(f):
        f.write(b"half of the new")
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        replace_file(target, interrupted)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t.txt"]


def test_a_replaced_file_keeps_its_mode_and_a_link_its_target(tmp_path):
    script = tmp_path / "run.cush"
    script.write_text("old")
    script.chmod(0o750)
    replace_file(script, "new")
    assert script.read_text() == "new" and script.stat().st_mode & 0o777 == 0o750
    link = tmp_path / "link.cush"
    link.symlink_to(script)
    replace_file(link, "through the link")
    assert link.is_symlink() and script.read_text() == "through the link"
    replace_file("/dev/null", "a device is written as it is")


def test_a_file_in_a_folder_where_none_can_be_made_beside_it_is_written_in_place(tmp_path, monkeypatch):
    from cudashell.output import files

    def refused(target):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    monkeypatch.setattr(files, "_temporary", refused)  # a folder you may not write (root may write anywhere)
    mine = tmp_path / "mine.csv"
    mine.write_text("old")
    replace_file(mine, "new")
    assert mine.read_text() == "new"
    with pytest.raises(ShellError) as e:
        replace_file(tmp_path / "new.csv", "x")
    assert (e.value.code, e.value.message) == ("IO_ERROR", f"cannot write {tmp_path / 'new.csv'}: Permission denied")


def test_output_to_a_disk_that_fills_is_one_line_and_the_session_goes_on(tmp_path, monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(SimBackend(), "t", out=out, err=err)
    target = tmp_path / "log.txt"
    FullDisk(monkeypatch, room=200)
    assert shell.execute(f"output {target}")
    for n in range(20):
        assert shell.execute(f"echo line {n} of the log")
    monkeypatch.undo()
    assert err.getvalue().count("\n") == 1
    assert err.getvalue() == \
        f"output: cannot write {target}: No space left on device; results come to the screen again\n"
    assert "line 19 of the log" in out.getvalue() and shell.redirect is None
    assert shell.execute("alloc pinned 1MB as p") and "p: pinned 1 MiB" in out.getvalue()
    shell.close()


# ------------------------------------------------------------------ 2. two shells, one state folder
def _student(state: str, lessons: list[str], done_flag: str) -> None:
    """Shell B: does whole lessons, typing each step's answer."""
    shell = Shell(SimBackend(), "b", out=io.StringIO(), err=io.StringIO(), state_dir=Path(state))
    for name in lessons:
        shell.execute(f"lesson {name}")
        for step in L.load(L.shipped()[name]).steps:
            for line in step.answer:
                shell.execute(line)
        shell.execute("free all")
    shell.close()
    Path(done_flag).touch()


def _switcher(state: str, done_flag: str) -> None:
    """Shell A: switches between two other lessons until B is done."""
    shell = Shell(SimBackend(), "a", out=io.StringIO(), err=io.StringIO(), state_dir=Path(state))
    while not Path(done_flag).exists():
        for line in ("lesson zero-copy restart", "lesson managed restart", "lesson quit"):
            shell.execute(line)
    shell.close()


def _reader(state: str, done_flag: str, seen) -> None:
    """A third party reading the file as fast as it can: every read must be whole, valid progress."""
    path, bad, reads = Path(state) / PROGRESS_FILE, 0, 0
    while not Path(done_flag).exists():
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        reads += 1
        try:
            bad += damage(json.loads(text)) is not None
        except ValueError:
            bad += 1
    seen.put((reads, bad))


def test_two_shells_sharing_a_state_folder_lose_no_progress(tmp_path):
    ctx = multiprocessing.get_context("fork")
    state, flag, seen = str(tmp_path / "state"), str(tmp_path / "b-done"), ctx.Queue()
    done = ["pinned", "flags", "streams", "allocators"]
    procs = [ctx.Process(target=_switcher, args=(state, flag)), ctx.Process(target=_reader, args=(state, flag, seen)),
             ctx.Process(target=_student, args=(state, done, flag))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    saved = json.loads((tmp_path / "state" / PROGRESS_FILE).read_text())
    assert {name: saved["lessons"][name]["done"] for name in done} == dict.fromkeys(done, True)
    assert {"zero-copy", "managed"} <= set(saved["lessons"])
    reads, bad = seen.get(timeout=5)
    assert reads > 0 and bad == 0
    assert not [p.name for p in (tmp_path / "state").iterdir() if p.name.endswith(".tmp")]


def test_progress_made_in_another_shell_is_merged_and_a_restart_is_still_a_restart(tmp_path):
    one, two = (Cush(SimBackend(), state_dir=tmp_path) for _ in range(2))
    one.ok("lesson pinned")
    two.ok("lesson pinned")  # both at step 1
    for step in L.load(L.shipped()["pinned"]).steps[:2]:
        for line in step.answer:
            one.run(line)
    two.ok("lesson quit")  # two is still at step 1: it must not take one's steps away
    assert json.loads((tmp_path / PROGRESS_FILE).read_text())["lessons"]["pinned"]["step"] == 2
    two.ok("lesson pinned restart")  # a restart asked for here, over what this shell last read: step 1 again
    assert json.loads((tmp_path / PROGRESS_FILE).read_text())["lessons"]["pinned"]["step"] == 0
    for c in (one, two):
        c.shell.close()


def _history_entries(path: Path) -> list[str]:
    return [line[1:] for line in path.read_text().splitlines() if line.startswith("+")]


def _store(go, path: str, line: str) -> None:
    from cudashell.frontends.repl import KeptHistory

    go.wait()
    KeptHistory(path, lambda text: pytest.fail(text)).store_string(line)


def _trim(go, path: str, keep: int) -> None:
    from cudashell.frontends.repl import trim_history

    go.wait()
    trim_history(Path(path), keep)


def _started(target, *args):
    """A process that starts its work on `go.set()`: forked before the test takes the lock, which a fork would
    share."""
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    process = ctx.Process(target=target, args=(go, *args))
    process.start()
    return process, go


def _history_of(path: Path, n: int) -> None:
    from prompt_toolkit.history import FileHistory

    for i in range(n):
        FileHistory(str(path)).store_string(f"ls {i}")


def test_an_entry_added_while_another_shell_rewrites_the_history_waits_and_is_kept(tmp_path):
    pytest.importorskip("prompt_toolkit")
    path = tmp_path / "history"
    _history_of(path, 3)
    adder, go = _started(_store, str(path), "free all")
    with locked(path):  # another shell, trimming: read, then replaced
        lines = path.read_text()
        go.set()
        time.sleep(0.5)
        assert adder.is_alive()  # waiting for the lock, not appending to the file about to be replaced
        replace_file(path, lines)
    adder.join(30)
    assert adder.exitcode == 0
    assert _history_entries(path) == ["ls 0", "ls 1", "ls 2", "free all"]


def test_a_trim_waits_for_an_entry_being_added(tmp_path):
    pytest.importorskip("prompt_toolkit")
    path = tmp_path / "history"
    _history_of(path, 5)
    trimmer, go = _started(_trim, str(path), 2)
    with locked(path):  # another shell, adding an entry
        go.set()
        time.sleep(0.5)
        assert trimmer.is_alive()
        with open(path, "a") as f:
            f.write("\n# now\n+sync\n")
    trimmer.join(30)
    assert trimmer.exitcode == 0
    assert _history_entries(path) == ["ls 4", "sync"]


# ------------------------------------------------------------------ 8. damaged state
DAMAGED = {
    "a wrong type": b'{"current": "pinned", "lessons": {"pinned": {"step": 1, "steps": 5, "skipped": 5}}}',
    "a step that is text": b'{"current": "pinned", "lessons": {"pinned": {"step": "2"}}}',
    "a step below zero": b'{"current": "pinned", "lessons": {"pinned": {"step": -1}}}',
    "a skipped step that is true": b'{"current": "pinned", "lessons": {"pinned": {"step": 2, "skipped": [true]}}}',
    "a current that is a number": b'{"current": 5, "lessons": {}}',
    "garbage": b"\x00garbage{{",
    "not UTF-8": b'{"current": "\xff"}',
    "empty": b"",
    "a list": b"[1, 2]",
}


@pytest.mark.parametrize("content", list(DAMAGED))
def test_damaged_progress_is_named_once_moved_aside_and_the_lessons_go_on(tmp_path, content):
    (tmp_path / PROGRESS_FILE).write_bytes(DAMAGED[content])
    sim = Cush(SimBackend(), state_dir=tmp_path)
    first = sim.ok("lesson")  # resume: what would have read the damaged entry
    aside = [p for p in tmp_path.iterdir() if p.name.startswith(f"{PROGRESS_FILE}.bad-")]
    assert len(aside) == 1 and aside[0].read_bytes() == DAMAGED[content]
    assert first["damaged"].startswith(f"{PROGRESS_FILE} was damaged (") and \
        first["damaged"].endswith(f"; moved aside to {aside[0].name}; progress starts afresh")
    assert "damaged" not in sim.ok("lesson list")  # said once
    assert sim.ok("lesson pinned")["event"] == "start" and "damaged" not in sim.ok("lesson pinned")
    assert json.loads((tmp_path / PROGRESS_FILE).read_text())["current"] == "pinned"
    sim.shell.close()


def test_damaged_progress_is_one_line_on_the_screen(tmp_path):
    (tmp_path / PROGRESS_FILE).write_text('{"current": "pinned", "lessons": {"pinned": {"skipped": 5}}}')
    out = io.StringIO()
    shell = Shell(SimBackend(), "t", out=out, err=out, state_dir=tmp_path)
    assert shell.execute("lesson pinned")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("lessons.json was damaged (lesson pinned's 'skipped' is not a list of step numbers); "
                               "moved aside to lessons.json.bad-")
    assert lines[1].startswith("lesson pinned: ") and "INTERNAL_ERROR" not in out.getvalue()
    shell.close()


def test_a_history_path_that_is_a_folder_turns_history_off_with_one_line(tmp_path):
    from tests.terminal import Terminal

    path = tmp_path / "state" / "cudashell" / "history"
    path.mkdir(parents=True)
    term = Terminal(tmp_path, 24, 80)
    term.run("alloc pinned 1MB as p")
    assert "p: pinned 1 MiB" in term.text
    rows = term.lines
    before = rows[:next(i for i, row in enumerate(rows) if row.startswith("cudashell "))]  # the line, wrapped
    said = f"history: cannot keep it in {path}: it is not a file; this session's history stays in memory"
    assert "".join(before).replace(" ", "") == said.replace(" ", "")
    assert "Traceback" not in term.raw and "Press ENTER" not in term.raw
    term.run("ls")
    term.send("\x04")
    term.wait(lambda t: t.ended, 30)
    term.child.close()
    assert term.child.exitstatus == 0


def test_a_history_file_that_cannot_be_read_is_said_once():
    pytest.importorskip("prompt_toolkit")
    from cudashell.frontends.repl import KeptHistory

    said = []
    history = KeptHistory("/", said.append)  # a folder: reading it fails
    assert list(history.load_history_strings()) == []
    history.store_string("ls")
    assert said == ["history: cannot read /: Is a directory; this session's history stays in memory"]


# ------------------------------------------------------------------ 9. grade's output
GRADING = ROOT / "docs" / "grading"


def _grade_process(tmp_path, *argv, **popen):
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
               XDG_STATE_HOME=str(tmp_path / "state"))
    return subprocess.Popen([sys.executable, "-m", "cudashell", "grade", "--backend", "sim", *argv], env=env,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, **popen)


def test_grade_into_a_reader_that_leaves_writes_junit_and_ends_141_without_a_traceback(tmp_path):
    xml = tmp_path / "j.xml"
    proc = _grade_process(tmp_path, "--junit", str(xml), str(GRADING / "checks.cush"),
                          *(str(GRADING / who) for who in ("right", "slow", "wrong")), stdout=subprocess.PIPE)
    proc.stdout.close()  # a reader gone before the grades are written (`| head -1` after its line races the writer:
    # grades that fit the pipe's buffer are all written before it leaves)
    err = proc.stderr.read()
    assert proc.wait(120) == 141
    assert err == ""
    assert len(ElementTree.parse(xml).getroot().findall("testsuite")) == 3


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_grade_into_a_full_stdout_writes_junit_and_says_one_line(tmp_path):
    xml = tmp_path / "j.xml"
    with open("/dev/full", "w") as full:
        proc = _grade_process(tmp_path, "--junit", str(xml), str(GRADING / "checks.cush"), str(GRADING / "right"),
                              stdout=full)
        err = proc.stderr.read()
        assert proc.wait(120) == 1
    assert err == "cudashell: output was lost: No space left on device\n"
    assert ElementTree.parse(xml).getroot().find("testsuite").get("failures") == "0"


def test_a_junit_file_on_a_full_disk_is_one_line_and_the_grades_still_print(tmp_path, monkeypatch):
    from cudashell.frontends.cli import main
    from cudashell.frontends.environment import Environment

    xml = tmp_path / "j.xml"
    xml.write_text("<earlier/>")
    out, err = io.StringIO(), io.StringIO()
    env = Environment(stdin=None, stdout=out, stderr=err, stdin_isatty=False, stdout_isatty=False,
                      config_dir=tmp_path / "c", state_dir=tmp_path / "s")
    FullDisk(monkeypatch, room=50)
    code = main(["grade", "--backend", "sim", "--junit", str(xml), str(GRADING / "checks.cush"),
                 str(GRADING / "right")], env)
    monkeypatch.undo()
    assert code == 2 and out.getvalue().startswith("grade of ")
    assert err.getvalue() == (f"DISK_FULL: cannot write --junit {xml}: No space left on device; the file is as it "
                              "was before — hint: name a file in a folder that exists and that you may write\n")
    assert xml.read_text() == "<earlier/>"


def test_ctrl_c_during_grade_is_130_and_one_line_and_leaves_no_process(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "loop.cush").write_text("alloc device 4 as d\nmemset d 0\nkernel define forever <<< __global__ void "
                                   "forever(int *a) { while (a[0] == 0) { } } >>>\nlaunch forever d grid 1 block 1\n"
                                   "sync\n")
    checks = tmp_path / "checks.cush"
    checks.write_text("run loop.cush\nexpect ok points 1\n")
    proc = _grade_process(tmp_path, "--time-limit", "60", str(checks), str(sub), stdout=subprocess.PIPE,
                          start_new_session=True)  # a process group of its own, as a terminal's foreground job
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    if not children.exists():
        proc.kill()
        pytest.skip("the kernel does not list a process's children (CONFIG_PROC_CHILDREN)")
    deadline = time.monotonic() + 30
    while not children.read_text().split() and time.monotonic() < deadline:  # the section's process is forked
        time.sleep(0.05)
    time.sleep(1)  # and in the kernel's loop
    assert proc.poll() is None and children.read_text().split()
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at a terminal does
    err = proc.stderr.read()
    assert proc.wait(30) == 130 and time.monotonic() - started < 4
    assert err == "interrupted\n"
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):  # the section's process went with it
        os.killpg(proc.pid, 0)

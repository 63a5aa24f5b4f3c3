"""A Shell is built with its options, not patched afterwards, and a nested run (a repeat's rounds, `run FILE`, a
demo, `output FILE`) runs in a frame of its own: however it ends, the outer frame is as it was."""

from __future__ import annotations

import ast
import dataclasses
import io
import re
from pathlib import Path

import pytest

import cudashell
from cudashell.backends.sim import SimBackend
from cudashell.frontends.frame import ShellOptions
from cudashell.frontends.shell import Shell

FRONT_ENDS = ("frontends/cli.py", "frontends/repl.py", "frontends/notebook.py", "frontends/grade.py", "commands/calibrate.py")


def shell_expressions(tree: ast.AST) -> set[str]:
    """The names a module gives its shells: `shell`, `sh`, whatever is assigned a `Shell(…)`, and `….shell`."""
    names = {"shell", "sh"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                getattr(node.value.func, "id", None) == "Shell":
            names |= {ast.unparse(t) for t in node.targets}
    return names


def is_shell(node: ast.AST, names: set[str]) -> bool:
    text = ast.unparse(node)
    return text in names or text.endswith(".shell") or text.endswith(".shell.session") or \
        any(text == f"{n}.session" for n in names)


def patches(path: Path) -> list[str]:
    """Where a module sets an attribute of a shell (or of its session) or calls a private method of one."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names, found = shell_expressions(tree), []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if isinstance(t, ast.Attribute) and is_shell(t.value, names):
                    found.append(f"{path.name}:{node.lineno}: sets {ast.unparse(t)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr.startswith("_") and not node.func.attr.startswith("__") and \
                is_shell(node.func.value, names):
            found.append(f"{path.name}:{node.lineno}: calls {ast.unparse(node.func)}")
    return found


def test_no_front_end_patches_its_shell_after_building_it():
    root = Path(cudashell.__file__).parent
    assert [p for name in FRONT_ENDS for p in patches(root / name)] == []


def test_the_scan_finds_a_patch():
    probe = Path(__file__).with_name("_probe_front_end.py")
    probe.write_text("shell = Shell(b)\nshell.display = f\nme.shell.editor = e\nshell.session.state_dir = d\n"
                     "s = Shell(b)\ns._write(s.err, 'x')\nshell.session.settings['x'] = 1\n")
    try:
        assert [p.split(": ", 1)[1] for p in patches(probe)] == [
            "sets shell.display", "sets me.shell.editor", "sets shell.session.state_dir", "calls s._write"]
    finally:
        probe.unlink()


def test_options_are_frozen_and_what_runs_now_cannot_be_set():
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    try:
        with pytest.raises(dataclasses.FrozenInstanceError):
            shell.options.echo = True
        for name in ("backend", "session", "out", "err", "dirs", "echo", "options", "redirect"):
            with pytest.raises(AttributeError):
                setattr(shell, name, None)
    finally:
        shell.close()


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "fails.cush").write_text("alloc pinned 4KB as mine\nfree nosuch\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "unwritable.cush").write_text("output no/such/dir/out.txt\n")  # its own folder: allowed, not there
    monkeypatch.chdir(tmp_path)
    return tmp_path


def as_it_was(shell: Shell, before: dict) -> None:
    now = {name: getattr(shell, name) for name in before}
    assert now == before
    assert shell.session.script_dir == shell.dirs[-1]


def outer(shell: Shell) -> dict:
    return {name: getattr(shell, name) for name in
            ("frame", "backend", "session", "out", "err", "redirect", "dirs", "echo", "recording", "expecting")}


def test_a_failing_run_inside_a_repeat_leaves_the_outer_frame_as_it_was(folder):
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO(), workdir=folder)
    try:
        assert shell.execute(f"output {folder}/results.txt")
        before = outer(shell)
        assert shell.execute("repeat 3 <<< alloc device 4KB; run fails.cush >>>") is False
        assert shell.last_error.code == "SCRIPT_FAILED" and "round 1" in shell.last_error.message
        as_it_was(shell, before)
        assert not shell.redirect.closed  # the outer `output FILE` goes on
        assert shell.execute("ls")
        assert [e.text for e in shell.session.history][-2:] == ["repeat 3 <<< alloc device 4KB; run fails.cush >>>",
                                                               "ls"]
    finally:
        shell.close()
    assert re.search(r"^mine +pinned", (folder / "results.txt").read_text(), re.M)  # `ls` after the repeat


def test_an_output_file_that_cannot_be_opened_in_a_nested_script_leaves_the_frame_as_it_was(folder):
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO(), workdir=folder, echo_scripts=True)
    try:
        before = outer(shell)
        assert shell.execute("run sub/unwritable.cush") is False
        assert "IO_ERROR" in shell.err.getvalue() and "cush> output" in shell.out.getvalue()
        as_it_was(shell, before)
        assert shell.redirect is None and shell.execute("echo here") and "here" in shell.out.getvalue()
    finally:
        shell.close()


def test_a_bug_raised_through_nested_runs_pops_every_frame(folder, monkeypatch):
    """With --debug an internal error leaves the shell as a traceback, through a repeat, its round-1 recorder and
    a script: each frame is popped on the way out."""
    backend = SimBackend()
    shell = Shell(backend, out=io.StringIO(), err=io.StringIO(), workdir=folder, debug=True)
    (folder / "sub" / "copies.cush").write_text("memset d 0\n")
    try:
        shell.execute("alloc device 4KB as d")
        before = outer(shell)

        def broken(*args, **kwargs):
            raise ZeroDivisionError("a bug")
        monkeypatch.setattr(backend, "memset", broken)
        with pytest.raises(ZeroDivisionError):
            shell.execute("repeat 2 <<< run sub/copies.cush >>>")
        as_it_was(shell, before)
        assert shell.backend is backend
    finally:
        monkeypatch.undo()
        shell.close()


def test_a_demo_that_fails_gives_the_user_session_back(folder, monkeypatch):
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO(), workdir=folder)
    try:
        shell.execute("alloc pinned 4KB as kept")
        before = outer(shell)

        def broken(*args, **kwargs):
            raise ZeroDivisionError("a bug")
        monkeypatch.setattr(shell.backend, "memcpy", broken)
        assert shell.execute("demo pinned-vs-pageable") is False
        assert "INTERNAL_ERROR" in shell.err.getvalue()
        as_it_was(shell, before)
        assert list(shell.session.buffers) == ["kept"]
    finally:
        monkeypatch.undo()
        shell.close()


def test_the_prompt_holds_output_in_a_frame_and_gets_its_streams_back():
    screen, held = io.StringIO(), io.StringIO()
    shell = Shell(SimBackend(), out=screen, err=screen)
    try:
        with pytest.raises(KeyError):
            with shell.writing_to(held, held):
                shell.execute("alloc pinned 4KB; free nosuch")
                raise KeyError("the loop itself failed")
        assert shell.out is screen and shell.err is screen and screen.getvalue() == ""
        assert "p0: pinned" in held.getvalue() and "NO_SUCH_BUFFER" in held.getvalue()
    finally:
        shell.close()


def test_a_notebook_cell_s_options_last_the_cell():
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO(), options=ShellOptions(keep_going=False))
    try:
        with shell.using(keep_going=True):
            assert shell.run_text("free nosuch\nalloc pinned 4KB as after\n", "cell") is False
        assert "after" in shell.session.buffers and shell.keep_going is False
    finally:
        shell.close()

"""The interactive shell: the pure suggestion engine, the real PromptSession driven through a pipe, and
the installed command in a pseudo-terminal."""

from __future__ import annotations

import io
import os
import sys
import threading
import time

import pytest
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from prompt_toolkit.validation import ValidationError

from cudashell.backends.sim import SimBackend
from cudashell.repl import ShellValidator, repl
from cudashell.shell import Shell
from cudashell.suggest import suggest


@pytest.fixture
def shell():
    sh = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    yield sh
    sh.close()


def texts(line, shell):
    return [s.text for s in suggest(line, shell.session)]


def test_completion_offers_what_fits_at_the_cursor(shell):
    shell.execute("alloc pinned 1MB; alloc device 1MB; alloc pageable 1MB; register h0; stream create; "
                  "event record e")
    assert texts("mem", shell) == ["memcpy", "memset"]
    assert texts("alloc pinned 64MB ", shell) == ["portable", "mapped", "writecombined", "as"]
    assert texts("alloc managed 1MB ", shell) == ["global", "host", "as"]
    assert texts("memcpy h2d ", shell)[:2] == ["p0", "h0"]  # host-side sources only
    assert texts("memcpy h2d p0 ", shell)[:1] == ["d0"]  # device-side destinations only
    assert texts("memcpy p0 d0 async stream ", shell) == ["0", "1"]
    assert texts("show h0 dtype float", shell) == ["float16", "float32", "float64"]
    assert texts("unregister ", shell) == ["h0"]
    assert texts("elapsed ", shell) == ["e"]
    assert "saxpy" in texts("launch ", shell)
    assert texts("ls; fr", shell) == ["free"]
    assert texts("stream ", shell) == ["create", "destroy", "query"]


def test_file_paths_complete_for_run(shell, tmp_path):
    (tmp_path / "demo.cush").write_text("ls\n")
    assert texts(f"run {tmp_path}/de", shell) == [f"{tmp_path}/demo.cush"]


def test_validation_marks_the_column_before_enter():
    with pytest.raises(ValidationError) as e:
        ShellValidator().validate(Document("alloc pinned 64QB"))
    assert e.value.cursor_position == 13 and "USAGE" in e.value.message
    ShellValidator().validate(Document("alloc pinned 64MB; ls"))


def drive(shell, *keys: str) -> str:
    """Type the keys one group at a time, as a person would: completion runs in the background."""
    with create_pipe_input() as inp:
        def typist():
            for k in keys:
                time.sleep(0.15)
                inp.send_text(k)

        threading.Thread(target=typist, daemon=True).start()
        repl(shell, "banner", {"color": "never"}, input=inp, output=DummyOutput())
    return shell.out.getvalue()


def test_typing_tab_completion_and_ctrl_d_in_the_real_prompt(shell):
    out = drive(shell, "allo", "\t", " pinned 1MB", "\r", "ls\r", "\x04")
    assert "p0: pinned 1 MiB" in out and "released: p0 (pinned 1048576 B)" in out
    assert shell.session.buffers == {}


def test_a_malformed_line_is_not_run_and_ctrl_c_cancels_it(shell):
    out = drive(shell, "alloc pinned 64QB", "\r", "\x03", "alloc device 1KB\r", "\x04")
    assert [e.text for e in shell.session.history] == ["alloc device 1KB as d0"]
    assert "d0: device" in out


def test_inline_help_with_a_question_mark(shell):
    out = drive(shell, "memcpy ?\r", "\x04")
    assert "memcpy [h2d|d2h|d2d|h2h] SRC DST" in out and "cudaMemcpy" in out


def test_the_installed_command_in_a_pseudo_terminal(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_STATE_HOME=str(tmp_path / "state"),
               TERM="xterm", NO_COLOR="1")
    child = pexpect.spawn(sys.executable, ["-m", "cudashell", "--backend", "sim"], env=env, encoding="utf-8",
                          timeout=20, dimensions=(40, 120))
    child.expect("type `help`")
    child.expect("cush>")
    child.send("alloc pi")
    time.sleep(0.5)
    child.send("\t")  # completes `pinned`
    time.sleep(0.5)
    child.send(" 1MB mapped\r")
    child.expect("p0: pinned 1 MiB")
    child.expect("cush>")
    child.send("quit\r")
    child.expect("released: p0")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (tmp_path / "cfg" / "cudashell" / "config").read_text().startswith("# cudashell configuration")
    assert "alloc pinned 1MB mapped" in (tmp_path / "state" / "cudashell" / "history").read_text()


def test_ctrl_c_during_a_long_command_returns_to_the_prompt_consistent(shell, monkeypatch):
    shell.execute("alloc pinned 1MB")

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(shell.backend, "device_sync", interrupted)
    assert shell.execute("sync; alloc device 1KB") is False
    assert "INTERRUPTED" in shell.err.getvalue() and list(shell.session.buffers) == ["p0"]
    monkeypatch.undo()
    assert shell.execute("sync; alloc device 1KB") is True

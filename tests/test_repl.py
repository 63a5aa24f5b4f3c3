"""The interactive shell: the pure suggestion engine, the real PromptSession driven through a pipe, and
the installed command in a pseudo-terminal."""

from __future__ import annotations

import io
import os
import shutil
import sys
import threading
import time

import pytest
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from prompt_toolkit.validation import ValidationError

from cudashell.backends.sim import SimBackend
from cudashell.frontends.repl import ShellValidator, repl
from cudashell.frontends.shell import Shell
from cudashell.language.suggest import suggest


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
    assert texts("mem", shell) == ["memcpy", "memcpy batch", "memcpy2d", "memcpy3d", "memset"]
    assert texts("alloc pinned 64MB ", shell) == ["portable", "mapped", "writecombined", "as"]
    assert texts("alloc managed 1MB ", shell) == ["global", "host", "as"]
    assert texts("alloc device 1MB ", shell) == ["async", "as", "on", "stream", "pool"]  # `async [stream S] [pool P]`
    assert texts("memcpy h2d ", shell)[:2] == ["p0", "h0"]  # host-side sources only
    assert texts("memcpy h2d p0 ", shell)[:1] == ["d0"]  # device-side destinations only
    assert texts("memcpy p0 d0 async stream ", shell) == ["0", "1"]
    assert texts("show h0 dtype float", shell) == ["float16", "float32", "float64"]
    assert texts("unregister ", shell) == ["h0"]
    assert texts("elapsed ", shell) == ["e"]
    assert "saxpy" in texts("launch ", shell)
    assert texts("ls; fr", shell) == ["free"]
    assert texts("stream ", shell) == ["create", "destroy", "query"]
    assert texts("show ", shell)[:2] == ["p0", "h0"]  # the host reads it: not d0
    assert texts("memset ", shell)[:2] == ["p0", "d0"]  # the GPU writes it: not pageable h0
    assert texts("show p0[", shell) == ["p0[0:+512KB]", "p0[512KB:]"]  # a part: its halves


def test_parts_of_buffers_are_highlighted_as_names(shell):
    from prompt_toolkit.document import Document

    from cudashell.frontends.repl import ShellLexer

    shell.execute("alloc pinned 1MB")
    line = ShellLexer(shell).lex_document(Document("memcpy p0[4KB:] p0 nosuch[0:]"))(0)
    styles = {text: style for style, text in line}
    assert styles["nosuch[0:]"] == ""
    assert styles.get("p0[4KB:]") == styles.get("p0") == "class:name"


def test_file_paths_complete_for_run(shell, tmp_path):
    (tmp_path / "demo.cush").write_text("ls\n")
    assert texts(f"run {tmp_path}/de", shell) == [f"{tmp_path}/demo.cush"]


def test_validation_marks_the_column_before_enter():
    with pytest.raises(ValidationError) as e:
        ShellValidator().validate(Document("alloc pinned 64QB"))
    assert e.value.cursor_position == 13 and "USAGE" in e.value.message
    ShellValidator().validate(Document("alloc pinned 64MB; ls"))


class Prompt:
    """What the person at the keyboard sees, read from the real PromptSession while it runs: the line being edited,
    how many prompts have been shown, and the screen (the shell's output so far)."""

    def __init__(self, shell):
        self.screen_io, self.session, self.prompts = shell.out, None, 0

    def make_session(self, real):
        def made(*args, **kwargs):
            session = self.session = real(*args, **kwargs)
            shown = session.prompt

            def prompt(*a, **k):
                self.prompts += 1
                return shown(*a, **k)

            session.prompt = prompt
            return session
        return made

    @property
    def screen(self) -> str:
        return self.screen_io.getvalue()

    def line(self) -> str | None:
        """The text being edited at the prompt, or None while no prompt is up."""
        s = self.session
        return s.default_buffer.text if s is not None and s.app.is_running else None

    def at_prompt(self, n: int) -> bool:
        """The n-th prompt is up, empty: the line before it has run."""
        return self.prompts == n and self.line() == ""


def typed(text: str):
    return lambda p: p.line() == text


def prompt(n: int):
    return lambda p: p.at_prompt(n)


def drive(shell, monkeypatch, *steps) -> str:
    """Type as a person would, one group of keys at a time, each once the screen shows what the last one did (a
    completion, which runs in the background; a command's output; the next prompt): steps are (keys, ready) pairs,
    ready(Prompt) saying when the keys have had their effect. Ends with Ctrl-D."""
    import cudashell.frontends.repl as repl_module

    view, problems = Prompt(shell), []
    monkeypatch.setattr(repl_module, "make_session", view.make_session(repl_module.make_session))
    with create_pipe_input() as inp:
        def typist():
            waits = [(None, prompt(1)), *steps]
            for i, (keys, ready) in enumerate(waits):
                if keys is not None:
                    inp.send_text(keys)
                deadline = time.monotonic() + 20
                while not ready(view):
                    if time.monotonic() > deadline:
                        problems.append(f"step {i} ({keys!r}): the line is {view.line()!r} at prompt {view.prompts}")
                        inp.close()  # the prompt reads end-of-input: the session ends
                        return
                    time.sleep(0.005)
            inp.send_text("\x04")

        thread = threading.Thread(target=typist, daemon=True)
        thread.start()
        repl(shell, "banner", {"color": "never"}, input=inp, output=DummyOutput())
        thread.join(timeout=30)
    assert problems == []
    return shell.out.getvalue()


def test_typing_tab_completion_and_ctrl_d_in_the_real_prompt(shell, monkeypatch):
    out = drive(shell, monkeypatch, ("allo", typed("allo")), ("\t", typed("alloc")),
                (" pinned 1MB", typed("alloc pinned 1MB")), ("\r", prompt(2)), ("ls\r", prompt(3)))
    assert "p0: pinned 1 MiB" in out and "released: p0 (pinned 1048576 B)" in out
    assert shell.session.buffers == {}


def test_a_malformed_line_is_not_run_and_ctrl_c_cancels_it(shell, monkeypatch):
    def unmarked(p):  # typed, and not marked yet: the check waits for Enter
        return p.line() == "alloc pinned 64QB" and p.session.default_buffer.validation_error is None

    def refused(p):  # still the line, marked at Enter, still the first prompt
        return p.line() == "alloc pinned 64QB" and p.session.default_buffer.validation_error is not None

    out = drive(shell, monkeypatch, ("alloc pinned 64QB", unmarked), ("\r", refused), ("\x03", prompt(2)),
                ("alloc device 1KB\r", prompt(3)))
    assert [e.text for e in shell.session.history] == ["alloc device 1KB as d0"]
    assert "d0: device" in out


def test_inline_help_with_a_question_mark(shell, monkeypatch):
    out = drive(shell, monkeypatch, ("memcpy ?\r", prompt(2)))
    assert "memcpy [h2d|d2h|d2d|h2h] SRC DST" in out and "cudaMemcpy" in out


def test_the_installed_command_in_a_pseudo_terminal(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_STATE_HOME=str(tmp_path / "state"),
               TERM="xterm", NO_COLOR="1", PROMPT_TOOLKIT_NO_CPR="1")
    child = pexpect.spawn(sys.executable, ["-m", "cudashell", "--backend", "sim"], env=env, encoding="utf-8",
                          timeout=20, dimensions=(40, 120))
    child.expect("`help` for more")
    child.expect("cush>")
    child.send("alloc pi")
    child.expect("pinned")  # the completion menu offers it (no error mark while typing: the check waits for Enter)
    child.send("\t")  # completes `pinned`: the line below runs only if it did
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


def test_the_toolbar_fits_the_terminal_and_counts_right(shell):
    from cudashell.frontends.repl import toolbar

    shell.execute("alloc pinned 1MB; stream create; hold")
    narrow, wide = toolbar(shell, 80), toolbar(shell, 200)
    assert len(narrow) <= 80 and "1 buffer ·" in narrow and "HELD" in narrow
    assert "1 stream ·" in wide and "explain off" in wide and "default stream 0" not in wide  # the one made
    assert toolbar(shell, 30) == " sim · H100 80GB HBM3 "[:30]


def test_the_toolbar_names_no_stream_before_one_is_made_and_sums_sizes_as_ls_writes_them(shell):
    """Issue 37: "1 stream" showed before any `stream create`; 64 MiB + 1 MiB + 64 B of pinned memory showed as
    "65.00 MiB", which looks round and is not."""
    from cudashell.frontends.repl import toolbar

    assert "stream" not in toolbar(shell, 200)
    shell.execute("alloc pinned 64MB; alloc pinned 1MB; alloc pinned 64")
    assert "pinned 65 MiB + 64 B ·" in toolbar(shell, 200)
    shell.execute("alloc pinned 1MB")
    assert "pinned 66.00" not in toolbar(shell, 200) and "pinned 66 MiB + 64 B" in toolbar(shell, 200)


def test_history_keeps_the_newest_entries(tmp_path):
    from cudashell.frontends.repl import trim_history

    path = tmp_path / "history"
    path.write_text("".join(f"\n# 2026-01-0{i}\n+cmd{i}\n" for i in range(1, 6)))
    trim_history(path, 2)
    assert [x for x in path.read_text().splitlines() if x.startswith("+")] == ["+cmd4", "+cmd5"]


def test_the_validator_gives_the_did_you_mean_hint_scripts_give():
    from prompt_toolkit.document import Document
    from prompt_toolkit.validation import ValidationError

    from cudashell.frontends.repl import ShellValidator

    with pytest.raises(ValidationError) as e:
        ShellValidator().validate(Document("aloc pinned 1MB"))
    assert "did you mean `alloc`" in e.value.message


def test_completion_offers_kernel_pointers_and_setting_values(shell):
    from cudashell.language.suggest import suggest

    shell.execute("alloc pinned 1MB as a; alloc device 1MB as b; alloc pageable 1MB as h")

    def texts(line):
        return [s.text for s in suggest(line, shell.session)]
    assert texts("launch sum ")[:2] == ["a", "b"] and "h" not in texts("launch sum ")  # h: unreachable
    assert "a" not in texts("launch saxpy ") and texts("launch saxpy 2.0 ")[:2] == ["a", "b"]  # a float first
    assert texts("set tablefmt g") == ["github", "grid"] and texts("set time ") == ["on", "off"]


def test_history_suggestions_naming_missing_buffers_are_not_offered(shell):
    from cudashell.frontends.repl import names_exist

    shell.execute("alloc pinned 1MB as a; alloc device 1MB as b")
    assert names_exist("memcpy a b", shell.session) and names_exist("free all", shell.session)
    assert not names_exist("memcpy a d3", shell.session) and not names_exist("free a zz", shell.session)
    assert names_exist("alloc pinned 1MB as brand_new", shell.session)


def test_an_open_block_continues_and_a_pasted_block_runs_line_by_line(shell, monkeypatch):
    paste = "alloc pinned 4KB as a\nls\nfree a"
    out = drive(shell, monkeypatch, ("repeat 2 <<<\r", typed("repeat 2 <<<\n")),
                ("echo looped\r", typed("repeat 2 <<<\necho looped\n")), (">>>\r", prompt(2)),
                (f"\x1b[200~{paste}\x1b[201~", typed("free a")), ("\r", prompt(4)))  # whole lines ran at once
    assert "repeated 2×" in out
    assert [e.text for e in shell.session.history][-3:] == ["alloc pinned 4KB as a", "ls", "free a"]
    assert "a: pinned 4 KiB" in out and "USAGE" not in shell.err.getvalue()


def test_output_taller_than_the_screen_goes_through_the_pager(tmp_path):
    import io

    from cudashell.frontends.repl import page
    from cudashell.model.settings import pager_argv

    paged = tmp_path / "paged"
    pager = tmp_path / "mypager"  # a program of the user's: it keeps what it was given
    pager.write_text("#!/bin/sh\ncat > \"$1\"\n")
    pager.chmod(0o755)
    out = io.StringIO()
    tall = "".join(f"line {i}\n" for i in range(50))
    page(tall, pager_argv(f"{pager} {paged}"), out, rows=24, tty=True)
    assert paged.read_text() == tall and out.getvalue() == ""
    page("short\n", pager_argv(f"{pager} {paged}x"), out, rows=24, tty=True)
    assert out.getvalue() == "short\n" and not (tmp_path / "pagedx").exists()
    page(tall, pager_argv("cat"), out, rows=24, tty=False)  # a pipe, a script: never paged
    assert out.getvalue().endswith("line 49\n")
    page(tall, ["no-such-pager-here"], io.StringIO(), rows=24, tty=True)  # a pager that will not start: as is


@pytest.mark.parametrize("rows,cols", [(24, 80), (40, 120)])
def test_a_real_terminal_at_its_size_lists_whole_pointers_and_pages_help(tmp_path, rows, cols):
    """pexpect in a pty of the given size: `ls` fits the width with every pointer whole; `help all` (taller than
    24 rows) goes through the pager, which `q` leaves; a demo between two commands leaves them untouched."""
    import re

    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_STATE_HOME=str(tmp_path / "state"),
               TERM="xterm", NO_COLOR="1", LESS="", PROMPT_TOOLKIT_NO_CPR="1")
    child = pexpect.spawn(sys.executable, ["-m", "cudashell", "--backend", "sim"], env=env, encoding="utf-8",
                          timeout=30, dimensions=(rows, cols))
    child.expect("cush>")
    welcome = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before).replace("\r", "").splitlines()
    assert max(map(len, welcome)) <= cols and re.search(r"Tab\s+completes", " ".join(welcome))  # between words
    child.send("alloc pinned 1MB as a; alloc device 64MB as dev; alloc pageable 4MB as mine; register mine mapped\r")
    child.expect("cudaHostRegister")
    child.expect("cush>")
    child.send("ls\r")
    child.expect("state")  # the table's header: what follows, up to the next prompt, is the table
    child.expect("cush>")
    table = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before)
    assert re.search(r"0x[0-9a-f]{12}", table) and not re.search(r"0x[0-9a-f]{1,11}\s*$", table, re.M)
    if rows == 24 and shutil.which("less"):
        child.send("help all\r")
        child.expect(r"\(END\)|:")  # less waits: the help is taller than the screen
        child.send("q")
        child.expect("cush>")
    child.send("demo zero-copy\r")
    child.expect("scope of its own", timeout=60)
    child.expect("cush>")
    child.send("quit\r")
    child.expect("released: a \\(pinned 1048576 B\\), dev \\(device 67108864 B\\), mine")
    child.expect(pexpect.EOF)


def test_output_comes_in_the_order_the_commands_ran(shell, monkeypatch):
    """Issue 25, 1: an error is not printed above the output of a command that ran before it on the same line."""
    out = drive(shell, monkeypatch, ("alloc pinned 2MB as q; show nosuch; ls\r", prompt(2)))
    assert "NO_SUCH_BUFFER" in out
    assert out.index("q: pinned 2 MiB") < out.index("NO_SUCH_BUFFER")


def test_alt_enter_runs_a_refused_line_to_show_the_shells_error(shell, monkeypatch):
    """Issue 25, 3: the check waits for Enter; Esc Enter runs the line anyway and the shell names what is wrong."""
    out = drive(shell, monkeypatch, ("me", typed("me")), ("mcpy", typed("memcpy")), ("\x1b\r", prompt(2)))
    assert "USAGE: missing SRC" in out and [e.ok for e in shell.session.history] == [False]


def test_a_paste_without_bracketed_paste_runs_each_line_on_its_own(shell, monkeypatch):
    """Issue 25, 2: the keys of a pasted block arrive at once; an invalid line fails alone, the rest run."""
    out = drive(shell, monkeypatch, ("alloc pinned 1MB as x1\ralocc device 1MB as x2\rfill x1 7\rshow x1 count 2\r",
                                      prompt(5)))
    assert "UNKNOWN_COMMAND" in out and "x1 [uint8] @0: 7 7" in out
    assert [e.text for e in shell.session.history if e.ok] == ["alloc pinned 1MB as x1", "fill x1 7", "show x1 count 2"]


def test_a_transcripts_prompts_are_taken_off_and_its_output_left_out():
    from cudashell.language.typed import strip_prompts

    assert strip_prompts("alloc pinned 1MB\nls") == "alloc pinned 1MB\nls"  # no prompt: as it is
    assert strip_prompts("cush> alloc pinned 1MB\np0: pinned 1 MiB …\ncush> repeat 2 <<<\n  ...> ls\n  ...> >>>") \
        == "alloc pinned 1MB\nrepeat 2 <<<\nls\n>>>"
    assert strip_prompts("cush>") == ""


def test_history_references_name_the_commands_history_lists():
    from cudashell.errors import ShellError
    from cudashell.language.typed import expand_history

    past = ["alloc pinned 1MB as p0", "ls", "show p0 count 4"]
    assert expand_history("ls", past) is None and expand_history("echo hi!", past) is None
    assert expand_history("!!", past) == "show p0 count 4"
    assert expand_history("!1", past) == "alloc pinned 1MB as p0" and expand_history("!-2", past) == "ls"
    assert expand_history("!sh dtype float32", past) == "show p0 count 4 dtype float32"
    assert expand_history("!al", past) == "alloc pinned 1MB as p0"
    for ref, message in [("!4", "there is no command 4 in the history (1–3)"), ("!0", "no command 0"),
                         ("!-4", "no command -4"), ("!zz", "no command in the history starts with `zz`")]:
        with pytest.raises(ShellError) as e:
            expand_history(ref, past)
        assert e.value.code == "NO_SUCH_HISTORY" and message in e.value.message
    with pytest.raises(ShellError, match="nothing has run yet"):
        expand_history("!!", [])


def test_the_toolbar_keeps_f1_help_when_it_drops_items(shell):
    from cudashell.frontends.repl import toolbar

    shell.execute("alloc pinned 1MB; stream create; hold")
    for width in (60, 80, 100):
        bar = toolbar(shell, width)
        assert len(bar) <= width and bar.rstrip().endswith("F1 help"), bar


def test_completion_reads_the_line_the_cursor_is_on(shell):
    from prompt_toolkit.completion import CompleteEvent

    from cudashell.frontends.repl import ShellCompleter

    shell.execute("alloc pinned 1MB; alloc device 1MB")
    doc = Document("alloc pinned 64MB mapped\nmemcpy p0 d0 ")  # a bracketed paste's last line
    offered = [c.text for c in ShellCompleter(shell).get_completions(doc, CompleteEvent())]
    assert "async" in offered and "mapped" not in offered and "portable" not in offered


def test_the_progress_line_goes_to_the_terminal_while_output_is_held():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    terminal, held = Tty(), io.StringIO()
    shell = Shell(SimBackend(), out=terminal, err=terminal, progress_stream=terminal)
    try:
        with shell.writing_to(held, held):  # as the prompt holds a command's output for its pager
            shell.execute("bench memcpy h2d pinned sizes 4KB,64KB reps 1")
    finally:
        shell.close()
    assert "bench memcpy [" in terminal.getvalue() and "2/2" in terminal.getvalue()
    assert "bench memcpy [" not in held.getvalue() and "pinned" in held.getvalue()


def test_edit_is_refused_where_no_one_is_at_a_prompt(shell):
    assert shell.execute("edit") is False
    assert "NOT_INTERACTIVE" in shell.err.getvalue()


def editing(editor, folder) -> Shell:
    """A shell at a prompt whose user's editor is `editor`, in `folder`."""
    return Shell(SimBackend(), out=io.StringIO(), err=io.StringIO(), editor=editor, workdir=folder)


def test_edit_puts_what_the_editor_saved_at_the_next_prompt(tmp_path):
    seen = []

    def editor(text, suffix):
        seen.append((text, suffix))
        return text.replace("4KB", "8KB") + "\n"

    shell = editing(editor, tmp_path)
    shell.execute("alloc pinned 4KB as a")
    assert shell.execute("edit") and seen[-1] == ("alloc pinned 4KB as a", ".cush")
    assert shell.next_input == "alloc pinned 8KB as a"
    assert shell.execute("edit new.cush") and shell.next_input == "run new.cush"
    assert (tmp_path / "new.cush").read_text() == "\n"


def test_edit_of_a_file_quotes_its_name_refuses_another_encoding_and_checks_the_folder_first(tmp_path):
    opened = []
    shell = editing(lambda text, suffix: opened.append(text) or "echo edited\n", tmp_path)
    assert shell.execute('edit "my script.cush"') and shell.next_input == 'run "my script.cush"'
    shell.execute(shell.next_input)
    assert "edited" in shell.out.getvalue()
    (tmp_path / "latin.cush").write_bytes("echo café\n".encode("latin-1"))
    assert shell.execute("edit latin.cush") is False and "BAD_ENCODING" in shell.err.getvalue()
    assert shell.execute("edit nosuchdir/x.cush") is False and "IO_ERROR" in shell.err.getvalue()
    assert len(opened) == 1  # the editor opened only for the file it could write back

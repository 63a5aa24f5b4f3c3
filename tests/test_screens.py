"""The prompt as a pgcli or IPython user meets it, at 80×24 and 120×40, read off a terminal emulator."""

from __future__ import annotations

import re

import pytest

from tests.terminal import ESC_ENTER, F1, F2, Terminal, paste

SIZES = [pytest.param((24, 80), id="80x24"), pytest.param((40, 120), id="120x40")]


@pytest.fixture(params=SIZES)
def term(request, tmp_path):
    rows, cols = request.param
    t = Terminal(tmp_path, rows, cols)
    yield t
    assert t.close() == 0


def test_output_comes_in_the_order_the_commands_ran(term):
    term.run("alloc pinned 2MB as q; show nosuch; echo after")
    text = term.text
    assert text.index("q: pinned 2 MiB") < text.index("NO_SUCH_BUFFER")
    assert "\nafter" not in text  # the failure stopped the line


def test_a_paste_without_bracketed_paste_runs_each_line_on_its_own(term):
    term.send("alloc pinned 1MB as x1\ralocc device 1MB as x2\rfill x1 7\rshow x1 count 2\r")
    term.wait(lambda t: "x1 [uint8] @0: 7 7" in t.text and t.prompt_line() == "")
    assert "UNKNOWN_COMMAND" in term.text
    assert not re.search(r"fill x1 \S*alocc|ls7", term.text)  # nothing typed into the refused line


def test_the_line_is_checked_on_enter_not_while_typing(term):
    term.send("me").wait(lambda t: t.prompt_line() == "me")
    term.send("mcpy").wait(lambda t: t.prompt_line() == "memcpy")
    assert "UNKNOWN_COMMAND" not in term.display and "USAGE" not in term.display
    term.send("\r").wait(lambda t: "USAGE: missing SRC" in t.display)  # marked, the line kept to mend
    term.wait(lambda t: t.prompt_line() == "memcpy")  # the line is still there to go on with
    term.send(ESC_ENTER).wait(lambda t: t.prompt_line() == "" and "USAGE: missing SRC" in t.text.split("cush> memcpy")[-1])


def test_a_demo_shows_its_commands_and_marks_the_errors_it_expects(term):
    term.run("demo register", timeout=120)
    lines = term.lines
    launch = lines.index("cush> launch increment buf")
    after = lines[launch + 1:]
    expected = " ".join(after[:next(i for i, row in enumerate(after) if row.startswith("cush>"))])
    assert expected.startswith("as expected: register.cush:21:18: NOT_DEVICE_ACCESSIBLE")
    assert "cush> register buf portable mapped" in lines and "cush> say en" not in term.text


def test_a_transcript_pasted_from_the_readme_runs_without_its_prompts_and_output(term):
    transcript = ("cush> alloc pinned 1MB as t\n"
                  "t: pinned 1 MiB (1048576 B)  flags -  host 0x7f5b00000000  device same (UVA)\n"
                  "cush> repeat 2 <<<\n"
                  "  ...> echo twice\n"
                  "  ...> >>>\n"
                  "cush> ls")
    term.send(paste(transcript)).wait(lambda t: "...> >>>" in t.display or ">>>" in t.display)
    term.send("\r").wait(lambda t: "repeated 2×" in t.text and t.prompt_line() == "")
    assert "UNKNOWN_COMMAND" not in term.text and "USAGE" not in term.text
    assert re.search(r"^t\s+pinned\s+1 MiB", term.text, re.M)  # the ls row: the alloc ran


def test_history_is_numbered_and_bangs_run_again(term):
    term.run("echo first")
    term.run("echo second")
    term.run("history")
    assert re.search(r"^\s+1  echo first$", term.text, re.M) and re.search(r"^\s+2  echo second$", term.text, re.M)
    term.run("!1")
    assert term.last_run() == ("!1", ["echo first", "first"])  # the command it names is shown, then it runs
    term.run("!! again")
    assert term.last_run() == ("!! again", ["echo first again", "first again"])
    term.run("!-4")
    assert term.last_run() == ("!-4", ["echo second", "second"])
    term.run("!99")
    assert "NO_SUCH_HISTORY: !99: there is no command 99 in the history (1–6)" in " ".join(term.last_run()[1])


def test_f1_shows_the_keys_and_the_toolbar_keeps_f1_at_80_columns(term):
    term.run("alloc pinned 1MB; alloc device 1GB; stream create; stream create; hold")
    term.wait(lambda t: t.toolbar().rstrip().endswith("F1 help") and "HELD" in t.toolbar())
    assert len(term.toolbar().rstrip()) <= term.cols
    term.send("memcpy " + F1).wait(lambda t: "keys at the prompt:" in t.text and "cudaMemcpy" in t.text)
    assert "Alt-Enter" in term.text and "F2, Ctrl-X Ctrl-E" in term.text
    term.wait(lambda t: t.prompt_line() == "memcpy")  # the line is still there to go on with


def test_tab_after_alloc_kind_does_not_put_a_flag_where_the_size_goes(term):
    term.send("alloc pinned \t\t").wait(lambda t: t.prompt_line() == "alloc pinned")
    term.send("64MB \t").wait(lambda t: "portable" in t.display)  # after the size the flags are offered


def test_a_soft_wrapped_long_line_has_no_continuation_prompt(term):
    line = "echo " + "word " * (term.cols // 4)
    term.send(line).wait(lambda t: "word word" in t.cursor_row() and t.cursor_row() != t.prompt_row())
    assert "...>" not in term.display
    term.send("\r").wait(lambda t: t.prompt_line() == "")
    term.send("repeat 2 <<<\r").wait(lambda t: "...>" in t.display)  # a block's next line has one


def test_edit_and_f2_open_the_editor_and_bring_the_text_back(tmp_path):
    editor = tmp_path / "ed.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/KB/MB/; s/hi/ho/' \"$1\"\n")
    editor.chmod(0o755)
    term = Terminal(tmp_path, 24, 80, env={"EDITOR": str(editor), "VISUAL": str(editor)})
    term.run("echo 4KB")
    term.send("edit\r").wait(lambda t: t.prompt_line() == "echo 4MB")
    term.send("\r").wait(lambda t: t.lines[-2:-1] == ["4MB"] or "\n4MB\n" in t.text + "\n")
    term.send("echo hi" + F2).wait(lambda t: t.prompt_line() == "echo ho")
    term.send("\r").wait(lambda t: t.prompt_line() == "" and "\nho\n" in t.text)
    (tmp_path / "mine.cush").write_text("echo from KB file\n")
    term.send("edit mine.cush\r").wait(lambda t: t.prompt_line() == "run mine.cush")
    term.send("\r").wait(lambda t: "from MB file" in t.text and t.prompt_line() == "")
    assert term.close() == 0


def test_set_pager_off_writes_tall_output_as_it_is(tmp_path):
    import shutil

    if not shutil.which("less"):
        pytest.skip("no less here")
    term = Terminal(tmp_path, 24, 80)
    term.run("set pager off")
    term.run("help all")  # taller than the screen: no pager waits for q
    assert "(END)" not in term.display and "units" in term.text
    assert term.close() == 0


def test_charts_fit_and_text_wraps_between_words(term):
    """Item 6: a Gantt chart is never wrapped (drawn to fit), C and error lines break between words only."""
    term.run("alloc pinned 32MB; alloc device 32MB; stream create; memcpy p0 d0 async stream 1; "
             "launch increment d0; sync")
    term.run("timeline width 200")
    rows = [r for r in term.last_run()[1] if "|" in r]
    assert [r.split("|")[0].strip() for r in rows] == ["stream 0", "stream 1", "copy H2D", "compute"]
    assert all(r.endswith("|") and len(r) <= term.cols for r in rows)  # each row whole, on one line
    term.run("explain on")
    term.run("memcpy h2d p0 d0 async stream 1")
    words = " ".join(term.last_run()[1]).split()
    assert "cudaMemcpyHostToDevice," in words and "CHECK(cudaMemcpyAsync(b_d0," in words
    term.run("explain off")
    term.run("show nosuchbufferwithalongname count 5 dtype float32")
    shown = " ".join(line.strip() for line in term.last_run()[1])
    assert shown == "col 6: NO_SUCH_BUFFER: no buffer named 'nosuchbufferwithalongname' — hint: `ls` lists the buffers"


def test_the_smaller_defects_as_the_screen_shows_them(term):
    """Items 8 and 10, seen at the prompt: each answer is the one the issue asks for."""
    (term.tmp / "latin1.cush").write_bytes("echo café\n".encode("latin-1"))
    (term.tmp / "bom.cush").write_bytes("\ufeffecho bom read\n".encode("utf-8"))
    checks = [
        ("help memcpy memset", ["memcpy [h2d|d2h|d2d|h2h] SRC DST", "memset "]),
        ("alloc pinned 1MB as p0", ["p0: pinned 1 MiB"]),
        ("show p1", ["did you mean `p0`?"]),
        ("show P0", ["did you mean `p0`?"]),
        ("show p0 count 300", ["300 of 1048576 read"]),
        ("set pinlimit 1GB", ["pinlimit = 1 GiB"]),
        ("stream create; stream destroy 1", ["stream 1 destroyed"]),
        ("stream query 1", ["stream 1 was destroyed"]),
        ("free p0", ["freed p0"]),
        ("free p0", ["(p0 was freed)"]),
        ("timeline last 0", ["asks for no operations"]),
        ("run latin1.cush", ["BAD_ENCODING", "byte 0xe9 is not UTF-8"]),
        ("run bom.cush", ["bom read"]),
        ("save s.cush", ["commands to s.cush"]),
    ]
    for line, wanted in checks:
        term.run(line)
        shown = " ".join(row.strip() for row in term.last_run()[1])
        assert all(w in shown for w in wanted), (line, shown)


def test_a_bracketed_paste_with_a_bad_line_runs_the_others_and_bangs_in_it_expand(term):
    term.run("echo first")
    term.send(paste("units 8KB\n!! 16KB\nalocc 1MB\nunits 1KB")).wait(lambda t: "units 1KB" in t.display)
    term.send("\r").wait(lambda t: "1KB = 1,024 bytes" in t.text and t.prompt_line() == "")
    text = term.text
    assert "8KB = 8,192 bytes" in text and "UNKNOWN_COMMAND" in text and "alocc" in text
    assert "\nunits 8KB 16KB\n" in text + "\n"  # `!!` on the paste's second line: the line before it ran
    term.send("ls\r").wait(lambda t: "no buffers" in t.text)  # nothing was left typed into a refused line


def test_the_progress_line_shows_in_a_colour_terminal(tmp_path):
    term = Terminal(tmp_path, 24, 80, env={"NO_COLOR": None})
    term.run("bench memcpy h2d pinned sizes 64MB,128MB,256MB,512MB reps 2", timeout=120)
    assert "bench memcpy [" in term.raw and "4/4" in term.raw
    assert term.close() == 0


def test_a_chinese_lesson_fits_the_terminal_and_keeps_each_command_on_one_line(term):
    """Issue 37 item 6: wrapped by display columns (a Chinese character takes two), no line starts with `，`, and a
    command a student is told to type is never split across two lines."""
    from wcwidth import wcswidth

    start = len(term.raw)
    for line in ("lesson streams lang zh", "lesson hint", "lesson hint", "lesson answer"):
        term.run(line)
    rows = [r for r in term.lines if any(ord(c) > 0x2E80 for c in r)]
    assert len(rows) > 6 and any("流与异步拷贝" in r for r in rows)
    assert not [r for r in rows if r.strip()[0] in "，。、；：！？）"]
    assert all(r.count("`") % 2 == 0 for r in rows), rows
    written = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]", "", term.raw[start:])
    assert all(wcswidth(x) <= term.cols for x in re.split(r"\r?\n|\r", written)
               if any(ord(c) > 0x2E80 for c in x))  # the terminal never had to wrap a line itself


def test_the_f1_screen_wraps_between_words_under_its_column(term):
    term.send(F1).wait(lambda t: "paste" in t.text and "transcript" in t.text and t.prompt_line() == "")
    rows = term.lines[term.lines.index("keys at the prompt:"):]
    assert not any(r.startswith(("s", "!`", "of a")) for r in rows[1:12])  # continued rows start under the column
    assert "complete: commands, buffers, flags, sizes of parts, files" in " ".join(r.strip() for r in rows)


def test_the_banner_and_help_name_the_first_things_to_do_and_help_fits_one_screen(term):
    """Issue 37 item 8: a newcomer is pointed at a lesson, a demo, their own kernel and the tour; `help` alone
    fits 80×24 without a pager (`help all` has the rest); the banner names the device once."""
    banner = term.text.split("cush>")[0]
    assert all(w in " ".join(banner.split()) for w in ("`lesson list`", "`demo streams`", "`kernel load K.cu`",
                                                         "examples/tour.cush", "`help`"))
    assert banner.count("H100 80GB HBM3") == 1
    term.run("help")
    shown = term.display
    assert "cush> help" in shown and "first things to do:" in shown and "(or `COMMAND ?`)" in shown
    assert "(END)" not in shown and ":" != term.cursor_row()[:1]  # no pager waited
    assert len(term.last_run()[1]) <= 20
    term.run("set pager off")
    term.run("help all")
    listed = " ".join(term.last_run()[1])
    assert "memcpy2d" in listed and "unregister" in listed and "first things" not in listed


def test_the_error_under_the_prompt_keeps_its_did_you_mean_at_80_columns(term):
    term.send("alloc pinnd 1MB\r").wait(lambda t: "USAGE" in t.display)
    row = next(r for r in term.display.splitlines() if r.startswith("USAGE"))
    assert row.endswith("— did you mean `pinned`?") and len(row) <= term.cols
    assert term.prompt_line() == "alloc pinnd 1MB"  # kept to mend


def test_a_bracketed_paste_of_whole_lines_runs_at_once_and_its_errors_name_the_line(term):
    """Issue 37: the guide says each pasted line runs as typed; a paste waited for Enter, and its error said only
    `col 7`. A last line without its newline waits at the prompt, to finish."""
    term.send(paste("units 8KB\nshow nosuch\nunits 2KB\nunits 1K")).wait(
        lambda t: "2KB = 2,048 bytes" in t.text and t.prompt_line() == "units 1K")
    text = term.text
    assert "8KB = 8,192 bytes" in text and "paste:2:6: NO_SUCH_BUFFER" in " ".join(text.split())
    term.send("B\r").wait(lambda t: "1KB = 1,024 bytes" in t.text and t.prompt_line() == "")


@pytest.mark.parametrize("size", SIZES)
def test_a_command_line_run_in_a_terminal_wraps_between_words(size, tmp_path):
    """`cudashell -c …` whose output is a terminal wraps long lines between words, as the prompt does (the
    terminal would otherwise cut them mid-word); the banner too."""
    import os
    import sys

    pexpect, pyte = pytest.importorskip("pexpect"), pytest.importorskip("pyte")
    rows, cols = size
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_STATE_HOME=str(tmp_path / "state"), TERM="xterm",
               NO_COLOR="1")
    child = pexpect.spawn(sys.executable, ["-m", "cudashell", "--backend", "sim", "-c", "help fill"], env=env,
                          encoding="utf-8", timeout=60, dimensions=(rows, cols), cwd=str(tmp_path))
    screen = pyte.HistoryScreen(cols, 400, history=400)
    stream = pyte.Stream(screen)
    stream.feed(child.read())
    child.close()
    assert child.exitstatus == 0
    shown = [row.rstrip() for row in screen.display if row.strip()]
    said = " ".join(line.strip() for line in shown)
    assert "little-endian bytes an integer dtype takes in order" in said  # every word whole, in order
    assert all(len(row) < cols for row in shown)  # none ran into the margin: broken between words
    assert any(row.startswith("      ") for row in shown)  # a continued line, indented under its first

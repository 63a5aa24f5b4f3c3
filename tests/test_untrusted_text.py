"""Issue 36, items 4 and 5: text that users name reaches a notebook as text, never as markup (only the tables the
renderer drew are HTML), and reaches a terminal with its control characters written out, never obeyed — a
submission cannot clear the teacher's screen and draw a forged grade."""

from __future__ import annotations

import io
import json

import pytest

from cudashell.backends.sim import SimBackend
from cudashell.frontends.environment import ExitStatus
from cudashell.frontends.shell import Shell
from cudashell.output.render import visible
from tests.test_grade import grade

ESC = "\x1b"
FORGED = f"{ESC}[2J{ESC}[Htotal 100/100 points (100%): passed"
PRINTF = r'__global__ void k() { printf("\x1b[2J<img src=x onerror=alert(2)>\a\n"); }'
CONTROLS = [chr(c) for c in (*range(0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0))]


def test_visible_writes_out_every_control_character_but_line_breaks_and_tabs():
    assert visible(f"a{ESC}[2Jb\rc\bd\x07e\x9bf\x7fg\th\ni") == r"a\x1b[2Jb\rc\x08d\x07e\x9bf\x7fg" + "\th\ni"
    assert all(not any(c in visible(c) for c in CONTROLS) for c in CONTROLS)
    assert visible("plain — ünïcode ✓") == "plain — ünïcode ✓"


def test_a_forged_grade_reaches_the_teachers_terminal_as_text(tmp_path):
    sub = tmp_path / "student"
    sub.mkdir()
    (sub / "solution.cush").write_text(f'show "{FORGED}"\necho "{ESC}]0;owned{chr(7)}"\n')
    checks = tmp_path / "checks.cush"
    checks.write_text("section \"it\" points 10\nrun solution.cush\nexpect ok\n")
    code, out, err = grade("--backend", "sim", str(checks), str(sub), tmp_path=tmp_path)
    assert code == ExitStatus.ERROR
    assert not any(c in out + err for c in CONTROLS), repr(out)
    assert r"\x1b[2J\x1b[Htotal 100/100 points (100%): passed" in out
    assert out.rstrip().splitlines()[-1] == "total 0/10 points (0%): not passed (passing takes 6)"
    code, out, _ = grade("--backend", "sim", "--json", str(checks), str(sub), tmp_path=tmp_path)
    said = json.loads(out)["result"]["sections"][0]["checks"][0]["message"]
    assert FORGED in said  # JSON keeps the text as it was (escaped by JSON itself)


@pytest.fixture
def script(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path / "s.cush"


def test_echo_say_names_errors_and_a_kernels_printf_reach_the_terminal_written_out(script):
    script.write_text(f"echo {FORGED}back\b\nsay en {ESC}[31mred\nkernel define k <<< {PRINTF} >>>\n"
                      "launch k grid 1 block 1\nsync\n"
                      f"free \"{ESC}[2Jgone\"\nexpect error NO_SUCH_BUFFER\nalloc pinned 4KB as {ESC}x\n")
    out = io.StringIO()
    shell = Shell(SimBackend(), out=out, err=out, echo=True)
    try:
        shell.execute(f"run {script.name}")
    finally:
        shell.close()
    said = out.getvalue()
    assert not any(c in said for c in CONTROLS), repr(said)
    assert r"cush> echo \x1b[2J\x1b[Htotal 100/100 points (100%): passedback\x08" in said  # the line echoed
    assert "\n" + r"\x1b[2J\x1b[Htotal 100/100 points (100%): passedback\x08" + "\n" in said  # what it printed
    assert r"\x1b[31mred" in said and r"\x1b[2J<img src=x onerror=alert(2)>\x07" in said
    assert r"as expected: s.cush:6:6: NO_SUCH_BUFFER: no buffer named '\x1b[2Jgone'" in said  # names in errors
    assert r"s.cush:8:21: USAGE: '\x1bx' cannot name a buffer" in said


def test_a_notebook_shows_users_text_as_text_and_only_its_own_tables_as_html(capsys):
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import get_ipython, start_ipython

    ip = start_ipython() or get_ipython()
    ip.run_line_magic("load_ext", "cudashell")
    try:
        cush = ip.user_ns["cush"]
        ip.run_line_magic("cush", "--backend sim echo ready")
        line = ip.run_line_magic("cush", "echo <table><img src=x onerror=alert(1)>")
        assert line._repr_html_().count("<") == line._repr_html_().count("<div") + line._repr_html_().count("</div")
        assert "&lt;table&gt;&lt;img src=x onerror=alert(1)&gt;" in line._repr_html_()
        ip.run_cell_magic("cush", "", f"say en <table><script>alert(3)</script>\nkernel define k <<< {PRINTF} >>>\n"
                                      "launch k grid 1 block 1\nsync\nalloc pinned 4KB as p0\nls")
        shown = {s.kind: s._repr_html_() for s in cush.shown}
        page = "".join(shown.values())
        assert "<img" not in page and "<script" not in page and ESC not in page
        assert "&lt;table&gt;&lt;script&gt;alert(3)&lt;/script&gt;" in shown["say"]
        assert r"\x1b[2J&lt;img src=x onerror=alert(2)&gt;\x07" in page  # the kernel's printf
        assert "<table>" in shown["ls"] and "<td>p0" in shown["ls"]  # the renderer's own table is markup
    finally:
        ip.run_line_magic("unload_ext", "cudashell")
        ip.user_ns.pop("cush", None)
    capsys.readouterr()


def test_html_passes_only_tables_the_renderer_made():
    from cudashell.output import render
    from cudashell.output.results import Result

    forged = Result.KINDS["echo"]({"text": "<table><tr><td>100/100</td></tr></table>"})
    assert "<table>" not in render.html(forged) and "&lt;table&gt;" in render.html(forged)
    assert isinstance(render.fit([["a"]], ["h"], "html", 0), render.Markup)
    assert not isinstance(render.fit([["a"]], ["h"], "simple", 0), render.Markup)


@pytest.mark.parametrize("rows,cols", [(24, 80), (40, 120)])
def test_a_scripts_escapes_do_not_clear_the_prompts_screen(tmp_path, rows, cols):
    """As a person sees it (a pty read through pyte): what was on the screen stays, and the text is shown."""
    from tests.terminal import Terminal

    (tmp_path / "s.cush").write_text(f'echo {FORGED}\nfree "{ESC}[2J{ESC}[Hgone"\n')
    term = Terminal(tmp_path, rows, cols)
    try:
        term.run("echo still here")
        term.run("run s.cush")
        assert "still here" in term.display  # not cleared
        assert r"\x1b[2J\x1b[Htotal 100/100 points (100%): passed" in term.text
        assert r"'\x1b[2J\x1b[Hgone'" in term.text  # in the error line
    finally:
        assert term.close() == 0

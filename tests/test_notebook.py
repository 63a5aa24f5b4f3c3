"""cudashell in a notebook: the magics driven through IPython's own shell, and the teaching notebook executed top
to bottom by a real Jupyter kernel (nbclient + ipykernel) — every cell succeeds, with HTML and pictures."""

from __future__ import annotations

from pathlib import Path

import pytest

IPython = pytest.importorskip("IPython")
TOUR = Path(__file__).parent.parent / "examples" / "cudashell-tour.ipynb"


@pytest.fixture
def ip():
    from IPython.testing.globalipapp import get_ipython, start_ipython

    shell = start_ipython() or get_ipython()  # one InteractiveShell per process
    shell.run_line_magic("load_ext", "cudashell")
    yield shell
    shell.run_line_magic("unload_ext", "cudashell")
    shell.user_ns.pop("cush", None)


def test_a_line_returns_its_result_and_cells_share_one_session(ip, capsys):
    shown = ip.run_line_magic("cush", "--backend sim alloc pinned 1MB as p0")
    assert shown.kind == "alloc" and shown["buffer"]["name"] == "p0" and shown["timing"] == "modeled"
    ip.run_cell_magic("cush", "", "alloc device 1MB as d0\nfill p0 iota dtype float32\nmemcpy p0 d0\n"
                                  "memset p0 0\nmemcpy d0 p0\nsync")
    values = ip.user_ns["cush"].session.array("p0", "float32")
    assert values.dtype.name == "float32" and values[:4].tolist() == [0.0, 1.0, 2.0, 3.0]  # back from d0
    assert ip.run_line_magic("cush", "show p0 count 3").data["values"] == [0.0, 1.0, 2.0]
    html = shown._repr_html_()
    assert "modeled</span>" in html and "0x" in html
    assert "<table>" in ip.run_line_magic("cush", "ls")._repr_html_()


def test_a_cell_is_checked_whole_and_an_error_is_one_line_with_the_cells_line(ip, capsys):
    ip.run_line_magic("cush", "--backend sim alloc pinned 1MB as p0")
    capsys.readouterr()
    ip.run_cell_magic("cush", "", "fill p0 7\nmemcpy p0 nosuch\nfill p0 9 dtype float33")
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["cell:3:17: USAGE: unknown dtype 'float33' — hint: dtypes: uint8, int8, uint16, int16, uint32, "
                   "int32, uint64, int64, float16, float32, float64", "cell: USAGE: 1 syntax error; nothing was run"]
    assert ip.user_ns["cush"].session.array("p0")[0] == 0  # nothing ran: not even line 1
    ip.run_cell_magic("cush", "", "fill p0 7\nmemcpy p0 nosuch")
    assert capsys.readouterr().err.strip() == "cell:2:11: NO_SUCH_BUFFER: no buffer named 'nosuch' — hint: " \
                                              "`ls` lists the buffers"
    assert ip.user_ns["cush"].session.array("p0")[0] == 7


def test_the_teaching_notebook_runs_top_to_bottom_in_a_real_kernel(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(TOUR, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error" or o.get("name") == "stderr"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    pictures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(html) > 20 and len(pictures) >= 4  # bench memcpy, zero-copy, timeline, profile
    labels = {label for h in html for label in ("measured", "modeled") if f"{label}</span>" in h}
    assert len(labels) == 1  # one backend for the whole notebook, and every timed result says which
    assert any("<table>" in h for h in html)
    nbformat.write(nb, tmp_path / "executed.ipynb")


def test_a_switch_that_fails_keeps_the_session_and_quit_ends_it_saying_so(ip, capsys):
    ip.run_line_magic("cush", "--backend sim alloc pinned 1MB as p")
    ip.run_cell_magic("cush", "--sim-profile h100x", "ls")
    assert "h100x" in capsys.readouterr().err  # one error line naming the profile it cannot find
    assert [b["name"] for b in ip.run_line_magic("cush", "ls")["buffers"]] == ["p"]
    ip.run_cell_magic("cush", "", "quit")
    assert "the next %cush starts a fresh one" in capsys.readouterr().out
    assert ip.run_line_magic("cush", "--backend sim ls")["buffers"] == []
    assert ip.run_line_magic("cush", '--debug "x') is None
    assert "USAGE: the options cannot be read" in capsys.readouterr().err


def test_a_cell_takes_a_block_over_several_lines(ip, capsys):
    """Issue 25, 5: `<<< … >>>` over several lines in a cell, as in a script and at the prompt."""
    ip.run_line_magic("cush", "--backend sim alloc pinned 4KB as p0")
    ip.run_line_magic("cush", "alloc device 4KB as d0")
    capsys.readouterr()
    ip.run_cell_magic("cush", "", "repeat 3 <<< memcpy p0 d0\n  memcpy d0 p0 >>>\nrepeat 2 <<<\n  fill p0 5\n>>>")
    captured = capsys.readouterr()
    assert captured.err == "" and "repeated 3×" in captured.out and "repeated 2×" in captured.out
    assert ip.user_ns["cush"].session.array("p0")[0] == 5
    assert "memcpy" not in captured.out and "← 5" not in captured.out  # the rounds' own results are held back


def test_without_matplotlib_a_pictures_absence_is_said_once_and_the_table_stays(ip, capsys, monkeypatch):
    """A result with a picture (a bench) in a notebook without matplotlib: the table, and one line naming what
    draws the picture — not a silent gap."""
    import sys

    ip.run_line_magic("cush", "--backend sim ls")
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    for _ in range(2):
        ip.run_cell_magic("cush", "", "bench memcpy sizes 4KB,64KB reps 2")
    out = capsys.readouterr().out
    assert out.count("left out: matplotlib draws it") == 1 and "pip install matplotlib" in out

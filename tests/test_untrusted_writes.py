"""Issue 36, item 3: a script, a notebook cell and a lesson's answers are teaching material people download. What
they write lies inside the folder they run from — never outside it (`..`, an absolute path, `~`, a symbolic link),
never a hidden file, never cudashell's own config or state — so that `output ~/.config/cudashell/config` and two
`echo` lines cannot choose the program the next pager runs. The prompt keeps its freedom."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from cudashell.backends.sim import SimBackend
from cudashell.frontends import cli
from cudashell.frontends.environment import Environment, ExitStatus
from cudashell.frontends.shell import Shell
from tests.conftest import Cush

CONFIG = "[shell]\ntime = off\n"
ATTACK = 'output {target}\necho [shell]\necho pager = sh -c "touch PWNED; cat"\n'


@pytest.fixture
def home(tmp_path, monkeypatch):
    """HOME in a temporary folder, its cudashell config written; the downloads folder beside it is the cwd."""
    home = tmp_path / "home"
    config = home / ".config" / "cudashell" / "config"
    config.parent.mkdir(parents=True)
    config.write_text(CONFIG)
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    monkeypatch.chdir(downloads)
    return home


def run_cli(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["--backend", "sim", "--quiet", *argv],
                    Environment(stdin=io.StringIO(stdin), stdout=out, stderr=err, stdin_isatty=False))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("target", ["~/.config/cudashell/config", "{home}/.config/cudashell/config",
                                    "../home/.config/cudashell/config"])
def test_the_issues_script_cannot_rewrite_the_config(home, target):
    config = home / ".config" / "cudashell" / "config"
    script = Path("evil.cush")
    script.write_text(ATTACK.format(target=target.format(home=home)))
    code, _, err = run_cli(str(script))
    assert code == ExitStatus.ERROR
    assert err.startswith("evil.cush:1:8: OUTSIDE_FOLDER: ") and len(err.splitlines()) == 1, err
    assert "hint: " in err
    assert config.read_text() == CONFIG and not Path("PWNED").exists()


def test_the_issues_script_read_from_stdin_is_confined_too(home):
    code, _, err = run_cli(stdin=ATTACK.format(target=home / ".config" / "cudashell" / "config"))
    assert code == ExitStatus.ERROR and "<stdin>:1:8: OUTSIDE_FOLDER" in err
    assert (home / ".config" / "cudashell" / "config").read_text() == CONFIG


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A script's folder with a link in it to a folder outside, and that outside folder."""
    monkeypatch.chdir(tmp_path)
    inside, outside = tmp_path / "course", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (inside / "escape").symlink_to(outside)
    (inside / "results").mkdir()
    return inside, outside


ESCAPES = {  # each command, with what the error says
    "output ../x.txt": "climbs out|is outside",
    "output {outside}/x.txt": "is outside",
    "output escape/x.txt": "is outside",  # a link inside that leads out
    "output .hidden": "hidden file",
    "output results/.x": "hidden file",
    "save ../s.cush": "is outside",
    "save results/../x.cush": "climbs out with '..'",
    "export c .bashrc": "hidden file",
    "trace export escape/t.json": "is outside",
    "calibrate out {outside}/p.json": "is outside",
    "bench latency rounds 2 --csv ../b.csv": "is outside",
}


@pytest.mark.parametrize("line", list(ESCAPES))
def test_a_script_writes_only_below_its_folder(folders, line):
    inside, outside = folders
    (inside / "s.cush").write_text(line.format(outside=outside) + "\n")
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    try:
        assert shell.execute(f"run {inside / 's.cush'}") is False
        first = shell.err.getvalue().splitlines()[0]
        assert first.startswith("course/s.cush:1:") and " OUTSIDE_FOLDER: " in first, first
        assert any(why in first for why in ESCAPES[line].split("|")), first
        assert sorted(p.name for p in outside.iterdir()) == []
        assert sorted(p.name for p in inside.iterdir()) == ["escape", "results", "s.cush"]
        assert sorted(p.name for p in (inside / "results").iterdir()) == []
    finally:
        shell.close()


def test_a_script_writes_below_its_folder_from_wherever_it_is_run(folders):
    """Relative paths start at the script's folder for a file it writes, as for every path it names."""
    inside, _ = folders
    (inside / "s.cush").write_text("alloc pinned 4KB\noutput results/log.txt\nls\noutput off\n"
                                   "save results/again.cush\nexport c made.cu\n")
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    try:
        assert shell.execute("run course/s.cush"), shell.err.getvalue()
    finally:
        shell.close()
    assert "pinned" in (inside / "results" / "log.txt").read_text()
    assert (inside / "results" / "again.cush").read_text().startswith("# saved by cudashell")
    assert (inside / "made.cu").exists() and not Path("made.cu").exists()


def test_cudashells_own_folders_are_never_written_even_inside_the_scripts(folders, monkeypatch):
    inside, _ = folders
    monkeypatch.setenv("XDG_CONFIG_HOME", str(inside / "conf"))
    (inside / "conf" / "cudashell").mkdir(parents=True)
    (inside / "s.cush").write_text("output conf/cudashell/config\necho [shell]\n")
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    try:
        assert shell.execute("run course/s.cush") is False
        assert "OUTSIDE_FOLDER: conf/cudashell/config is inside cudashell's own folder" in shell.err.getvalue()
    finally:
        shell.close()
    assert not (inside / "conf" / "cudashell" / "config").exists()


def test_the_prompt_keeps_its_freedom(folders):
    inside, outside = folders
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO(), workdir=inside)
    try:
        assert shell.execute(f"output {outside}/x.txt; echo typed; output off"), shell.err.getvalue()
        assert shell.execute(f"save {inside}/.hidden.cush"), shell.err.getvalue()
    finally:
        shell.close()
    assert (outside / "x.txt").read_text().strip() == "typed" and (inside / ".hidden.cush").exists()


LESSON = '''title.en = "Sneaky"
minutes = 1

[[step]]
goal.en = "Allocate pinned memory."
check.buffer = {{ kind = "pinned" }}
hints.en = ["alloc pinned"]
answer = ["output {target}", "echo gotcha", "alloc pinned 4KB"]
'''


def test_a_lessons_answers_write_only_inside_the_folder_they_run_from(folders):
    inside, outside = folders
    (inside / "sneaky.toml").write_text(LESSON.format(target=outside / "x.txt"))
    sim = Cush(SimBackend(), workdir=inside)
    try:
        sim.ok("lesson sneaky.toml")
        objs = sim.run("lesson skip")
        errors = [o for o in objs if o.get("error")]
        assert errors and errors[0]["error"]["code"] == "OUTSIDE_FOLDER", objs
        sim.ok(f"output {outside}/typed.txt")  # the student's own command: the prompt's freedom
    finally:
        sim.shell.close()
    assert not (outside / "x.txt").exists()


def test_a_lessons_answers_replayed_on_resume_write_only_inside_the_folder_too(folders, tmp_path):
    inside, outside = folders
    second = '\n[[step]]\ngoal.en = "Allocate device memory."\ncheck.buffer = { kind = "device" }\n' \
             'hints.en = ["alloc device"]\nanswer = ["alloc device 4KB"]\n'
    (inside / "sneaky.toml").write_text(LESSON.format(target=outside / "x.txt") + second)
    state = tmp_path / "state"
    first = Cush(SimBackend(), workdir=inside, state_dir=state)
    try:
        first.ok("lesson sneaky.toml")
        first.run("alloc pinned 4KB")  # step 1 passed by the student's own command: progress is kept
    finally:
        first.shell.close()
    again = Cush(SimBackend(), workdir=inside, state_dir=state)
    try:
        objs = again.run("lesson sneaky.toml")  # resumes at step 2: step 1's answers run again
        codes = [o["error"]["code"] for o in objs if o.get("error")]
        assert codes and codes[0] == "OUTSIDE_FOLDER", objs
    finally:
        again.shell.close()
    assert not (outside / "x.txt").exists()


def test_a_notebook_cell_writes_only_inside_the_notebooks_folder(folders, capsys):
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import get_ipython, start_ipython

    inside, outside = folders
    os.chdir(inside)
    ip = start_ipython() or get_ipython()
    ip.run_line_magic("load_ext", "cudashell")
    try:
        ip.run_line_magic("cush", "--backend sim echo ready")
        ip.run_cell_magic("cush", "", f"output {outside}/x.txt\necho gotcha")
        assert "cell:1:8: OUTSIDE_FOLDER" in capsys.readouterr().err
        ip.run_line_magic("cush", "output ../x.txt")
        assert "OUTSIDE_FOLDER" in capsys.readouterr().err
        ip.run_cell_magic("cush", "", "output results/log.txt\necho fine\noutput off")
    finally:
        ip.run_line_magic("unload_ext", "cudashell")
        ip.user_ns.pop("cush", None)
    assert list(outside.iterdir()) == [] and (inside / "results" / "log.txt").read_text().strip() == "fine"

"""The config file ($XDG_CONFIG_HOME/cudashell/config): every line that cannot be used is named as file:line:col with
what is wrong and what it must be, and the shell starts anyway, with the default for that key (issue 25). Lines are
numbered as configparser counts them, and reading the file imports no renderer."""

from __future__ import annotations

import io
import os

import pytest

from cudashell.frontends import cli, config
from cudashell.frontends.config import DEFAULTS, KEYS
from cudashell.frontends.environment import Environment, ExitStatus
from cudashell.model.settings import SETTINGS, THEMES


def load(tmp_path, text: str) -> tuple[dict, list[str]]:
    (tmp_path / "config").write_text(text)
    warnings: list[str] = []
    env = Environment(stdin=None, stdout=io.StringIO(), stderr=io.StringIO(), config_dir=tmp_path,
                      state_dir=tmp_path)
    return config.load(warn=warnings.append, env=env), warnings


@pytest.mark.parametrize("line, col, said", [
    ("history_size = lots", 16, "history_size = lots: it must be a whole number ≥ 0; using the default, 10000"),
    ("history_size = -5", 16, "history_size = -5: it must be a whole number ≥ 0; using the default, 10000"),
    ("color = purple", 9, "color = purple: it must be auto, always or never; using the default, auto"),
    ("editing_mode = vim", 16, "editing_mode = vim: it must be emacs or vi; using the default, emacs"),
    ("backend = gpu", 11, "backend = gpu: it must be auto, cuda or sim; using the default, auto"),
    ("theme = dark", 9, "theme = dark: it must be default or mono; using the default, default"),
    ("explain = yes", 11, "explain = yes: it must be on or off; using the default, off"),
    ("time = 1", 8, "time = 1: it must be on or off; using the default, off"),
    ("tablefmt = fancy", 12, "tablefmt = fancy: it must be a tabulate format: simple, plain, github, grid, psql, …"),
])
def test_a_bad_value_is_named_at_its_column_and_its_key_keeps_the_default(tmp_path, line, col, said):
    settings, warnings = load(tmp_path, f"[shell]\n{line}\n[pinning]\npinlimit = 1GB\n")
    assert len(warnings) == 1 and warnings[0].startswith(f"{tmp_path / 'config'}:2:{col}: BAD_CONFIG: {said}")
    assert settings == {**DEFAULTS, "pinlimit": "1GB"}  # the key keeps its default; the good line is used


PAGER_MUST = "it must be off or a pager on your PATH (a program that shows text, not a shell), such as less -SRXF; " \
             "long output is not paged"


@pytest.mark.parametrize("value", ["no-such-pager-here -R", "less 'open", 'sh -c "touch PWNED; cat"',
                                   "/bin/sh -c 'touch PWNED'", "env touch PWNED", "python3 -c 'open(\"PWNED\", \"w\")'",
                                   "bash"])
def test_a_pager_that_is_not_a_program_showing_text_is_named_once_and_nothing_is_paged(tmp_path, value, monkeypatch):
    """Issue 36: a pager is a program, run without a shell; one that would run its arguments as commands (a shell,
    env, an interpreter), like one that is not there, is named at load and paging falls back to none."""
    monkeypatch.chdir(tmp_path)
    settings, warnings = load(tmp_path, f"[shell]\npager = {value}\n")
    assert warnings == [f"{tmp_path / 'config'}:2:9: BAD_CONFIG: pager = {value}: {PAGER_MUST}"]
    assert settings["pager"] == "off"


def test_a_shell_named_as_the_pager_never_runs(tmp_path, monkeypatch):
    """Even handed to the pager itself (not through the config's check), `sh -c …` is no pager: nothing runs."""
    pytest.importorskip("prompt_toolkit")
    from cudashell.frontends.repl import page
    from cudashell.model.settings import pager_argv

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pager").symlink_to("/bin/sh")  # a link's target counts, not its name
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    out = io.StringIO()
    for value in ('sh -c "touch PWNED; cat"', 'pager -c "touch PWNED; cat"', "/bin/sh -c 'touch PWNED'"):
        page("line\n" * 50, pager_argv(value), out, rows=24, tty=True)
    assert not (tmp_path / "PWNED").exists() and out.getvalue() == "line\n" * 150  # written as it is


def with_less(tmp_path, monkeypatch, present: bool) -> None:
    """PATH with (or without) a `less`, whatever this machine has."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if present:
        (bin_dir / "less").write_text("#!/bin/sh\ncat\n")
        (bin_dir / "less").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))


def test_without_less_the_default_pager_falls_back_to_none_and_says_so_once(tmp_path, monkeypatch):
    pytest.importorskip("prompt_toolkit")
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from cudashell.backends.sim import SimBackend
    from cudashell.frontends.repl import repl
    from cudashell.frontends.shell import Shell

    with_less(tmp_path, monkeypatch, present=False)
    assert load(tmp_path, config.TEMPLATE) == (DEFAULTS, [])  # the template, pager commented out: no warning
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    with create_pipe_input() as inp:
        inp.send_text("help all\rhelp all\r\x04")
        repl(shell, "banner", {"color": "never"}, input=inp, output=DummyOutput(),
             env=Environment(stdin=None, stdout=io.StringIO(), stderr=io.StringIO(), config_dir=tmp_path))
    said = shell.err.getvalue().splitlines()
    assert said == [f"NOT_INSTALLED: the pager, less -SRXF, is not on your PATH: long output is not paged — hint: "
                    f"install it, or name another pager (or off) as `pager =` in {tmp_path / 'config'}"]
    assert "units" in shell.out.getvalue()  # help was written as it is


def test_a_bad_pinning_limit_is_named_too(tmp_path):
    settings, warnings = load(tmp_path, "[pinning]\npinlimit = lots\n")
    assert warnings == [f"{tmp_path / 'config'}:2:12: BAD_CONFIG: pinlimit = lots: it must be auto or a size such as "
                        "64GiB; using the default, auto"]
    assert settings["pinlimit"] == "auto"
    assert load(tmp_path, "[pinning]\npinlimit = 2GiB\n") == ({**DEFAULTS, "pinlimit": "2GiB"}, [])


def test_the_former_name_of_the_pinning_limit_is_still_read(tmp_path):
    """`limit` was the file's name for what `set` calls pinlimit; a file written before keeps working, and is
    warned about as any line is."""
    assert load(tmp_path, "[pinning]\nlimit = 2GiB\n") == ({**DEFAULTS, "pinlimit": "2GiB"}, [])
    settings, warnings = load(tmp_path, "[pinning]\nlimit = lots\n")
    assert warnings == [f"{tmp_path / 'config'}:2:9: BAD_CONFIG: limit = lots: it must be auto or a size such as "
                        "64GiB; using the default, auto"]
    settings, warnings = load(tmp_path, "[pinning]\nlimit = 1GB\npinlimit = 2GB\n")
    assert warnings == [f"{tmp_path / 'config'}:3:1: BAD_CONFIG: 'pinlimit' is given twice in [pinning] (first on "
                        "line 2); the last one is used"] and settings["pinlimit"] == "2GB"
    settings, warnings = load(tmp_path, "[shell]\nlimit = 1GB\n")
    assert warnings == [f"{tmp_path / 'config'}:2:1: BAD_CONFIG: 'limit' belongs in [pinning], not [shell]; ignored "
                        "— hint: move it under [pinning]"]


def test_every_key_has_its_accepted_values_checked():
    assert set(KEYS) == set(DEFAULTS)
    for name, key in KEYS.items():
        assert key.accepts and key.check(DEFAULTS[name]), name
        assert not key.check("no-such-value-at-all"), name


def test_one_table_gives_the_session_set_and_the_file_their_settings():
    """settings.SETTINGS is the only table: the session starts from its defaults, `set` takes what it marks, the
    config file reads the keys it names, and the front end applies the file's values through `set`."""
    from cudashell.model.session import Session

    assert Session().settings == {n: s.default for n, s in SETTINGS.items() if s.scope != "file"}
    for name, setting in SETTINGS.items():
        assert setting.scope in ("set", "shell", "file"), name
        if setting.scope == "set":
            assert setting.accepts and setting.check(str(setting.default)), name
        if setting.config:
            assert KEYS[setting.config[1]] is setting and DEFAULTS[setting.config[1]] == str(setting.default)
            assert f"# {setting.config[1]} = {setting.default}\n" in config.TEMPLATE, name  # the first run's file
    assert len(KEYS) == sum(1 for s in SETTINGS.values() if s.config)  # no two settings share a key


def test_the_themes_are_the_repls_styles():
    pytest.importorskip("prompt_toolkit")
    from cudashell.frontends.repl import STYLES

    assert set(STYLES) == set(THEMES)


def test_good_values_are_used_without_a_word(tmp_path):
    text = ("[shell]\nbackend = sim\ntablefmt = github\nhistory_size = 0\nexplain = on\ntime = on\ncolor = never\n"
            "theme = mono\nediting_mode = vi\npager = off\n[pinning]\npinlimit = 1GB\n")
    settings, warnings = load(tmp_path, text)
    assert warnings == []
    assert settings == {"backend": "sim", "tablefmt": "github", "history_size": "0", "explain": "on", "time": "on",
                        "color": "never", "theme": "mono", "editing_mode": "vi", "pager": "off", "pinlimit": "1GB"}


def test_the_written_template_is_clean(tmp_path, monkeypatch):
    with_less(tmp_path, monkeypatch, present=True)  # the template names less (commented out)
    settings, warnings = load(tmp_path, config.TEMPLATE)
    assert settings == DEFAULTS and warnings == []
    uncommented = "\n".join(line[2:] if line.startswith("# ") and " = " in line else line
                            for line in config.TEMPLATE.splitlines())
    assert load(tmp_path, uncommented) == (DEFAULTS, [])


def test_a_broken_section_header_is_named_and_the_lines_under_it_too(tmp_path):
    path = tmp_path / "config"
    settings, warnings = load(tmp_path, "[shell\nhistory_size = lots\n")
    assert warnings == [
        f"{path}:1:1: BAD_CONFIG: '[shell' is not a section header — hint: did you mean [shell]?",
        f"{path}:2:1: BAD_CONFIG: 'history_size' is outside any section; ignored — hint: put it under [shell]"]
    assert settings == DEFAULTS
    settings, warnings = load(tmp_path, "[shell]\ntime = on\n[pinning\npinlimit = 1GB\n")
    assert warnings == [
        f"{path}:3:1: BAD_CONFIG: '[pinning' is not a section header — hint: did you mean [pinning]?",
        f"{path}:4:1: BAD_CONFIG: 'pinlimit' belongs in [pinning], not [shell]; ignored — hint: move it under [pinning]"]
    assert settings == {**DEFAULTS, "time": "on"}  # the good lines are still used


def test_a_line_that_is_no_setting_is_named(tmp_path):
    settings, warnings = load(tmp_path, "[shell]\ntime on\ntime = on\n")
    assert warnings == [f"{tmp_path / 'config'}:2:1: BAD_CONFIG: 'time on' is not `key = value` — hint: a setting "
                        "is `key = value`; a comment starts with #"]
    assert settings["time"] == "on"


def test_unknown_keys_and_sections_are_named_with_what_was_meant(tmp_path):
    path = tmp_path / "config"
    text = "[shell]\nhistroy_size = 5\nfrobnicate = 1\n[shel]\nbackend = sim\n[pinning]\ntablefmt = github\n"
    settings, warnings = load(tmp_path, text)
    assert warnings == [
        f"{path}:2:1: BAD_CONFIG: unknown key 'histroy_size' in [shell]; ignored — hint: did you mean history_size?",
        f"{path}:3:1: BAD_CONFIG: unknown key 'frobnicate' in [shell]; ignored — hint: [shell] takes backend, "
        "tablefmt, history_size, time, explain, color, theme, editing_mode, pager",
        f"{path}:4:1: BAD_CONFIG: unknown section [shel]; its lines are ignored — hint: did you mean [shell]?",
        f"{path}:7:1: BAD_CONFIG: 'tablefmt' belongs in [shell], not [pinning]; ignored — hint: move it under "
        "[shell]"]
    assert settings == DEFAULTS


def test_a_key_given_twice_uses_the_last_and_says_so(tmp_path):
    settings, warnings = load(tmp_path, "[shell]\ntime = on\ntime = off\n")
    assert warnings == [f"{tmp_path / 'config'}:3:1: BAD_CONFIG: 'time' is given twice in [shell] (first on line "
                        "2); the last one is used"]
    assert settings["time"] == "off"


def test_a_comment_after_a_value_is_pointed_out(tmp_path):
    settings, warnings = load(tmp_path, "[shell]\nbackend = sim  # the simulator\n")
    assert warnings == [f"{tmp_path / 'config'}:2:11: BAD_CONFIG: backend = sim  # the simulator: it must be auto, "
                        "cuda or sim; using the default, auto — hint: a comment goes on a line of its own"]
    assert settings["backend"] == "auto"


def test_the_shell_starts_whatever_the_file_says(tmp_path):
    """The testers' lines: a broken header, history_size = lots, color = purple, editing_mode = vim, backend = gpu
    (fatal before, without the file's name): each named, and the shell runs."""
    (tmp_path / "cfg").mkdir()
    path = tmp_path / "cfg" / "config"
    path.write_text("[shell]\nhistory_size = lots\ncolor = purple\nediting_mode = vim\nbackend = gpu\n[pinnin\n")
    env = Environment(stdin=None, stdout=io.StringIO(), stderr=io.StringIO(), config_dir=tmp_path / "cfg",
                      state_dir=tmp_path / "state")
    assert cli.main(["--quiet", "-c", "echo hi"], env) is ExitStatus.SUCCESS
    assert env.stdout.getvalue() == "hi\n"
    err = env.stderr.getvalue().splitlines()
    assert [line.split(": BAD_CONFIG: ")[0] for line in err] == [f"{path}:{n}" for n in
                                                                 ("2:16", "3:9", "4:16", "5:11", "6:1")]


def test_bytes_that_are_not_utf8_are_named_and_the_rest_is_read(tmp_path):
    (tmp_path / "config").write_bytes(b"\xef\xbb\xbf[shell]\n# caf\xe9\ntime = on\n")  # a BOM, a Latin-1 comment
    warnings: list[str] = []
    env = Environment(stdin=None, stdout=io.StringIO(), stderr=io.StringIO(), config_dir=tmp_path,
                      state_dir=tmp_path)
    settings = config.load(warn=warnings.append, env=env)
    assert warnings == [f"{tmp_path / 'config'}:2:6: BAD_CONFIG: byte 0xe9 is not UTF-8 text; read as \ufffd — hint: "
                        "save the file as UTF-8"]
    assert settings == {**DEFAULTS, "time": "on"}


def test_the_entry_point_reads_the_backend_alone_before_the_heavier_imports(tmp_path):
    """It runs before the GPU worker is started: checking tablefmt would import tabulate (60 ms) there."""
    import subprocess
    import sys

    (tmp_path / "config").write_text("[shell]\nbackend = sim\ntablefmt = github\n")
    code = ("import sys; from cudashell.frontends import entry; from cudashell.frontends.environment import Environment; "
            f"print(entry._wanted([], Environment(config_dir={str(tmp_path)!r})), 'tabulate' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False", "False"], r.stderr


# ------------------------------------------------------------------ lines as configparser counts them
def test_a_form_feed_in_the_config_file_does_not_shift_later_lines(tmp_path):
    raw = b"[shell]\n# page two\x0c\ncolor = purple\n# caf\xe9\n"
    settings, problems = config.read(raw)
    assert [(n, e.message[:14]) for n, e in problems] == [(3, "color = purple"), (4, "byte 0xe9 is n")]
    assert settings["color"] == "auto"


def test_importing_config_does_not_import_render():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", "import sys, cudashell.frontends.config; print('cudashell.output.render' in sys.modules)"],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False"], r.stderr

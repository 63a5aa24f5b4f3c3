"""The CLI run in-process on an injected Environment (StringIO streams, a config dir of the test's own): its
output and its ExitStatus, with no subprocess and no patching of `sys`."""

from __future__ import annotations

import ast
import io
import signal
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from cudashell.frontends import cli, entry
from cudashell.frontends.environment import Environment, ExitStatus, LiveStream

PACKAGE = Path(__file__).resolve().parent.parent / "cudashell"


@pytest.fixture
def make_env(tmp_path):
    """An Environment of StringIO streams whose config and state dirs are the test's (never the user's)."""

    def make(stdin: str | None = "", **kwargs) -> Environment:
        kwargs.setdefault("config_dir", tmp_path / "config")
        kwargs.setdefault("state_dir", tmp_path / "state")
        return Environment(stdin=None if stdin is None else io.StringIO(stdin), stdout=io.StringIO(),
                           stderr=io.StringIO(), **kwargs)

    return make


def run(env: Environment, *args: str) -> ExitStatus:
    status = cli.main(["--backend", "sim", *args], env)
    assert isinstance(status, ExitStatus)
    assert "Traceback" not in env.stdout.getvalue() + env.stderr.getvalue()
    return status


def test_exit_status_values_are_fixed():
    assert [int(s) for s in ExitStatus] == [0, 1, 2, 130, 141]
    assert ExitStatus.INTERRUPTED == 128 + signal.SIGINT and ExitStatus.BROKEN_PIPE == 128 + signal.SIGPIPE


def test_c_ls_succeeds_with_its_output_on_stdout_and_the_banner_on_stderr(make_env):
    env = make_env()
    assert run(env, "-c", "ls") is ExitStatus.SUCCESS
    assert env.stdout.getvalue() == "no buffers\n"
    assert env.stderr.getvalue().startswith("cudashell ") and "sim (asked for)" in env.stderr.getvalue()


def test_a_failing_command_is_one_line_on_stderr_and_exit_1(make_env):
    env = make_env()
    assert run(env, "--quiet", "-c", "alloc pinned 1MB; free nosuch; ls") is ExitStatus.ERROR
    assert env.stderr.getvalue() == "-c:1:24: NO_SUCH_BUFFER: no buffer named 'nosuch' — hint: `ls` lists the " \
                                    "buffers\n"
    assert "p0: pinned 1 MiB" in env.stdout.getvalue() and "no buffers" not in env.stdout.getvalue()  # stopped


@pytest.mark.parametrize("how", ["-c", "stdin"])
def test_commands_are_checked_whole_before_any_runs(make_env, how):
    """As a script file is: a command that cannot parse anywhere means nothing runs (not the alloc before it)."""
    line = "alloc pinned 1MB; alocc x; ls"
    env = make_env(line + "\n" if how == "stdin" else "")
    assert run(env, "--quiet", *(["-c", line] if how == "-c" else [])) is ExitStatus.ERROR
    name = "-c" if how == "-c" else "<stdin>"
    assert env.stdout.getvalue() == ""
    assert env.stderr.getvalue() == f"{name}:1:19: UNKNOWN_COMMAND: unknown command 'alocc' — hint: did you mean " \
                                    f"`alloc`?\n{name}: UNKNOWN_COMMAND: 1 syntax error; nothing was run\n"


def test_keep_going_runs_on_and_still_fails_at_the_end(make_env):
    env = make_env()
    assert run(env, "--quiet", "--keep-going", "-c", "free x; alloc device 4KB; ls") is ExitStatus.ERROR
    assert "NO_SUCH_BUFFER" in env.stderr.getvalue() and "d0" in env.stdout.getvalue()


@pytest.mark.parametrize("args, said", [
    (["--bogus"], "cudashell: error: unrecognized arguments: --bogus"),
    (["--backend", "gpu"], "argument --backend: invalid choice: 'gpu'"),
    (["-c"], "argument -c: expected one argument"),
])
def test_a_usage_error_is_said_on_stderr_and_exits_2(make_env, args, said):
    env = make_env()
    assert cli.main(args, env) is ExitStatus.USAGE
    err = env.stderr.getvalue()
    assert err.startswith("usage: cudashell") and said in err and "Traceback" not in err
    assert env.stdout.getvalue() == ""


def test_help_and_version_go_to_stdout_and_succeed(make_env):
    env = make_env()
    assert cli.main(["--version"], env) is ExitStatus.SUCCESS
    assert env.stdout.getvalue().startswith("cudashell ") and env.stderr.getvalue() == ""
    env = make_env()
    assert cli.main(["--help"], env) is ExitStatus.SUCCESS
    assert "usage: cudashell" in env.stdout.getvalue() and "130 interrupted" in " ".join(env.stdout.getvalue().split())


def test_a_backend_that_cannot_start_is_a_startup_error(make_env):
    env = make_env()
    assert run(env, "--sim-profile", "no-such-profile", "-c", "ls") is ExitStatus.USAGE
    assert env.stderr.getvalue().count("\n") == 1 and "no-such-profile" in env.stderr.getvalue()


def test_a_script_on_stdin(make_env):
    env = make_env("alloc device 4KB\n# a comment\nls\n")
    assert run(env, "--quiet") is ExitStatus.SUCCESS
    assert "d0" in env.stdout.getvalue() and env.stderr.getvalue() == ""
    env = make_env("alloc device 4KB\nfree d9\nls\n")
    assert run(env, "--quiet") is ExitStatus.ERROR
    assert env.stderr.getvalue().startswith("<stdin>:2:") and "NO_SUCH_BUFFER" in env.stderr.getvalue()


def test_a_stdin_closed_at_start_is_an_empty_script(make_env):
    env = make_env(stdin=None)
    assert not env.stdin_isatty
    assert run(env, "--quiet") is ExitStatus.SUCCESS and env.stdout.getvalue() == ""


def test_an_unreadable_script_file_exits_2(make_env, tmp_path):
    env = make_env()
    assert run(env, "--quiet", str(tmp_path / "missing.cush")) is ExitStatus.USAGE
    assert "NO_SUCH_FILE" in env.stderr.getvalue()


def test_ctrl_c_exits_130(make_env, monkeypatch):
    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.Shell, "run_items", interrupted)
    env = make_env()
    assert run(env, "--quiet", "-c", "ls") is ExitStatus.INTERRUPTED
    assert env.stderr.getvalue() == "interrupted\n"


class _Gone(io.StringIO):
    """A stdout whose reader left (`cudashell ... | head`)."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_reader_that_left_exits_141_quietly(make_env):
    env = make_env()
    env.stdout = _Gone()
    assert cli.main(["--backend", "sim", "--quiet", "-c", "ls"], env) is ExitStatus.BROKEN_PIPE
    assert "output was lost" not in env.stderr.getvalue()


def test_a_stdout_closed_at_start_fails_saying_so(make_env):
    env = make_env()
    env.stdout = None
    assert cli.main(["--backend", "sim", "--quiet", "-c", "ls"], env) is ExitStatus.ERROR
    assert env.stderr.getvalue() == "cudashell: output was lost: stdout is closed\n"


def test_the_config_file_is_the_environments(make_env, tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config").write_text("[shell]\nbackend = sim\ntablefmt = nosuchstyle\ntime = on\n")
    env = make_env()
    assert cli.main(["--quiet", "-c", "alloc device 4KB"], env) is ExitStatus.SUCCESS  # backend sim, from there
    err = env.stderr.getvalue()
    assert f"{tmp_path / 'config' / 'config'}:3:12: BAD_CONFIG: tablefmt = nosuchstyle" in err
    (tmp_path / "config" / "config").write_bytes(b"[shell\n")
    env = make_env()
    assert cli.main(["--backend", "sim", "--quiet", "-c", "ls"], env) is ExitStatus.SUCCESS
    assert f"{tmp_path / 'config' / 'config'}:1:1: BAD_CONFIG:" in env.stderr.getvalue()


def test_the_entry_point_takes_the_environment_too(make_env, monkeypatch):
    monkeypatch.setenv("CUDASHELL_PRESTART", "off")
    env = make_env("ls\n")
    assert entry.main(["--backend", "sim", "--quiet"], env) is ExitStatus.SUCCESS
    assert env.stdout.getvalue() == "no buffers\n"


def test_the_environments_terminal(make_env, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    env = make_env()
    assert not env.stdout_isatty and tuple(env.terminal_size()) == (80, 24)  # a StringIO is no terminal
    assert tuple(make_env(terminal_size=(132, 50)).terminal_size()) == (132, 50)
    monkeypatch.setenv("COLUMNS", "100")
    assert env.terminal_size().columns == 100
    assert env.config_file.parent == env.config_dir and env.history_file.parent == env.state_dir


def test_the_repl_s_colour_and_toolbar_follow_the_environment(make_env, monkeypatch):
    from cudashell.backends.sim import SimBackend
    from cudashell.frontends.repl import toolbar, use_color
    from cudashell.frontends.shell import Shell

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color("auto", make_env(stdout_isatty=True)) and not use_color("auto", make_env())
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    try:
        narrow, wide = (toolbar(shell, env=make_env(terminal_size=(n, 24))) for n in (30, 200))
        assert narrow == toolbar(shell, 30) and wide == toolbar(shell, 200) and len(narrow) <= 30 < len(wide)
    finally:
        shell.close()


def test_the_docs_command_writes_to_the_environment(make_env):
    from cudashell import docs

    env = make_env()
    assert docs.main([], env) is ExitStatus.SUCCESS
    assert env.stdout.getvalue().startswith("# cudashell command reference")


def test_the_notebook_magic_writes_to_its_environment(make_env):
    pytest.importorskip("IPython")
    from cudashell.frontends.notebook import Cush

    env = make_env()
    options = Namespace(backend="sim", sim_profile="no-such-profile", keep_going=False, debug=False)
    assert Cush(env).run("ls", options, cell=False) is None
    assert "no-such-profile" in env.stderr.getvalue() and env.stderr.getvalue().count("\n") == 1
    assert isinstance(Cush().env.stdout, LiveStream)  # a notebook's: the kernel's stream of the moment


def test_a_live_stream_writes_where_sys_points_now(capsys):
    LiveStream("stdout").write("out\n")
    LiveStream("stderr").write("err\n")
    assert capsys.readouterr() == ("out\n", "err\n")


def test_only_the_environment_reads_the_standard_streams():
    """Everything else is handed them: `sys.stdin`, `sys.stdout`, `sys.stderr` appear in code (not comments or
    docstrings) only in cudashell/frontends/environment.py."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "frontends" / "environment.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("stdin", "stdout", "stderr") \
                    and isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []


def test_the_environment_and_entry_import_nothing_heavy():
    """Before the GPU worker starts, the entry loads only the standard library and the few modules of its own it
    needs (not the backend contract nor the profile, with what they import: 24 ms, on the worker's start path)."""
    code = ("import sys, cudashell.frontends.entry, cudashell.frontends.environment; "
            "print(sorted(m for m in ('numpy', 'tabulate', 'prompt_toolkit', 'IPython', "
            "'cudashell.backends.base', 'cudashell.backends.profile') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=PACKAGE.parent)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


def _json(env: Environment) -> list[dict]:
    """The --json lines, each checked against the published schema."""
    import json

    jsonschema = pytest.importorskip("jsonschema")
    from cudashell.output.results import json_schema

    objs = [json.loads(line) for line in env.stdout.getvalue().splitlines()]
    for obj in objs:
        jsonschema.validate(obj, json_schema())
    return objs


def test_a_scripts_syntax_errors_in_json_carry_the_commands_text(make_env, tmp_path):
    script = tmp_path / "typos.cush"
    script.write_text('alloc pinned 1MB\n\nalocc x; ls\necho "open\n')
    env = make_env()
    assert run(env, "--json", str(script)) is ExitStatus.ERROR
    objs = _json(env)
    assert [(o["cmd"], o["error"]["code"], o["error"]["line"], o["error"]["col"]) for o in objs] == [
        ("alocc x", "UNKNOWN_COMMAND", 3, 1), ('echo "open', "USAGE", 4, 6)]


def test_a_line_that_does_not_split_carries_its_text_when_it_runs(make_env):
    from cudashell.backends.sim import SimBackend
    from cudashell.frontends.shell import Shell

    env = make_env()
    shell = Shell(SimBackend(), out=env.stdout, err=env.stderr, json_mode=True)
    try:
        assert not shell.execute('echo "open')
    finally:
        shell.close()
    assert [o["cmd"] for o in _json(env)] == ['echo "open'] and shell.session.history[-1].text == 'echo "open'


@pytest.mark.parametrize("args, cmd, code", [
    (["nosuch.cush"], "nosuch.cush", "NO_SUCH_FILE"),
    (["--sim-profile", "no-such-profile", "-c", "ls"], "--sim-profile no-such-profile", "BAD_PROFILE"),
])
def test_a_startup_error_in_json_mode_is_one_json_error(make_env, args, cmd, code):
    env = make_env()
    assert run(env, "--json", *args) is ExitStatus.USAGE
    (obj,) = _json(env)
    assert (obj["cmd"], obj["ok"], obj["kind"], obj["error"]["code"], obj["result"]) == (cmd, False, None, code, None)
    assert env.stderr.getvalue() == ""


def test_a_usage_error_in_json_mode_is_one_json_error(make_env):
    env = make_env()
    assert cli.main(["--json", "--backend", "gpu", "-c", "ls"], env) is ExitStatus.USAGE
    (obj,) = _json(env)
    assert obj["cmd"] == "cudashell --json --backend gpu -c ls" and obj["error"]["code"] == "USAGE"
    assert "argument --backend: invalid choice: 'gpu'" in obj["error"]["message"] and env.stderr.getvalue() == ""


def test_a_configured_backend_that_cannot_start_names_its_line(make_env, tmp_path, monkeypatch):
    from cudashell.errors import ShellError

    def no_gpu(choice, profile=None):
        raise ShellError("NO_GPU", f"the {choice} backend cannot start: no GPU", "use --backend sim")

    monkeypatch.setattr(cli, "open_backend", no_gpu)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config").write_text("[shell]\n\nbackend = cuda\n")
    env = make_env()
    assert cli.main(["-c", "ls"], env) is ExitStatus.USAGE
    assert env.stderr.getvalue() == f"{tmp_path / 'config' / 'config'}:3:11: NO_GPU: the cuda backend cannot start: " \
                                    "no GPU — hint: use --backend sim\n"
    env = make_env()
    assert cli.main(["--json", "-c", "ls"], env) is ExitStatus.USAGE
    (obj,) = _json(env)
    assert obj["cmd"] == "backend = cuda" and (obj["error"]["file"], obj["error"]["line"], obj["error"]["col"]) == \
        (str(tmp_path / "config" / "config"), 3, 11)
    env = make_env()
    assert cli.main(["--json", "--backend", "cuda", "-c", "ls"], env) is ExitStatus.USAGE
    assert _json(env)[0]["cmd"] == "--backend cuda"

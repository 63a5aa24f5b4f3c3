"""The `cudashell` command: scripts, -c, stdin, or the interactive shell when stdin is a terminal.
Exit codes (`ExitStatus`): 0 ok, 1 a command failed unexpectedly, 2 the command line itself was wrong (or the
backend asked for cannot start, or a script cannot be read), 130 interrupted, 141 the reader of stdout left.
All input and output goes through an `Environment` (the process's, unless one is given)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .. import __version__
from ..backends.choice import open_backend
from ..backends.profile import BUILTIN
from ..errors import ShellError
from ..language import registry
from ..model.settings import SETTABLE
from ..output import render
from . import config
from .arguments import Parser, ParserExit, startup_error
from .config import DEFAULTS
from .environment import Environment, ExitStatus
from .frame import ShellOptions
from .shell import Shell


class _Version(argparse.Action):
    """--version on the environment's stdout (argparse's own action writes to the process's)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser._print_message(f"cudashell {__version__}\n", parser.env.stdout)
        parser.exit(ExitStatus.SUCCESS)


def build_parser(env: Environment | None = None) -> Parser:
    p = Parser(prog="cudashell", description="Explore how CUDA host and device memory behave.", env=env,
               epilog="exit status: 0 ok, 1 a command failed, 2 a usage or startup error, 130 interrupted, "
                      "141 the reader of the output left. `cudashell grade CHECKS.cush [SUBMISSION…]` grades "
                      "students' submissions (`cudashell grade --help`)")
    p.add_argument("scripts", nargs="*", metavar="FILE.cush", help="scripts to run in order")
    p.add_argument("-c", dest="commands", metavar="CMDS", help="run these commands (`;` separates them)")
    p.add_argument("--backend", choices=("auto", "sim", "cuda"),
                   help="cuda needs PyCUDA and a GPU; auto (the default, or the config file's) falls back to the "
                        "simulator")
    p.add_argument("--sim-profile", metavar="FILE|NAME",
                   help=f"simulator profile: a JSON file (`calibrate out FILE`), or built-in: h100 (the default), "
                        f"{', '.join(BUILTIN)}")
    p.add_argument("--json", action="store_true", help="one JSON object per executed command")
    p.add_argument("--keep-going", action="store_true", help="run on after a failed command (exit 1 at the end)")
    p.add_argument("--echo", action=argparse.BooleanOptionalAction, default=None,
                   help="print each script command before its output (default: on for script files)")
    p.add_argument("--advice", action=argparse.BooleanOptionalAction, default=None,
                   help="a `note:` line when a command does what a teacher would comment on (default: on at the "
                        "prompt, off in scripts, -c and --json)")
    p.add_argument("--quiet", action="store_true", help="no banner")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks of internal errors")
    p.add_argument("--version", action=_Version, help="show the version and exit")
    p.add_argument("--json-schema", action="store_true",
                   help="print the JSON Schema of a --json line (every kind of result, key by key) and exit")
    return p


def banner(reason: str, backend=None) -> str:
    """One line: the version, the backend and why, and on a GPU where engine times come from."""
    line = f"cudashell {__version__} · backend {reason}"
    if backend is not None and not backend.capabilities.models_time:
        line += " · engine times: " + (backend.tracing or f"CUDA events — {backend.tracing_why}")
    return line


def main(argv: list[str] | None = None, env: Environment | None = None) -> ExitStatus:
    """The command, on `env`'s streams (the process's when none is given); its exit status."""
    env = env or Environment()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["grade"]:  # `cudashell grade CHECKS.cush [SUBMISSION…]` (a script named grade: ./grade)
        from .grade import main as grade_main

        return grade_main(argv[1:], env)
    parser = build_parser(env)
    if "--json" in (argv[:argv.index("--")] if "--" in argv else argv):
        parser.json_cmd = shlex.join(["cudashell", *argv])
    try:
        args = parser.parse_args(argv)
    except ParserExit as e:
        return e.status
    if args.json_schema:
        from ..output.results import schema_json

        if env.stdout is not None:
            env.stdout.write(schema_json())
        return ExitStatus.SUCCESS
    interactive = not args.scripts and args.commands is None and env.stdin_isatty
    settings = config.load(create=interactive, env=env)
    choice = args.backend or settings["backend"]
    registry.load()  # while the GPU worker (started first) comes up: it takes the longer
    if interactive:
        from . import repl  # noqa: F401 — prompt_toolkit too, meanwhile
    try:
        backend, reason = open_backend(choice, args.sim_profile)
    except ShellError as e:  # the command line, or the config file's line, that asked for it
        if e.code == "BAD_PROFILE":
            return startup_error(env, args.json, f"--sim-profile {args.sim_profile}", e)
        if args.backend is None and "backend" in settings.where:
            line, col = settings.where["backend"]
            return startup_error(env, args.json, f"backend = {choice}", e.at(col), settings.file, line)
        return startup_error(env, args.json, f"--backend {choice}", e)
    options = shell_options(args, interactive, env)
    err = None  # the environment's
    if interactive:
        from .repl import prompt_options, repl

        options, err = prompt_options(options, settings, env)
    shell = Shell(backend, reason, options, env, err=err)
    apply_settings(shell, settings)
    try:
        if interactive:
            code = ExitStatus(repl(shell, banner(reason, backend), settings, env=env))
        else:
            if env.stdout_isatty and not args.json:  # a person reads it: text wraps between words, as at the prompt
                shell.session.settings["width"] = env.terminal_size().columns
            if not args.quiet and not args.json:
                width = env.terminal_size().columns if env.stderr_isatty else 0
                shell.write("\n".join(render.wrap([banner(reason, backend)], width)), err=True)
            code = run_batch(shell, args, env)
    except KeyboardInterrupt:
        shell.write("interrupted", err=True)
        code = ExitStatus.INTERRUPTED
    finally:
        try:
            shell.close()
        except KeyboardInterrupt:  # a second Ctrl-C while closing: the process ends with its context anyway
            code = ExitStatus.INTERRUPTED
    return _output_checked(shell, code, env)


def shell_options(args, interactive: bool, env: Environment) -> ShellOptions:
    """The shell's options from the command line."""
    return ShellOptions(json_mode=args.json, keep_going=args.keep_going, debug=args.debug,
                        echo=args.echo if args.echo is not None else bool(args.scripts),
                        # on at the prompt unless --no-advice (or --json); elsewhere only with --advice
                        advice=args.advice if args.advice is not None else interactive and not args.json,
                        state_dir=env.state_dir)  # where a lesson's progress is kept


def _output_checked(shell: Shell, code: ExitStatus, env: Environment) -> ExitStatus:
    """Output that could not be written fails the run (`Environment.output_lost`)."""
    return env.output_lost(shell.output_lost, code) if shell.output_lost else code


def apply_settings(shell: Shell, settings: dict) -> None:
    """The config file's defaults for the session; a bad value there is ignored with a warning."""
    for name, setting in SETTABLE.items():  # those the file may set too (settings.SETTINGS says which)
        key = setting.config[1] if setting.config else None
        if key is None or settings[key] == DEFAULTS[key]:
            continue
        if not shell.execute_quietly(f"set {name} {settings[key]}"):
            shell.write(f"config: ignoring {key} = {settings[key]}", err=True)


def run_batch(shell: Shell, args, env: Environment) -> ExitStatus:
    ok, unreadable = True, False
    if args.commands is not None:  # checked whole before it runs, as a script file is
        ok = shell.run_text(args.commands, "-c") and ok
    for path in args.scripts:
        if shell.quitting or (not (ok and not unreadable) and not args.keep_going):
            break
        try:
            ok = shell.run_script(path) and ok
        except ShellError as e:  # a script file that cannot be read: with --keep-going, the next one still runs
            shell.report(path, None, e)  # one line, or with --json one JSON error
            unreadable = True
    if args.commands is None and not args.scripts:
        with shell.confined_to(Path.cwd(), "a script"):  # a script piped in, as a script file is
            ok = shell.run_text(env.read_stdin(), "<stdin>")
    if unreadable:
        return ExitStatus.USAGE
    if shell.interrupted and not args.keep_going:
        return ExitStatus.INTERRUPTED  # as an interrupted program does
    return ExitStatus.ERROR if shell.failed or not ok else ExitStatus.SUCCESS

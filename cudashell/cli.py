"""The `cudashell` command: scripts, -c, stdin, or the interactive shell when stdin is a terminal.
Exit codes: 0 ok, 1 a command failed unexpectedly, 2 the command line itself was wrong."""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__, config, registry, render
from .backends import open_backend
from .backends.profile import BUILTIN
from .config import DEFAULTS
from .errors import ShellError
from .shell import Shell


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cudashell", description="Explore how CUDA host and device memory behave.")
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
    p.add_argument("--quiet", action="store_true", help="no banner")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks of internal errors")
    p.add_argument("--version", action="version", version=f"cudashell {__version__}")
    return p


def banner(reason: str, backend=None) -> str:
    """One line: the version, the backend and why, and on a GPU where engine times come from."""
    line = f"cudashell {__version__} · backend {reason}"
    if backend is not None and backend.name == "cuda":
        line += " · engine times: " + (backend.tracing or f"CUDA events — {backend.tracing_why}")
    return line


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    interactive = not args.scripts and args.commands is None and sys.stdin.isatty()
    settings = config.load(create=interactive)
    choice = args.backend or settings["backend"]
    registry.load()  # while the GPU worker (started first) comes up: it takes the longer
    if interactive:
        from . import repl  # noqa: F401 — prompt_toolkit too, meanwhile
    try:
        backend, reason = open_backend(choice, args.sim_profile)
    except ShellError as e:
        print(render.error_line(e), file=sys.stderr)
        return 2
    echo = args.echo if args.echo is not None else bool(args.scripts)
    out = sys.stdout or open(os.devnull, "w")  # a stream closed at start is None: write nowhere, say so below
    shell = Shell(backend, reason, out=out, err=sys.stderr or out, json_mode=args.json, keep_going=args.keep_going,
                  debug=args.debug, echo=echo)
    if sys.stdout is None:
        shell.output_lost = "stdout is closed"
    apply_settings(shell, settings)
    try:
        if interactive:
            from .repl import repl

            code = repl(shell, banner(reason, backend), settings)
        else:
            if not args.quiet and not args.json:
                shell._write(shell.err, banner(reason, backend))
            code = run_batch(shell, args)
    except KeyboardInterrupt:
        shell._write(shell.err, "interrupted")
        code = 130
    finally:
        try:
            shell.close()
        except KeyboardInterrupt:  # a second Ctrl-C while closing: the process ends with its context anyway
            code = 130
    return _output_checked(shell, code)


def _output_checked(shell: Shell, code: int) -> int:
    """Output that could not be written fails the run: quietly for a reader that left (`| head`), as tools
    killed by SIGPIPE do, with one line otherwise (a full disk, a closed stdout)."""
    if not shell.output_lost:
        return code
    broken = "Broken pipe" in shell.output_lost
    if not broken:
        try:
            os.write(2, f"cudashell: output was lost: {shell.output_lost}\n".encode())
        except OSError:
            pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):  # so that Python's own flush at exit cannot fail again
        try:
            if stream is not None:
                os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):
            pass
    return 141 if broken else code or 1


def apply_settings(shell: Shell, settings: dict) -> None:
    """The config file's defaults for the session; a bad value there is ignored with a warning."""
    for key, setting in (("tablefmt", "tablefmt"), ("time", "time"), ("explain", "explain"), ("limit", "pinlimit")):
        if settings[key] == DEFAULTS[key]:
            continue
        if not shell.execute_quietly(f"set {setting} {settings[key]}"):
            print(f"config: ignoring {key} = {settings[key]}", file=sys.stderr)


def run_batch(shell: Shell, args) -> int:
    ok, unreadable = True, False
    if args.commands is not None:
        ok = shell.run_items(shell.script_items(args.commands), "-c") and ok
    for path in args.scripts:
        if shell.quitting or (not (ok and not unreadable) and not args.keep_going):
            break
        try:
            ok = shell.run_script(path) and ok
        except ShellError as e:  # a script file that cannot be read: with --keep-going, the next one still runs
            print(render.error_line(e), file=sys.stderr)
            unreadable = True
    if args.commands is None and not args.scripts:
        ok = shell.run_items(shell.script_items(sys.stdin.read()), "<stdin>")
    if unreadable:
        return 2
    if shell.interrupted and not args.keep_going:
        return 130  # as an interrupted program does
    return 1 if shell.failed or not ok else 0

"""The command line's parser and its one-line startup errors, shared by `cudashell` and `cudashell grade` (each
builds its own options on this parser; neither imports the other)."""

from __future__ import annotations

import argparse

from ..errors import ShellError
from ..output import render
from .environment import Environment, ExitStatus


class ParserExit(Exception):
    """The parser is done: --help or --version was answered, or the arguments were wrong (said already)."""

    def __init__(self, status: ExitStatus):
        super().__init__(status)
        self.status = status


class Parser(argparse.ArgumentParser):
    """argparse writing to the environment's streams, and ending with ParserExit rather than sys.exit (as httpie's
    parser does): --help and --version on stdout, a usage error on stderr with ExitStatus.USAGE."""

    def __init__(self, *args, env: Environment | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.env = env or Environment()
        self.json_cmd: str | None = None  # with --json: the command line, a usage error's JSON line's `cmd`

    def _print_message(self, message: str, file=None) -> None:
        file = file or self.env.stderr
        if message and file is not None:
            try:
                file.write(message)
            except (AttributeError, OSError):  # as argparse: a stream that cannot take it is not an error here
                pass

    def print_usage(self, file=None) -> None:
        self._print_message(self.format_usage(), file or self.env.stdout)

    def print_help(self, file=None) -> None:
        self._print_message(self.format_help(), file or self.env.stdout)

    def exit(self, status: int = ExitStatus.SUCCESS, message: str | None = None):
        if message:
            self._print_message(message, self.env.stderr)
        raise ParserExit(ExitStatus(status))

    def error(self, message: str):
        if self.json_cmd is not None:
            raise ParserExit(startup_error(self.env, True, self.json_cmd,
                                           ShellError("USAGE", message, f"`{self.prog} --help` lists the options")))
        self.print_usage(self.env.stderr)
        self.exit(ExitStatus.USAGE, f"{self.prog}: error: {message}\n")


def startup_error(env: Environment, json_mode: bool, cmd: str, error: ShellError, file: str | None = None,
                  line: int | None = None) -> ExitStatus:
    """An error before any command runs (the command line, a backend that cannot start) is one line, as a command's
    is: on stderr, or with --json one JSON object on stdout, of the same shape; the run ends with USAGE."""
    stream = env.stdout if json_mode else env.stderr
    text = render.json_line(cmd, None, error, file, line) if json_mode else render.error_line(error, file, line)
    if stream is not None:
        print(text, file=stream)
    return ExitStatus.USAGE

"""The process's surroundings as one object, as httpie's `Environment`: the three standard streams, whether they
are terminals, the terminal's size and where the config and state live. The entry point makes it once and passes
it down (the CLI, the REPL, the config loader, the notebook magic); tests pass one of StringIO streams instead of
patching `sys`. Also `ExitStatus`, the command's exit codes. Standard library only: this runs before numpy.

This module is the one place that reads `sys.stdin`, `sys.stdout` and `sys.stderr`."""

from __future__ import annotations

import enum
import os
import sys
from pathlib import Path


class ExitStatus(enum.IntEnum):
    """The `cudashell` command's exit codes; their values are fixed (scripts and tests rely on them)."""

    SUCCESS = 0  # every command ran (or failed as an `expect error` said it would)
    ERROR = 1  # a command failed unexpectedly (at once, or at the end with --keep-going)
    USAGE = 2  # the command line was wrong, the backend asked for cannot start, a script file cannot be read
    INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as an interrupted program's
    BROKEN_PIPE = 141  # the reader of stdout left (`| head`): 128 + SIGPIPE, as a program SIGPIPE ends


_STD = object()  # "the process's own stream", as opposed to None: a stream closed at start


def _isatty(stream) -> bool:
    try:
        return stream is not None and bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed file
        return False


def xdg_config_dir() -> Path:
    """$XDG_CONFIG_HOME/cudashell, ~/.config/cudashell when it is not set."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "cudashell"


def xdg_state_dir() -> Path:
    """$XDG_STATE_HOME/cudashell (the history file), ~/.local/state/cudashell when it is not set."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "cudashell"


class Environment:
    """What the shell reads from and writes to. `Environment()` is the process's (its streams as they are when it
    is made; a stream closed at start is None); any part can be given instead:
    `Environment(stdin=io.StringIO("ls\\n"), stdout=out, stderr=err)` runs the CLI without a terminal or `sys`.
    The terminal size is read when asked (a terminal can be resized); given, it is fixed."""

    def __init__(self, stdin=_STD, stdout=_STD, stderr=_STD, *, stdin_isatty: bool | None = None,
                 stdout_isatty: bool | None = None, stderr_isatty: bool | None = None,
                 terminal_size: tuple[int, int] | None = None, config_dir: Path | str | None = None,
                 state_dir: Path | str | None = None):
        self.stdin = sys.stdin if stdin is _STD else stdin
        self.stdout = sys.stdout if stdout is _STD else stdout
        self.stderr = sys.stderr if stderr is _STD else stderr
        self.stdin_isatty = _isatty(self.stdin) if stdin_isatty is None else stdin_isatty
        self.stdout_isatty = _isatty(self.stdout) if stdout_isatty is None else stdout_isatty
        self.stderr_isatty = _isatty(self.stderr) if stderr_isatty is None else stderr_isatty
        self._terminal_size = None if terminal_size is None else os.terminal_size(terminal_size)
        self.config_dir = xdg_config_dir() if config_dir is None else Path(config_dir)  # $XDG_CONFIG_HOME/cudashell
        self.state_dir = xdg_state_dir() if state_dir is None else Path(state_dir)  # $XDG_STATE_HOME/cudashell

    @classmethod
    def live(cls, **kwargs) -> Environment:
        """An environment whose stdout and stderr are looked up at each write: in a notebook the kernel puts new
        ones in `sys` for each cell."""
        return cls(stdin=None, stdout=LiveStream("stdout"), stderr=LiveStream("stderr"), **kwargs)

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config"

    @property
    def history_file(self) -> Path:
        return self.state_dir / "history"

    def terminal_size(self, fallback: tuple[int, int] = (80, 24)) -> os.terminal_size:
        """The size given, else as `shutil.get_terminal_size` finds it, but for this environment's stdout:
        $COLUMNS and $LINES first, then the terminal, then the fallback (a pipe, a StringIO)."""
        if self._terminal_size is not None:
            return self._terminal_size
        try:
            columns = int(os.environ["COLUMNS"])
        except (KeyError, ValueError):
            columns = 0
        try:
            lines = int(os.environ["LINES"])
        except (KeyError, ValueError):
            lines = 0
        if columns <= 0 or lines <= 0:
            try:
                size = os.get_terminal_size(self.stdout.fileno())
            except (AttributeError, ValueError, OSError):  # None, StringIO (io.UnsupportedOperation), a pipe
                size = os.terminal_size(fallback)
            columns = columns if columns > 0 else size.columns or fallback[0]
            lines = lines if lines > 0 else size.lines or fallback[1]
        return os.terminal_size((columns, lines))

    def output_lost(self, why: str, code: ExitStatus) -> ExitStatus:
        """How a run ends whose output could not all be written (`why`: the error's text): quietly with 141 for a
        reader that left (`| head`), as tools killed by SIGPIPE do; with one line and a failure otherwise (a full
        disk, a closed stdout). Then stdout and stderr point at /dev/null, so that Python's own flush at exit cannot
        fail again with a traceback."""
        broken = "Broken pipe" in why
        if not broken:
            self.say(f"cudashell: output was lost: {why}")
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (self.stdout, self.stderr):
            try:
                if stream is not None:
                    os.dup2(devnull, stream.fileno())
            except (OSError, ValueError, AttributeError):  # no file behind it (a StringIO), or a closed one
                pass
        os.close(devnull)
        return ExitStatus.BROKEN_PIPE if broken else code or ExitStatus.ERROR

    def say(self, line: str) -> None:
        """A line of the process's own on stderr, straight to its file, past a Python buffer that may be what
        failed; a stream with no file (a StringIO) is written to."""
        if self.stderr is None:
            return
        text = line + "\n"
        try:
            os.write(self.stderr.fileno(), text.encode())
        except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is the first two
            try:
                self.stderr.write(text)
            except (OSError, ValueError, AttributeError):
                pass

    def read_stdin(self) -> str:
        """All of stdin as text; a stdin closed at start reads as empty."""
        return "" if self.stdin is None else self.stdin.read()

    def __repr__(self) -> str:
        return (f"Environment(stdin={self.stdin!r}, stdout={self.stdout!r}, stderr={self.stderr!r}, "
                f"config_dir={str(self.config_dir)!r}, state_dir={str(self.state_dir)!r})")


class LiveStream:
    """`sys.stdout` or `sys.stderr` as it is at each write, not as it was when this was made."""

    def __init__(self, name: str):
        if name not in ("stdout", "stderr"):
            raise ValueError(f"not an output stream: {name}")
        self.name = name

    def _stream(self):
        return sys.stdout if self.name == "stdout" else sys.stderr

    def write(self, text: str) -> int:
        return self._stream().write(text)

    def flush(self) -> None:
        self._stream().flush()

    def isatty(self) -> bool:
        return False

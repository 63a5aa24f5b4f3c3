"""What a Shell is built with (`ShellOptions`, fixed by the front end that makes it) and what the commands running
now see as the shell's own (`Frame`). A nested run — a repeat's rounds, `run FILE`, a demo on its own session, the
prompt holding output for its pager — pushes a changed copy of the frame and pops it when it ends, however it ends:
nothing is swapped and restored by hand, so a run that raises leaves the outer frame as it was."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..language.confinement import Confinement


@dataclass(frozen=True)
class ShellOptions:
    """How a front end wants its shell to behave. The CLI, the prompt, the notebook and grading each build one."""

    json_mode: bool = False  # one JSON line per command (`--json`)
    keep_going: bool = False  # a failed command does not stop a script
    debug: bool = False  # internal errors raise, with their traceback
    echo: bool = False  # each script command is shown before its output
    echo_scripts: bool | None = None  # a script or demo run by a command shows each command (None: as `echo`)
    advice: bool = False  # `set advice on` from the start (the prompt, the notebook)
    # (Result) -> None: shows results itself (the notebook's rich output) instead of text
    display: Callable[[Any], None] | None = None
    editor: Callable[[str, str], str] | None = None  # (text, suffix) -> text: the user's $EDITOR, at a prompt
    progress_stream: Any = None  # where the progress line goes, when not the error stream (the prompt's terminal)
    # (error, its line as shown) -> None: told of each error the shell reports, once (a nested script's too, with
    # its file:line), but not one the next `expect error` names — `cudashell grade` keeps them
    on_error: Callable[[Any, str], None] | None = None
    # (result or None, error or None) -> None: told of every report, nested and repeated ones too, before it is
    # shown — for whatever collects what a run produced (the tests' fuzzing harness)
    on_report: Callable[[Any, Any], None] | None = None
    # whose files must lie in a folder from the start (language/confinement.py): grading's submission, every file it
    # opens; a notebook's cells, what they write. None: the prompt's freedom (a script it runs is confined as it runs)
    confinement: Confinement | None = None
    workdir: Path | None = None  # where relative paths start (None: the working directory when the shell is made)
    state_dir: Path | None = None  # where a lesson's progress is kept (the Environment's state dir); None: not kept
    quit_ends_shell: bool = True  # False (grading): `quit` ends the scripts running, and the next command runs

    @property
    def scripts_echo(self) -> bool:
        return self.echo if self.echo_scripts is None else self.echo_scripts


class Redirect:
    """`output FILE`: where results go instead of the screen. One is shared by the frames of a scope (a script's
    `output FILE` outlives the script); a repeat's rounds have their own, closed when they end."""

    def __init__(self):
        self.file = None


@dataclass(frozen=True)
class Frame:
    """What the commands running now see as the shell's own."""

    options: ShellOptions
    backend: Any  # a Backend, or the repeat planner's Recorder standing in for it during round 1
    session: Any  # the user's Session, or a demo's own
    out: Any
    err: Any
    redirect: Redirect
    dirs: tuple[Path, ...]  # the folders of the scripts running, innermost last: relative paths start there
    echo: bool = False  # each command is shown before its output
    recording: bool = True  # history keeps the command (not each round of a repeat: the repeat is the command)
    expecting: str | None = None  # the code the next `expect error` names, while the command before it runs
    confinement: Confinement | None = None  # where the running commands' files must lie (a script's, a cell's, …)

    def but(self, **changes) -> "Frame":
        """This frame with `changes`: what dataclasses.replace does, without its checks (a frame is pushed for
        nested runs and each command's `expect error`, on the command path)."""
        if not changes.keys() <= self.__dict__.keys():
            raise TypeError(f"a frame has no {sorted(changes.keys() - self.__dict__.keys())}")
        new = object.__new__(Frame)
        object.__setattr__(new, "__dict__", {**self.__dict__, **changes})
        return new

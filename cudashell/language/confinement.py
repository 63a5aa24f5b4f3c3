"""Where the files a command names may lie, when its text comes from someone the user did not watch typing it. A
graded submission opens and writes files only inside its own folder (OUTSIDE_SUBMISSION). A script, a notebook cell
and a lesson's answers are teaching material people download: they read what they like, but write only inside the
folder they run from (OUTSIDE_FOLDER) — else `output ~/.config/cudashell/config` and two `echo` lines would choose the
program the next pager runs, and `~/.bashrc` would be as easy. One rule for both, checked before the command opens
anything: the path, as the commands resolve it (from the script's folder and from the working directory, `~`
expanded, symbolic links followed), lies below the root; and a file written is never hidden (no part of its path
starts with '.', `..` included) and never inside cudashell's own config or state folder. The prompt is not confined:
what the user types is the user's. Pure: no CUDA, no terminal."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import OUTSIDE_HINT, ShellError

FOLDER_HINT = "write below that folder with a relative path (results.txt, out/run.json); at the prompt you may " \
              "write anywhere"


@dataclass(frozen=True)
class Confinement:
    """The folder a run's files must lie in. `reads`: what its commands read is confined too (grading), not only
    what they write; `who` names the run in errors; `guarded`: cudashell's own folders, never written."""

    root: Path
    reads: bool = False
    who: str = "a script"  # a script, a notebook cell, a lesson, a submission
    guarded: tuple[Path, ...] = ()

    @classmethod
    def submission(cls, root: Path) -> Confinement:
        """`cudashell grade`: the submission's folder, for every file it opens."""
        return cls(Path(root), reads=True, who="a submission")

    @property
    def code(self) -> str:
        return "OUTSIDE_SUBMISSION" if self.reads else "OUTSIDE_FOLDER"

    def check(self, value: str, bases: Iterable[Path], col: int | None, *, writes: bool,
              shown: str | None = None) -> None:
        """Refuse `value` (a path a command names, as written; `shown` in the error, when not itself) unless it lies
        where this run may open it: read (only grading confines reads) or written. Each base it may be resolved
        from is tried, `~` expanded or not."""
        if not (writes or self.reads):
            return
        root, written, shown = self.root.resolve(), Path(value), shown or value
        for base in bases:
            for path in {written, written.expanduser()}:
                try:
                    where = (base / path).resolve()
                except (OSError, RuntimeError, ValueError):  # a loop of links, a name the system refuses
                    raise self._refuse(f"{shown} cannot be followed to a file", col) from None
                self._inside(root, where, shown, col)
                if writes:
                    self._not_hidden(root, written, where, shown, col)
                    self._not_guarded(where, shown, col)

    def _refuse(self, message: str, col: int | None, hint: str | None = None) -> ShellError:
        return ShellError(self.code, message, hint or (OUTSIDE_HINT if self.reads else FOLDER_HINT), col)

    def _inside(self, root: Path, path: Path, shown: str, col: int | None) -> None:
        if path.is_relative_to(root):
            return
        if self.reads:  # grading's message, as the grade table has always shown it
            raise self._refuse(f"{shown} is outside the submission's folder {self.root}", col)
        raise self._refuse(f"{shown} is outside {self.root}: {self.who} writes only inside the folder it runs from",
                           col)

    def _not_hidden(self, root: Path, written: Path, path: Path, shown: str, col: int | None) -> None:
        """No part starting with '.': not as written (`..`, `.bashrc`), nor where links lead (`link/x` → `.git/x`)."""
        parts = [*written.parts, *path.relative_to(root).parts]
        hidden = next((p for p in parts if p.startswith(".")), None)
        if hidden == "..":
            raise self._refuse(f"{shown} climbs out with '..': {self.who} writes only below its folder {self.root}",
                               col)
        if hidden is not None:
            raise self._refuse(f"{shown} is a hidden file or folder ('{hidden}'): {self.who} does not write one",
                               col, "name it without a leading '.'")

    def _not_guarded(self, path: Path, shown: str, col: int | None) -> None:
        for own in self.guarded:
            if path.is_relative_to(own.expanduser().resolve()):
                raise self._refuse(f"{shown} is inside cudashell's own folder {own}: {self.who} never writes there",
                                   col, "cudashell's config and state are written by cudashell alone")

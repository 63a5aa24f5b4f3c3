"""The one error type every layer raises, so a failure always renders as one line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ShellError(Exception):
    """A refused command: a code (the driver's `CUDA_ERROR_*` name or a shell code), a message,
    an optional hint, and the column (1-based) in the command line where the problem is."""

    code: str
    message: str
    hint: str | None = None
    col: int | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def at(self, col: int | None) -> "ShellError":
        """Attach a column unless a deeper layer already placed one."""
        if self.col is None:
            self.col = col
        return self


def usage(message: str, col: int | None = None, hint: str | None = None) -> ShellError:
    return ShellError("USAGE", message, hint, col)

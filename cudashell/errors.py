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


# Errors after which the context (on a GPU: the whole process) is unusable: every later call fails the same
# way, and only a new context in a new process works again (CUDA driver API, "sticky" errors; seen on the H100).
STICKY = frozenset({"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
                    "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
                    "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT",
                    "CUDA_ERROR_ECC_UNCORRECTABLE", "GPU_ABANDONED", "GPU_WORKER_DIED"})
RESET_HINT = "the context is dead; `reset` brings the session back on a fresh one (host contents are kept)"


def held_error(what: str, why: str | None = None) -> ShellError:
    """`hold` keeps every stream waiting for `release`: a call that waits for the GPU would never return."""
    return ShellError("STREAMS_HELD", f"{what} would wait for work that `hold` keeps from running: it would "
                      "never return" + (f" ({why})" if why else ""), "`release` first")

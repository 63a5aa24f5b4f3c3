"""The GPU worker started before the shell imports its own parts (by the `cudashell` command's entry), kept here
for the cuda backend to adopt: the backend and the entry both import this module, neither imports the other.
Standard library only: it runs before numpy."""

from __future__ import annotations

import socket
import subprocess
import sys

_started: tuple | None = None  # (process, main socket, rescue socket, side, ordinal)


def spawn(side: str = "gpu", ordinal: int = 0) -> tuple:
    """A worker process and the two sockets to it (the main pipe, and the rescue pipe for host memory)."""
    main, main_child = socket.socketpair()
    rescue, rescue_child = socket.socketpair()
    fds = (main_child.fileno(), rescue_child.fileno())
    proc = subprocess.Popen([sys.executable, "-m", "cudashell.backends.worker", *map(str, fds), side, str(ordinal)],
                            pass_fds=fds, stdin=subprocess.DEVNULL,
                            start_new_session=True)  # the terminal's Ctrl-C is the shell's alone
    main_child.close()
    rescue_child.close()
    return proc, main, rescue


def take(side: str, ordinal: int) -> tuple | None:
    """The worker started at launch, for the cuda backend to adopt (once), if it is the one wanted."""
    global _started
    started, _started = _started, None
    if started is not None and started[3:] == (side, ordinal):
        return started[:3]
    if started is not None:
        started[0].kill()
    return None


def start(side: str, ordinal: int) -> None:
    """Start the worker now, for the backend made later to adopt."""
    global _started
    _started = (*spawn(side, ordinal), side, ordinal)


def end_unadopted() -> None:
    """End a started worker no backend adopted (the simulator was chosen after all)."""
    global _started
    if _started is not None:
        _started[0].kill()
        _started = None

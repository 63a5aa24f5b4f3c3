"""The `cudashell` command's first step, before the shell imports its own parts: when the GPU may be wanted, start
the GPU worker now, so that the two come up side by side (on the H100 machine the shell's imports take about
0.6 s, the worker's start about 0.5 s). The cuda backend adopts the worker started here (`backends/prestart.py`
keeps it); one that is not adopted (the simulator was chosen after all) is ended with the process. Standard library only: it runs before numpy.
Here the process's `Environment` (its streams, terminals, config paths) is made, once, and handed to the CLI."""

from __future__ import annotations

import os
import sys

from ..backends import prestart
from .environment import Environment, ExitStatus


def _wanted(argv: list[str], env: Environment | None = None) -> bool:
    if any(a in ("-h", "--help", "--version", "--json-schema") for a in argv) or argv[:1] == ["grade"]:
        return False  # `grade` starts a backend per section, each in a process of its own
    choice = None
    for i, a in enumerate(argv):
        if a == "--backend" and i + 1 < len(argv):
            choice = argv[i + 1]
        elif a.startswith("--backend="):
            choice = a.split("=", 1)[1]
    if choice is None:
        from . import config

        choice = config.load(warn=lambda _: None, env=env, only={"backend"})["backend"]  # warnings: by the shell
    if choice == "sim":
        return False
    from ..backends.packages import gpu_packages_missing

    return gpu_packages_missing() is None


def main(argv: list[str] | None = None, env: Environment | None = None) -> ExitStatus:
    """`cudashell`: its exit status. `env` is the process's unless given (tests give one of StringIO streams)."""
    env = env or Environment()
    args = sys.argv[1:] if argv is None else argv
    if os.environ.get("CUDASHELL_PRESTART") != "off" and _wanted(args, env):
        prestart.start("gpu", 0)
    from .cli import main as cli_main

    try:
        return cli_main(args, env)
    finally:
        prestart.end_unadopted()  # the simulator ran

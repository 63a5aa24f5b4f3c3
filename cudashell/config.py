"""The user's config file, $XDG_CONFIG_HOME/cudashell/config (INI), made with comments on first run."""

from __future__ import annotations

import configparser
import os
from pathlib import Path

TEMPLATE = """\
# cudashell configuration. Lines starting with # are comments; delete one's # to use it.
[shell]
# backend: auto (cuda when a GPU answers, else the simulator), cuda or sim
# backend = auto
# table style: any tabulate format (simple, plain, github, grid, psql, rounded_outline, ...)
# tablefmt = simple
# how many commands the history file keeps
# history_size = 10000
# print the CUDA runtime C and the driver call after each command: on or off
# explain = off
# time every command: on or off
# time = off
# colours: auto (on terminals, unless NO_COLOR is set), always or never
# color = auto
# colour theme for the prompt: default or mono
# theme = default
# line editing keys: emacs or vi
# editing_mode = emacs
# output longer than the screen goes through this pager at the prompt (never in scripts or pipes); off for none
# pager = less -SRXF

[pinning]
# how much host memory may be page-locked in all: auto (half of RAM, never past a finite
# RLIMIT_MEMLOCK) or a size such as 64GiB
# limit = auto
"""
DEFAULTS = {"backend": "auto", "tablefmt": "simple", "history_size": "10000", "explain": "off", "time": "off",
            "color": "auto", "theme": "default", "limit": "auto", "editing_mode": "emacs",
            "pager": "less -SRXF"}


def config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "cudashell"


def state_dir() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "cudashell"


def load(create: bool = False) -> dict:
    """The settings, defaults filled in. `create` writes the commented template when there is none."""
    path = config_dir() / "config"
    if create and not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(TEMPLATE)
        except OSError:
            pass
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except configparser.Error:
        return dict(DEFAULTS)
    out = dict(DEFAULTS)
    for section in ("shell", "pinning"):
        if parser.has_section(section):
            out.update({k: v.strip() for k, v in parser.items(section) if k in DEFAULTS})
    return out

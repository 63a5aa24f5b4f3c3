"""The user's config file, $XDG_CONFIG_HOME/cudashell/config (INI), made with comments on first run."""

from __future__ import annotations

import configparser
from pathlib import Path

from .environment import Environment, xdg_config_dir, xdg_state_dir

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
    return xdg_config_dir()


def state_dir() -> Path:
    return xdg_state_dir()


def load(create: bool = False, warn=None, env: Environment | None = None) -> dict:
    """The settings, defaults filled in. `create` writes the commented template when there is none. A file that
    cannot be read or parsed is a warning naming file:line (its settings are then the defaults), never fatal;
    `warn` says it, by default on the environment's stderr. The file is the environment's config file (the XDG
    one of the process when no environment is given)."""
    if warn is None:
        stderr = (env or Environment()).stderr

        def warn(text: str) -> None:
            if stderr is not None:
                print(text, file=stderr)
    path = env.config_file if env is not None else config_dir() / "config"
    if create and not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(TEMPLATE)
        except OSError:
            pass
    out = dict(DEFAULTS)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return out
    except OSError as e:
        warn(f"config: cannot read {path}: {e.strerror}; using the defaults")
        return out
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        warn(f"config: {path}:{line}: not UTF-8 text (byte {e.start}); using the defaults")
        return out
    parser = configparser.ConfigParser(interpolation=None)  # a `%` in a value is just a character
    try:
        parser.read_string(text, source=str(path))
    except configparser.DuplicateOptionError as e:
        warn(f"config: {path}:{e.lineno}: '{e.option}' is given twice in [{e.section}]; the last one is used")
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.read_string(text, source=str(path))
    except configparser.Error as e:
        line = getattr(e, "lineno", None)
        first = str(e).splitlines()[0]
        warn(f"config: {path}{f':{line}' if line else ''}: {first}; using the defaults")
        return out
    for section in ("shell", "pinning"):
        if parser.has_section(section):
            out.update({k: v.strip() for k, v in parser.items(section) if k in DEFAULTS})
    return out

"""Every setting, in one table: its default, what it accepts, how its text becomes a value, the words completion
offers for it, and where it lives — the session (`set` changes it, or the shell keeps it for itself) and the config
file (under which [section] and key). `set` (commands/meta.py), completion, the session's defaults, the config file
(config.py) and the front end applying the file (cli.apply_settings) all read it, so they cannot drift apart."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass, replace
from typing import Callable

from ..errors import ShellError
from ..sizes import format_size, format_size_exact, parse_size


def _tabulate_formats() -> list[str]:
    import tabulate

    return list(tabulate.tabulate_formats)


SET, SHELL, FILE = "set", "shell", "file"  # where a setting lives: see Setting.scope


@dataclass(frozen=True)
class Setting:
    default: object
    accepts: str = ""  # in words, for the error message and the config file's warning
    ok: Callable[[str], bool] = lambda text: True
    cast: Callable[[str], object] = str
    words: Callable[[], list[str]] = lambda: []  # what completion offers
    show: Callable[[object], str] = str  # how `set` prints the value
    scope: str = SET  # SET: the session's, changed by `set`; SHELL: the session's, kept by the shell itself (the
    #                   prompt's width, a demo's language); FILE: the config file's alone, read as the shell starts
    config: tuple[str, str] | None = None  # ([section], key) the config file sets it under
    old_keys: tuple[str, ...] = ()  # former names of its config key, still read
    # what a value the config file gives and the setting refuses becomes, and the words that say so; None: the default
    instead: tuple[str, str] | None = None

    def check(self, text: str) -> bool:
        try:
            return bool(self.ok(text))
        except (ValueError, ShellError):  # a number or a size that does not parse
            return False


def _size_or_auto(v) -> str:
    """`1 GiB`; the exact bytes beside a size that is not a whole number of units (`1.50 GiB (1610612736 B)`)."""
    if isinstance(v, str):
        return v
    return format_size(v) if "." not in format_size(v) else format_size_exact(v)


# Programs that run their arguments as commands: shells, launchers, interpreters. A pager shows text; one of these
# as the pager (`sh -c "touch PWNED; cat"`) would make the setting a way to run anything at the next long output.
COMMAND_RUNNERS = frozenset({
    "sh", "ash", "bash", "dash", "zsh", "ksh", "mksh", "yash", "fish", "csh", "tcsh", "busybox", "toybox",
    "env", "sudo", "doas", "su", "runuser", "nohup", "setsid", "nice", "ionice", "chrt", "taskset", "timeout", "stdbuf",
    "xargs", "script", "watch", "time", "flock", "unshare", "chroot", "ssh",
    "python", "pypy", "perl", "ruby", "node", "nodejs", "php", "lua", "luajit", "tclsh", "wish", "expect",
    "awk", "gawk", "mawk", "nawk", "sed", "find"})


def pager_argv(value: str) -> list[str] | None:
    """The pager's argv: `value` split as a shell would split it (it is never given to one), its program found on the
    PATH and not one of COMMAND_RUNNERS — by its name or the file its name leads to (`/bin/sh` → dash, a link named
    `pager` → bash). None for off, an open quote, a program not there, or one refused."""
    try:
        words = shlex.split(value)
    except ValueError:  # an open quote
        return None
    found = shutil.which(words[0]) if words and value != "off" else None
    if found is None:
        return None
    names = {os.path.basename(words[0]), os.path.basename(found), os.path.basename(os.path.realpath(found))}
    if any(re.sub(r"[\d.\-]+$", "", name) in COMMAND_RUNNERS for name in names):  # python3.11, bash5
        return None
    return [found, *words[1:]]


def _pager(value: str) -> bool:
    """off, or a pager that can run (pager_argv): one that cannot is never run, and output is not paged."""
    return value == "off" or pager_argv(value) is not None


def _on_off(config: tuple[str, str] | None = None) -> Setting:
    return Setting("off", "on or off", lambda v: v in ON_OFF, str, lambda: list(ON_OFF), config=config)


def _file(default: str, key: str, accepts: str, ok: Callable[[str], bool]) -> Setting:
    """A setting of the config file's [shell] alone (the front end reads it as the shell starts)."""
    return Setting(default, accepts, ok, scope=FILE, config=("shell", key))


ON_OFF = ("on", "off")
THEMES = ("default", "mono")  # the REPL's styles (repl.STYLES; a test keeps the two the same)

# In the order `set` lists them; the config file's keys come in this order in its warnings too.
SETTINGS: dict[str, Setting] = {
    "backend": _file("auto", "backend", "auto, cuda or sim", lambda v: v in ("auto", "cuda", "sim")),
    "count": Setting(16, "a number of elements ≥ 1", lambda v: int(v) >= 1, int, lambda: ["16", "64"]),
    "format": Setting("table", "table, json or csv", lambda v: v in ("table", "json", "csv"), str,
                      lambda: ["table", "json", "csv"]),
    "tablefmt": Setting("simple", "a tabulate format: simple, plain, github, grid, psql, …",
                        lambda v: v in _tabulate_formats(), str, _tabulate_formats, config=("shell", "tablefmt")),
    "history_size": _file("10000", "history_size", "a whole number ≥ 0",
                          lambda v: re.fullmatch(r"[0-9]+", v) is not None),
    "pinlimit": Setting("auto", "auto or a size such as 64GiB", lambda v: v == "auto" or parse_size(v) > 0,
                        lambda v: v if v == "auto" else parse_size(v), lambda: ["auto"], _size_or_auto,
                        config=("pinning", "pinlimit"), old_keys=("limit",)),
    "time": _on_off(("shell", "time")),
    "explain": _on_off(("shell", "explain")),
    "color": _file("auto", "color", "auto, always or never", lambda v: v in ("auto", "always", "never")),
    "theme": _file("default", "theme", " or ".join(THEMES), lambda v: v in THEMES),
    "editing_mode": _file("emacs", "editing_mode", "emacs or vi", lambda v: v in ("emacs", "vi")),
    "pager command": replace(_file("less -SRXF", "pager", "off or a pager on your PATH (a program that shows text, "
                                   "not a shell), such as less -SRXF", _pager),
                             instead=("off", "long output is not paged")),
    "width": Setting(0, scope=SHELL),  # the terminal's, at the prompt: text wraps between words (0: it does not)
    "lang": Setting("en", scope=SHELL),  # the language of the `say` lines a demo shows (`demo NAME lang zh`)
    "gpu-timeout": Setting("off", "off or a number of seconds > 0", lambda v: v == "off" or 0 < float(v) < 1e9,
                           lambda v: v if v == "off" else float(v), lambda: ["off", "10", "60"]),
    "pager": Setting("on", "on or off (at the prompt: output taller than the screen goes through the config's pager)",
                     lambda v: v in ON_OFF, str, lambda: list(ON_OFF)),  # whether to page; the file names the pager
    "expanded": Setting("off", "on, off or auto (pgcli's \\x: tables one `field | value` a line; auto: those too "
                        "wide for the terminal)", lambda v: v in ("on", "off", "auto"), str,
                        lambda: ["on", "off", "auto"]),
    "advice": Setting("off", "on or off (a `note:` line when a command does what a teacher would comment on; on at "
                      "the prompt and in notebooks)", lambda v: v in ON_OFF, str, lambda: list(ON_OFF)),
}
SETTABLE = {name: s for name, s in SETTINGS.items() if s.scope == SET}  # what `set` shows and changes
SESSION_DEFAULTS = {name: s.default for name, s in SETTINGS.items() if s.scope != FILE}  # a new session's

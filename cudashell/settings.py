"""The session's settings that `set` changes: what each accepts, how its text becomes a value, and the words
completion offers for it — one table, read by `set` (commands/meta.py) and by completion (suggest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .sizes import format_size, format_size_exact, parse_size


def _tabulate_formats() -> list[str]:
    import tabulate

    return list(tabulate.tabulate_formats)


@dataclass(frozen=True)
class Setting:
    accepts: str  # in words, for the error message
    ok: Callable[[str], bool]
    cast: Callable[[str], object]
    words: Callable[[], list[str]] = lambda: []  # what completion offers
    show: Callable[[object], str] = str  # how `set` prints the value


def _size_or_auto(v) -> str:
    """`1 GiB`; the exact bytes beside a size that is not a whole number of units (`1.50 GiB (1610612736 B)`)."""
    if isinstance(v, str):
        return v
    return format_size(v) if "." not in format_size(v) else format_size_exact(v)


ON_OFF = ("on", "off")
SETTINGS = {
    "count": Setting("a number of elements ≥ 1", lambda v: int(v) >= 1, int, lambda: ["16", "64"]),
    "format": Setting("table, json or csv", lambda v: v in ("table", "json", "csv"), str,
                      lambda: ["table", "json", "csv"]),
    "tablefmt": Setting("a tabulate format: simple, plain, github, grid, psql, …", lambda v: v in _tabulate_formats(),
                        str, _tabulate_formats),
    "time": Setting("on or off", lambda v: v in ON_OFF, str, lambda: list(ON_OFF)),
    "explain": Setting("on or off", lambda v: v in ON_OFF, str, lambda: list(ON_OFF)),
    "gpu-timeout": Setting("off or a number of seconds > 0", lambda v: v == "off" or 0 < float(v) < 1e9,
                           lambda v: v if v == "off" else float(v), lambda: ["off", "10", "60"]),
    "pager": Setting("on or off (at the prompt: output taller than the screen goes through the config's pager)",
                     lambda v: v in ON_OFF, str, lambda: list(ON_OFF)),
    "pinlimit": Setting("auto or a size such as 64GiB", lambda v: v == "auto" or parse_size(v) > 0,
                        lambda v: v if v == "auto" else parse_size(v), lambda: ["auto"], _size_or_auto),
    "expanded": Setting("on, off or auto (pgcli's \\x: tables one `field | value` a line; auto: those too wide for "
                        "the terminal)", lambda v: v in ("on", "off", "auto"), str, lambda: ["on", "off", "auto"]),
    "advice": Setting("on or off (a `note:` line when a command does what a teacher would comment on; on at the "
                      "prompt and in notebooks)", lambda v: v in ON_OFF, str, lambda: list(ON_OFF)),
}

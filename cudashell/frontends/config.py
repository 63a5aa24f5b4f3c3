"""The user's config file, $XDG_CONFIG_HOME/cudashell/config (INI), made with comments on first run."""

from __future__ import annotations

import codecs
import configparser
import difflib
import re
from pathlib import Path

from ..errors import ShellError
from ..model.settings import SETTINGS
from ..output.files import replace_file
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
# output longer than the screen goes through this pager at the prompt (never in scripts or pipes): a program
# that shows text, run without a shell (sh, env or an interpreter is refused); off for none
# pager = less -SRXF

[pinning]
# how much host memory may be page-locked in all: auto (half of RAM, never past a finite
# RLIMIT_MEMLOCK) or a size such as 64GiB
# pinlimit = auto
"""
KEYS = {s.config[1]: s for s in SETTINGS.values() if s.config}  # the file's keys (settings.SETTINGS says which)
OLD_KEYS = {old: s.config[1] for s in KEYS.values() for old in s.old_keys}  # a key's former name: still read
DEFAULTS = {name: str(s.default) for name, s in KEYS.items()}
SECTIONS = {section: [name for name, s in KEYS.items() if s.config[0] == section]
            for section in dict.fromkeys(s.config[0] for s in KEYS.values())}


def config_dir() -> Path:
    return xdg_config_dir()


def state_dir() -> Path:
    return xdg_state_dir()


def load(create: bool = False, warn=None, env: Environment | None = None, only=None) -> Config:
    """The settings, defaults filled in. `create` writes the commented template when there is none. Each line that
    cannot be used (not a setting, an unknown section or key, a value the key does not accept) is a warning naming
    file:line:col, what is wrong and what it must be; its key keeps the default — never fatal. `warn` says each, by
    default on the environment's stderr. The file is the environment's config file (the XDG one of the process when
    no environment is given). `only` names the keys to read, the others left at their defaults (the entry point
    wants the backend alone, before the imports a check such as tablefmt's needs)."""
    if warn is None:
        stderr = (env or Environment()).stderr

        def warn(text: str) -> None:
            if stderr is not None:
                print(text, file=stderr)
    path = env.config_file if env is not None else config_dir() / "config"
    if create and not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            replace_file(path, TEMPLATE)  # whole or not at all: a half template would warn at every start
        except (OSError, ShellError):
            pass
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Config(DEFAULTS)
    except OSError as e:
        warn(f"{path}: {ShellError('BAD_CONFIG', f'cannot read it: {e.strerror}; using the defaults')}")
        return Config(DEFAULTS)
    settings, problems = read(raw, only)
    from ..output import render

    for lineno, error in problems:
        warn(render.error_line(error, str(path), lineno))
    settings.file = str(path)
    return settings


class Config(dict):
    """The settings by key, defaults filled in; `where[key]` is (line, column) of the value the file gave a key, so
    that a setting refused later (backend = cuda on a machine without a GPU) names its line in `file`."""

    def __init__(self, values: dict, file: str | None = None):
        super().__init__(values)
        self.file = file
        self.where: dict[str, tuple[int, int]] = {}


_TOP = "\0top"  # configparser's section for the lines above the first header (no file names a section so)
_NO_DEFAULTS = "\0defaults"  # so that a [DEFAULT] in the file is a section like any other, not copied into all


def read(raw: bytes, only=None) -> tuple[Config, list[tuple[int, ShellError]]]:
    """The settings a config file's bytes give (defaults for what it does not set well) and its problems, by line:
    configparser reads it, `_places` says where each header and key is (configparser keeps no line numbers), and
    each key's value is checked against what it accepts."""
    encoding, problems = _not_utf8(raw), []
    lines = raw.removeprefix(codecs.BOM_UTF8).decode("utf-8", "replace").split("\n")  # configparser's lines
    parser = configparser.ConfigParser(interpolation=None, strict=False, default_section=_NO_DEFAULTS)
    try:
        parser.read_string("\n".join([f"[{_TOP}]", *lines]))
    except configparser.ParsingError as e:  # the lines that are neither a header nor a setting; the rest is read
        problems += [(n - 1, _not_a_setting(lines[n - 2])) for n, _ in e.errors]
    settings, first = Config(DEFAULTS), {}
    places = _places(lines, parser)
    last = {(section, OLD_KEYS.get(name, name)): n for section, name, n, _ in places}
    for section, written, n, col in places:  # `written`: the key as the file spells it (maybe a former name)
        problem = _misplaced(section, written, col)
        if problem is not None:
            problems.append((n, problem))
            continue
        if written is None or section not in SECTIONS:  # a header, or a setting under an unknown one (named)
            continue
        name = OLD_KEYS.get(written, written)
        if (section, name) in first:
            problems.append((n, ShellError("BAD_CONFIG", f"'{name}' is given twice in [{section}] (first on line "
                                           f"{first[section, name]}); the last one is used", None, 1)))
        first.setdefault((section, name), n)
        if last[section, name] != n or (only is not None and name not in only):
            continue
        value, key = parser.get(section, written), KEYS[name]
        if key.check(value):
            settings[name], settings.where[name] = value, (n, col)
        else:
            hint = "a comment goes on a line of its own" if re.search(r"\s[#;]", value) else None
            settings[name], instead = key.instead or (DEFAULTS[name], f"using the default, {DEFAULTS[name]}")
            problems.append((n, ShellError("BAD_CONFIG", f"{written} = {value}: it must be {key.accepts}; {instead}",
                                           hint, col)))
    undecoded = {n for n, _ in encoding}  # a line with bytes that are not text is said once, as such
    return settings, sorted(encoding + [p for p in problems if p[0] not in undecoded], key=lambda p: p[0])


def _places(lines: list[str], parser: configparser.ConfigParser) -> list[tuple[str, str | None, int, int]]:
    """(section, key — None for a header —, line, column of the header or of the value) of each header and setting,
    in the file's order, found by configparser's rules: comment and blank lines are skipped, and a line indented
    deeper than the setting above continues its value."""
    out, section, indent = [], _TOP, None
    for n, line in enumerate(lines, 1):
        text, lead = line.strip(), len(line) - len(line.lstrip())
        if not text or text[0] in "#;" or (indent is not None and lead > indent):
            continue
        if header := parser.SECTCRE.match(text):
            section, indent = header["header"], None
            out.append((section, None, n, lead + 1))
        elif (option := parser.OPTCRE.match(text)) and option["option"].strip():
            indent = lead
            out.append((section, parser.optionxform(option["option"].rstrip()), n, lead + option.start("value") + 1))
    return out


def _misplaced(section: str, name: str | None, col: int) -> ShellError | None:
    """Why a header or setting is not used where it stands: an unknown section or key, a key in another section or
    in none. A setting under an unknown section is not named again: its header was."""
    if name is None:
        if section in SECTIONS or section == _TOP:
            return None
        close = difflib.get_close_matches(section.strip(), list(SECTIONS), n=1)
        return ShellError("BAD_CONFIG", f"unknown section [{section}]; its lines are ignored",
                          f"did you mean [{close[0]}]?" if close else f"the sections are {_sections()}", col)
    if section not in SECTIONS and section != _TOP:
        return None
    key = KEYS.get(OLD_KEYS.get(name, name))
    if section == _TOP:
        return ShellError("BAD_CONFIG", f"'{name}' is outside any section; ignored",
                          f"put it under [{key.config[0]}]" if key else f"settings go under {_sections()}", 1)
    if key is None:
        close = difflib.get_close_matches(name, SECTIONS[section], n=1)
        return ShellError("BAD_CONFIG", f"unknown key '{name}' in [{section}]; ignored",
                          f"did you mean {close[0]}?" if close else f"[{section}] takes {', '.join(SECTIONS[section])}",
                          1)
    if key.config[0] != section:
        return ShellError("BAD_CONFIG", f"'{name}' belongs in [{key.config[0]}], not [{section}]; ignored",
                          f"move it under [{key.config[0]}]", 1)
    return None


def _sections() -> str:
    return " or ".join(f"[{s}]" for s in SECTIONS)


def _not_a_setting(line: str) -> ShellError:
    """A line configparser could not read: a header without its `]`, or a line without `=`."""
    text, col = line.strip(), len(line) - len(line.lstrip()) + 1
    if text.startswith("["):
        close = difflib.get_close_matches(text.strip("[] \t"), list(SECTIONS), n=1)
        hint = f"did you mean [{close[0]}]?" if close else f"a header is {_sections()}, on a line of its own"
        return ShellError("BAD_CONFIG", f"'{text}' is not a section header", hint, col)
    return ShellError("BAD_CONFIG", f"'{text}' is not `key = value`",
                      "a setting is `key = value`; a comment starts with #", col)


def _not_utf8(raw: bytes) -> list[tuple[int, ShellError]]:
    """Each line holding bytes that are not UTF-8 (read with them replaced), at the first such byte."""
    out = []
    for n, piece in enumerate(raw.removeprefix(codecs.BOM_UTF8).split(b"\n"), 1):
        try:
            piece.decode("utf-8")
        except UnicodeDecodeError as e:
            col = len(piece[:e.start].decode("utf-8", "replace")) + 1
            out.append((n, ShellError("BAD_CONFIG", f"byte 0x{piece[e.start]:02x} is not UTF-8 text; read as \ufffd",
                                      "save the file as UTF-8", col)))
    return out

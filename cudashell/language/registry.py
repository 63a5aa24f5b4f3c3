"""One spec per command: its syntax, help, example and the CUDA call behind it. Parsing, `help`,
completion and docs/commands.md all read these specs, so they cannot disagree."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from typing import Callable

from ..errors import ShellError, usage
from .grammar import Arg, Flag, Opt, Parsed, Segment, parse_args

GROUPS = ("memory", "data", "copies", "streams", "kernels", "scripts", "session")


@dataclass(frozen=True)
class Spec:
    name: str  # one or two words: "alloc", "stream create"
    group: str
    summary: str
    example: str
    cuda: str  # the CUDA runtime (and driver) call the command stands for
    args: tuple[Arg, ...] = ()
    opts: tuple[Opt, ...] = ()
    flags: tuple[Flag, ...] = ()
    aliases: tuple[str, ...] = ()
    details: str = ""
    handler: Callable | None = field(default=None, compare=False)
    exported: bool = True  # `export c` and `explain` write C for it (False: it stands for no CUDA work)
    saved: bool = True  # `save` keeps it (False: about the session or the script, not part of the experiment)
    narrates: bool = False  # its output comes as it runs (a script, a demo): the prompt does not hold it for the pager
    echoed: bool = True  # a script's echo shows the command line (not for `say`: its text is what it prints)
    c_writer: Callable | None = field(default=None, compare=False)  # the C it stands for: see `c_writer`
    grading: str = ""  # its part in a checks file (`cudashell grade`): "section" starts a group of checks

    def syntax(self) -> str:
        parts = [self.name] + [a.usage() for a in self.args]
        parts += [f.usage() for f in self.flags] + [o.usage() for o in self.opts]
        return " ".join(parts)

    def keywords(self) -> list[str]:
        """Words that may follow the command name (for completion and highlighting)."""
        words = [c for a in self.args for c in a.choices]
        words += [w for f in self.flags for w in (f.word,) + f.aliases]
        return words + [o.keyword for o in self.opts]


REGISTRY: dict[str, Spec] = {}
_ALIASES: dict[str, str] = {}


def command(name: str, group: str, summary: str, example: str, cuda: str, *, args=(), opts=(),
            flags=(), aliases=(), details: str = "", exported: bool = True, saved: bool = True,
            narrates: bool = False, echoed: bool = True, grading: str = ""):
    """Decorator used by the handlers in `commands/`: registers the handler with its spec."""
    assert group in GROUPS, group

    def register(fn):
        spec = Spec(name, group, summary, example, cuda, tuple(args), tuple(opts), tuple(flags),
                    tuple(aliases), details, fn, exported, saved, narrates, echoed, grading=grading)
        REGISTRY[name] = spec
        for alias in aliases:
            _ALIASES[alias] = name
        return fn

    return register


def c_writer(name: str):
    """Decorator beside an exported command's handler: fn(writer, args, indent, text) writes the CUDA C the
    command stands for (`explain on`, `export c`) through `cemit.Writer`'s generic services, so a command's C
    lives with the command and the writer stays generic. Placed after the handler's `@command`."""

    def register(fn):
        REGISTRY[name] = replace(REGISTRY[name], c_writer=fn)
        return fn

    return register


def load() -> None:
    """Import the handlers (once): the CLI does it while the GPU worker starts, the rest on first use."""
    if not REGISTRY:
        from .. import commands  # noqa: F401  (importing it registers the handlers)


WATCHERS: list[Callable] = []


def watcher(fn: Callable) -> Callable:
    """Decorator for what looks at every command after it ran — a lesson's check, the advice rules:
    fn(session, backend, command, result, error) -> list of Results, shown after the command's own output.
    `command` is the parsed Command, or None when the line did not parse."""
    WATCHERS.append(fn)
    return fn


def watchers() -> list[Callable]:
    load()
    return WATCHERS


_SORTED: list = [(), []]  # the registry's specs as they were last sorted, and their order


def specs() -> list[Spec]:
    """Every spec, grouped in GROUPS order then by name. Sorted again only when the registry changed (`help` asks
    on every call; comparing the specs, the same objects, costs far less than sorting them)."""
    load()
    now = tuple(REGISTRY.values())
    if now != _SORTED[0]:
        _SORTED[:] = [now, sorted(now, key=lambda s: (GROUPS.index(s.group), s.name))]
    return list(_SORTED[1])


def command_words() -> list[str]:
    load()
    return sorted(set(REGISTRY) | set(_ALIASES))


def spec_of(words: list[str]) -> Spec | None:
    """The command a line's first words name (two-word commands first), or None."""
    return (lookup(" ".join(words[:2])) if len(words) > 1 else None) or (lookup(words[0]) if words else None)


def lookup(name: str) -> Spec | None:
    load()
    name = name.lower()
    return REGISTRY.get(_ALIASES.get(name, name))


@dataclass
class Command:
    spec: Spec
    args: Parsed
    segment: Segment


def resolve(segment: Segment) -> tuple[Spec, int]:
    """The spec a command's first word(s) name, and how many words they took."""
    toks = segment.tokens
    first = toks[0].text.lower()
    if len(toks) > 1:
        two = lookup(f"{first} {toks[1].text.lower()}")
        if two:
            return two, 2
    one = lookup(first)
    if one:
        return one, 1
    subs = sorted(n.split()[1] for n in REGISTRY if n.startswith(first + " "))
    if subs:
        where = toks[1].col if len(toks) > 1 else toks[0].end + 2
        got = f"'{toks[1].text}'" if len(toks) > 1 else "nothing"
        raise usage(f"'{first}' takes {' | '.join(subs)}, got {got}", where,
                    f"e.g. {lookup(first + ' ' + subs[0]).example}")
    word = toks[0].text
    close = difflib.get_close_matches(first, command_words(), n=1, cutoff=0.6) if len(word) < 64 else []
    hint = f"did you mean `{close[0]}`?" if close else "type `help` for the list of commands"
    shown = word if len(word) <= 60 else f"{word[:40]}… ({len(word)} characters)"  # an error line stays a line
    raise ShellError("UNKNOWN_COMMAND", f"unknown command '{shown}'", hint, toks[0].col)


_PARSED: dict[tuple[str, int, int], Command] = {}


def parse_segment(segment: Segment) -> Command:
    """Parsing is pure, so a line seen before (a script's loop) reuses its parse; errors are not cached.
    The key is the line and the command's place in it: strings keep their hash, tuples of tokens do not."""
    key = (segment.line, segment.tokens[0].col, segment.end)
    cmd = _PARSED.get(key)
    if cmd is None:
        if len(_PARSED) > 4096:
            _PARSED.clear()
        cmd = _PARSED[key] = _parse(segment)
    return cmd


def _parse(segment: Segment) -> Command:
    spec, used = resolve(segment)
    try:
        parsed = parse_args(segment.tokens[used:], segment.line, segment.end, spec.args, spec.opts,
                            spec.flags)
    except ShellError as e:
        if e.hint is None:
            e.hint = f"usage: {spec.syntax()}"
        raise
    return Command(spec, parsed, segment)

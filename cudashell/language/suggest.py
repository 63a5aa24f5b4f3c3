"""What may come next on a line, from the registry and the session: the pure engine under the REPL's
completer (like pgcli's sqlcompletion), testable without a terminal."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ShellError
from .argkinds import Typing
from .grammar import Arg, tokenize, walk
from .registry import REGISTRY, command_words, lookup


@dataclass(frozen=True)
class Suggestion:
    text: str
    start: int  # negative: how many characters before the cursor the completion replaces
    meta: str = ""


def _current_command(text: str) -> str:
    """The text of the command the cursor is in (after the last `;` outside quotes and <<< >>>)."""
    try:
        toks = tokenize(text)
    except ShellError:
        return text.rsplit(";", 1)[-1]
    last_sep = None
    pos = 0
    for t in toks:
        if t == ";":
            idx = text.find(";", pos)
            last_sep = idx
            pos = idx + 1
        else:
            pos = t.end
    return text[last_sep + 1:] if last_sep is not None else text


def _words(text: str) -> tuple[list[str], str]:
    """Complete words before the cursor, and the partial word under it."""
    try:
        toks = [t.text for t in tokenize(text) if t != ";"]
    except ShellError:
        toks = text.split()
    if text and not text[-1].isspace() and toks:
        return toks[:-1], toks[-1]
    return toks, ""


def _values_for(arg: Arg, session, words: list[str], partial: str, index: int = 0) -> list[tuple[str, str]]:
    """What completion offers for a value of `arg`: the spec's own offer (Arg.complete), else its choices, else its
    kind's offer, with the words the spec adds (Arg.also)."""
    if arg.complete is not None:
        return arg.complete(session, words, index)
    if arg.choices:
        return [(c, arg.name.lower()) for c in arg.choices] + list(arg.also)
    return arg.kind.offer(arg, Typing(session, words, partial, command_words)) + list(arg.also)


def suggest(text: str, session) -> list[Suggestion]:
    """Completions for the text before the cursor."""
    current = _current_command(text)
    words, partial = _words(current)
    low = partial.lower()
    if not words:
        firsts = sorted({n.split()[0] for n in REGISTRY} | set(command_words()))
        return [Suggestion(w, -len(partial), _summary(w)) for w in firsts if w.startswith(low)]
    spec = lookup(f"{words[0]} {words[1]}") if len(words) > 1 else None
    used = 2 if spec else 1
    spec = spec or lookup(words[0])
    subs = [] if used == 2 or len(words) > 1 else [  # `device ` is a command and the start of `device use`
        Suggestion(s, -len(partial), _summary(f"{words[0]} {s}"))
        for s in sorted(n.split()[1] for n in REGISTRY if n.startswith(words[0].lower() + " ")) if s.startswith(low)]
    if spec is None:
        return subs
    candidates = _next(spec, words[used:], session, words, partial)
    return subs + [Suggestion(t, -len(partial), m) for t, m in candidates if t.lower().startswith(low) and t != partial]


def _summary(name: str) -> str:
    spec = lookup(name)
    return spec.summary if spec else ""


def _next(spec, rest: list[str], session, words: list[str], partial: str) -> list[tuple[str, str]]:
    """Ask the parser's walk (grammar.walk) where the cursor is, then offer what fits there."""
    seen, at, more = set(), None, True
    for step in walk(rest, [False] * len(rest), spec.args, spec.opts, spec.flags):
        if step.what == "opt":
            if step.index + 1 == len(rest):  # the cursor is at this option's value
                return _values_for(step.item.arg, session, words, partial)
            seen.add(step.item.keyword)
        elif step.what == "flag":
            seen.add(step.item)
        elif step.what == "rest":
            return []
        elif step.what == "extra":  # no argument is left to fill: flags and options still fit
            more = False
        elif step.what == "next":
            at = step
    out: list[tuple[str, str]] = []
    if more and at is not None and at.item is not None:
        for arg in spec.args[spec.args.index(at.item):]:
            out += _values_for(arg, session, words, partial, at.count if arg is at.item else 0)
            if not arg.optional:  # a required argument comes first: a flag is no answer to `alloc pinned ▌`
                return out
    out += [(f.word, "flag") for f in spec.flags if f.word not in seen]
    out += [(o.keyword, o.arg.name) for o in spec.opts if o.keyword not in seen]
    first = rest[0].lower() if rest else ""
    only = {**{f.word: f.only_with for f in spec.flags if f.only_with},  # what fits the first argument typed
            **{o.keyword: o.only_with for o in spec.opts if o.only_with}}
    return [(t, m) for t, m in out if t not in only or first in only[t]]

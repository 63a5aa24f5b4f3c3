"""Text to commands: tokens with columns, `;` and `#`, sizes, and matching tokens against a command's
syntax. Pure: no CUDA, no terminal, no session — so the parser, completion and highlighting agree."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Callable

from ..errors import ShellError, usage
from .argkinds import WORD, ArgKind, kind_named

# ---------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Token:
    text: str
    col: int  # 1-based column of the token's first character in the line
    end: int  # 0-based index just past the token in the line
    quoted: bool = False


@dataclass(frozen=True)
class Segment:
    """One command's tokens; `line` is kept so `rest`-of-line arguments keep their spacing."""

    tokens: tuple[Token, ...]
    line: str
    end: int  # 0-based index where this command ends in the line

    @cached_property  # the shell asks several times a command (report, history, errors); the segment never changes
    def text(self) -> str:
        if not self.tokens:
            return ""
        return self.line[self.tokens[0].col - 1 : self.end].strip()


_TOKEN = re.compile(r"""\s*(?:(?P<opensrc><<<)|(?P<sep>;)|(?P<comment>\#)"""
                    r"""|(?P<q>["'])(?P<quoted>.*?)(?P=q)|(?P<open>["'])|(?P<word>[^\s;#"'][^\s;#]*))""", re.S)
_MARK = re.compile(r"<<<|>>>")


def _block_end(line: str, pos: int) -> int | None:
    """Where the block opened by the <<< before `pos` closes (the index of its >>>), counting the blocks and the
    kernel launches (`k<<<g, b>>>`) inside it, so that `repeat 3 <<< memcpy batch <<< … >>> stream s >>>` nests;
    None when it never does."""
    depth = 1
    for m in _MARK.finditer(line, pos):
        depth += 1 if m.group() == "<<<" else -1
        if depth == 0:
            return m.start()
    return None


def tokenize(line: str) -> list[Token | str]:
    """Tokens of one line; a `;` outside quotes comes back as the string ';'. `#` starts a comment."""
    out: list[Token | str] = []
    pos = 0
    while pos < len(line):
        m = _TOKEN.match(line, pos)
        if m is None or m.end() == pos:  # only whitespace was left
            break
        pos = m.end()
        if m.group("opensrc"):  # CUDA C or commands between <<< and >>>: `;` and `#` are their own
            end = _block_end(line, pos)
            if end is None:
                raise usage("unterminated <<<", m.start("opensrc") + 1, "end the source with >>>")
            out.append(Token(line[pos:end].strip(), m.start("opensrc") + 1, end + 3, quoted=True))
            pos = end + 3
        elif m.group("sep"):
            out.append(";")
        elif m.group("comment"):
            break
        elif m.group("open"):
            raise usage("unterminated quote", m.start("open") + 1, f"close it with {m.group('open')}")
        elif m.group("q"):
            out.append(Token(m.group("quoted"), m.start("q") + 1, m.end(), quoted=True))
        else:
            out.append(Token(m.group("word"), m.start("word") + 1, m.end()))
    return out


@lru_cache(maxsize=4096)
def split_commands(line: str) -> tuple[Segment, ...]:
    """The non-empty commands of a line, in order (blank lines and comments give none)."""
    segments: list[Segment] = []
    current: list[Token] = []
    if "\0" in line:  # no path, name or number holds one, and the OS refuses it in a path
        raise usage("a NUL byte in the command", line.index("\0") + 1, "remove it")
    for tok in tokenize(line):
        if tok == ";":
            if current:
                segments.append(Segment(tuple(current), line, current[-1].end))
            current = []
        else:
            current.append(tok)
    if current:
        segments.append(Segment(tuple(current), line, current[-1].end))
    return tuple(segments)


# ---------------------------------------------------------------- syntax


@dataclass(frozen=True)
class Arg:
    """A positional argument. Its `kind` (an ArgKind, or the name of one in argkinds.KINDS) converts its words,
    says what completion offers and whether grading confines it: buffer, part (a buffer or a byte range of one:
    `p0[1MB:+64KB]`), stream, size, count, dim3 (a launch shape: `16,16`), file, rest (the raw remainder), …"""

    name: str
    kind: ArgKind = WORD
    choices: tuple[str, ...] = ()
    optional: bool = False
    many: bool = False
    accepts: Callable | None = field(default=None, compare=False)  # (buffer, words typed) -> bool: completion
    noun: str = ""  # what a choice names, for messages: alloc's KIND is "memory" ("pinned memory")
    # completion's own offer where the kind's is not enough: (session, words typed, value's index) -> [(text, why)]
    complete: Callable | None = field(default=None, compare=False)
    also: tuple[tuple[str, str], ...] = ()  # words offered besides the kind's values (`free all`)

    def __post_init__(self):
        if isinstance(self.kind, str):  # a name: resolved now, so a misspelt one fails where the command is declared
            object.__setattr__(self, "kind", kind_named(self.kind))

    def buffers(self, value) -> list[str]:
        """The buffer names a value of this argument holds (a part's name; each of a repeated argument)."""
        if self.kind.buffer is None:
            return []
        return [self.kind.buffer(v) for v in (value if isinstance(value, list) else [value])]

    def label(self) -> str:
        """The argument as help writes it: its name, or its kind's label (a shape's `X[,Y[,Z]]`)."""
        return self.kind.label or self.name

    def usage(self) -> str:
        core = "|".join(self.choices) if self.choices else self.label()
        if self.many:
            core += "…"
        return f"[{core}]" if self.optional else core


@dataclass(frozen=True)
class Opt:
    """`keyword VALUE`, e.g. `stream S`, `as NAME`, `dtype T`."""

    keyword: str
    arg: Arg
    only_with: tuple[str, ...] = ()  # as Flag.only_with (the parser refuses it with another value)
    needs: str = ""  # a flag it makes sense only with (memcpy's `stream` needs `async`)

    def usage(self) -> str:
        return f"[{self.keyword} {self.arg.label()}]"


@dataclass(frozen=True)
class Flag:
    """A flag word. `only_with`: the values of the first argument it goes with (alloc's kind): the parser refuses it
    with any other, and completion offers it only there. `excludes`: flags it cannot be given with."""

    word: str
    aliases: tuple[str, ...] = ()
    only_with: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()

    def usage(self) -> str:
        return "[" + "|".join((self.word,) + self.aliases) + "]"


@dataclass
class Parsed:
    """The arguments of one command: values by name, flags as a set, and where each came from."""

    values: dict = field(default_factory=dict)
    flags: set = field(default_factory=set)
    cols: dict = field(default_factory=dict)
    many_cols: dict = field(default_factory=dict)  # the column of each value of a repeated argument
    end_col: int = 1
    names: frozenset = frozenset()  # the arguments the command declares: asking for another is a bug

    def _declared(self, name: str) -> None:
        if self.names and name not in self.names:
            raise KeyError(f"the command has no argument {name!r} (it has {', '.join(sorted(self.names))})")

    def get(self, name: str, default=None):
        if name not in self.names and self.names:  # the check inline: a handler asks a dozen times a command
            self._declared(name)
        return self.values.get(name, default)

    def col(self, name: str) -> int:
        if name not in self.names and self.names:
            self._declared(name)
        return self.cols.get(name, self.end_col)


def convert(arg: Arg, tok: Token):
    """Turn a token into its argument's value: one of its choices, else what its kind makes of it; raise USAGE with
    the token's column."""
    text, col = tok.text, tok.col
    if arg.choices:
        low = text.lower()
        if low not in arg.choices:
            close = difflib.get_close_matches(low, arg.choices, n=1)
            raise usage(f"expected {' or '.join(arg.choices)}, got '{text}'", col,
                        f"did you mean `{close[0]}`?" if close else None)
        return low
    return arg.kind.convert(text, col)


def keyword_typo(word: str, opts: tuple[Opt, ...], flags: tuple[Flag, ...]) -> str | None:
    """The flag or option keyword of a command that `word` is a likely typo of (`asynk` → async, `strem` → stream,
    `mappd` → mapped), else None. A word that is one of them is not a typo."""
    words = [f.word for f in flags] + [a for f in flags for a in f.aliases] + [o.keyword for o in opts]
    low = word.lower()
    if low in words or len(low) < 3:
        return None
    close = difflib.get_close_matches(low, words, n=1, cutoff=0.75)
    return close[0] if close else None


def _converted(arg: Arg, tok: Token, opts, flags):
    """`convert`, but a word that fits no value of the argument and is a keyword's typo says so (`memcpy p d
    asynk` meant `async`, not a size)."""
    try:
        return convert(arg, tok)
    except ShellError as e:
        typo = keyword_typo(tok.text, opts, flags)
        if typo is None:
            raise
        raise usage(f"unexpected '{tok.text}': not a {arg.name} nor a word the command takes", tok.col,
                    f"did you mean `{typo}`?") from e


@dataclass(frozen=True)
class Step:
    """One word of a command as the parser reads it: `what` is "opt" (a keyword: its value is the next word),
    "flag", "arg" (a value of `item`, an Arg; `count` values of it came before), "rest" (the rest of the line is
    `item`'s) or "extra" (no argument takes it)."""

    what: str
    item: object
    index: int
    count: int = 0


def walk(words: list[str], quoted: list[bool], args: tuple[Arg, ...], opts: tuple[Opt, ...],
         flags: tuple[Flag, ...]):
    """The parser's reading of a command's words, a Step at a time, and last the Arg the next word would fill (or
    None): parsing converts what it reads, completion asks where the cursor is — one walk, so they cannot
    disagree. Keywords and flag words count only unquoted; an optional choice argument is skipped when the word
    is not one of its choices."""
    opt_by_kw = {o.keyword: o for o in opts}
    flag_by_word = {w: f.word for f in flags for w in (f.word,) + f.aliases}
    pi, i, count = 0, 0, 0
    while i < len(words):
        low = words[i].lower()
        if not quoted[i] and low in opt_by_kw:
            yield Step("opt", opt_by_kw[low], i)
            i += 2
            continue
        if not quoted[i] and low in flag_by_word:
            yield Step("flag", flag_by_word[low], i)
            i += 1
            continue
        while pi < len(args) and args[pi].choices and args[pi].optional and low not in args[pi].choices:
            pi, count = pi + 1, 0
        if pi >= len(args):
            yield Step("extra", None, i)
            return
        arg = args[pi]
        if arg.kind.rest:
            yield Step("rest", arg, i)
            return
        yield Step("arg", arg, i, count)
        if arg.many:
            count += 1
        else:
            pi, count = pi + 1, 0
        i += 1
    yield Step("next", args[pi] if pi < len(args) else None, i, count)


def parse_args(tokens: tuple[Token, ...], line: str, end: int, args: tuple[Arg, ...],
               opts: tuple[Opt, ...], flags: tuple[Flag, ...]) -> Parsed:
    """Match the tokens after the command words against positional args, `keyword VALUE` options
    and flag words (in any order). Keywords, choices and flags are case-insensitive."""
    p = Parsed(end_col=(tokens[-1].end + 2) if tokens else end + 2,
               names=frozenset([a.name for a in args] + [o.arg.name for o in opts] + [f.word for f in flags])
               or frozenset({""}))
    for step in walk([t.text for t in tokens], [t.quoted for t in tokens], args, opts, flags):
        if step.what == "next":
            break
        tok = tokens[step.index]
        if step.what == "opt":
            opt = step.item
            if step.index + 1 >= len(tokens):
                wanted = opt.arg.kind.label or f"a {opt.arg.name}"
                raise usage(f"'{opt.keyword}' needs {wanted}", tok.end + 2)
            if opt.arg.name in p.values:
                raise usage(f"'{opt.keyword}' given twice", tok.col)
            val_tok = tokens[step.index + 1]
            p.values[opt.arg.name] = convert(opt.arg, val_tok)
            p.cols[opt.arg.name] = val_tok.col
        elif step.what == "flag":
            p.flags.add(step.item)
            p.cols.setdefault(step.item, tok.col)
        elif step.what == "extra":
            typo = keyword_typo(tok.text, opts, flags)
            raise usage(f"unexpected '{tok.text}'", tok.col, f"did you mean `{typo}`?" if typo else None)
        elif step.what == "rest":
            single_quoted = tok.quoted and step.index == len(tokens) - 1
            p.values[step.item.name] = tok.text if single_quoted else line[tok.col - 1: end].strip()
            p.cols[step.item.name] = tok.col
        else:
            arg, value = step.item, _converted(step.item, tok, opts, flags)
            if arg.many:
                p.values.setdefault(arg.name, []).append(value)
                p.cols.setdefault(arg.name, tok.col)
                p.many_cols.setdefault(arg.name, []).append(tok.col)
            else:
                p.values[arg.name] = value
                p.cols[arg.name] = tok.col
    for arg in args:
        if not arg.optional and arg.name not in p.values:
            raise usage(f"missing {arg.name}", p.end_col)
    _check_combinations(p, args, opts, flags)
    return p


def _check_combinations(p: Parsed, args, opts, flags) -> None:
    """What the spec says goes together: a flag or option only with some values of the first argument, flags that
    exclude each other. Refused here, so no handler checks it again."""
    first = args[0] if args else None
    value = p.values.get(first.name) if first else None
    what = f"{value} {first.noun}".strip() if first else ""
    for word, only, col in [(f.word, f.only_with, p.cols.get(f.word)) for f in flags if f.word in p.flags] + \
                           [(o.keyword, o.only_with, p.cols.get(o.arg.name)) for o in opts if o.arg.name in p.values]:
        if only and value not in only:
            raise usage(f"'{word}' does not apply to {what}", col,
                        f"'{word}' goes with {' or '.join(only)}" + (f" {first.noun}" if first.noun else ""))
    for o in opts:
        if o.needs and o.arg.name in p.values and o.needs not in p.flags:
            raise usage(f"'{o.keyword}' applies only with '{o.needs}'", p.cols.get(o.arg.name), f"add `{o.needs}`")
    for f in flags:
        clash = [x for x in f.excludes if f.word in p.flags and x in p.flags]
        if clash:
            raise usage(f"'{f.word}' and '{clash[0]}' exclude each other: give one", p.cols.get(f.word))

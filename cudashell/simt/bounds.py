"""What a source may cost the front end, checked before the costly part runs: the files it includes (4 MiB with the
source), what its macros expand to (a 500-byte macro bomb would otherwise fill the host's memory for minutes), and
how deep its expressions and statements nest. libclang's parser and the IR builder and interpreter above it recurse
once a level: 20,000 terms of `1+1+…` crash clang's process (a segfault: the shell would go with it), and a few
thousand exhaust Python's stack. So the preprocessed text is measured first, by its tokens, in linear time."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ShellError
from ..model.inputs import SOURCE_LIMIT, read_capped
from ..sizes import format_size
from .compile_error import CompileError

EXPANSION_LIMIT = 200_000  # tokens all macro expansions of one source may make: the largest here make 5,500, and
# a macro bomb is stopped in half a second
MAX_NESTING = 256  # levels of brackets and operators one expression or statement may nest (clang's own limit on
# brackets, -fbracket-depth, is 256 too); the interpreter follows some 400
COMPLEX_HINT = "split the expression into statements with variables in between, or write a loop"

_TOKENS = re.compile(r"""
    (?P<skip>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|//[^\n]*|/\*.*?\*/|(?:\d|\.\d)(?:[eEpP][+-]|[\w.])*|\#[^\n]*)
  | (?P<open>[(\[{])
  | (?P<close>[)\]}])
  | (?P<reset>[,;])
  | (?P<else>\belse\b)
  | (?P<op>\b(?:if|for|while|do|switch|return|sizeof)\b|->|[-+*/%&|^!~<>=?:.]+)
""", re.VERBOSE | re.DOTALL)


def too_deep(text: str) -> int | None:
    """Where the syntax tree of `text` may first nest deeper than MAX_NESTING (an offset), or None: an upper bound,
    from the tokens alone. Each open bracket is a level; within one, each operator or keyword since the last `,`
    or `;` may be one more (`1+1+1` is two levels of binary operators, `- - x` two of unary ones), a closed group
    one operand's level, and each `else` of an else-if chain one level under the `if` before it."""
    ops = [0]  # per open bracket: operators (and closed groups) in its current item
    chain = [0]  # per open bracket: the else-if levels its current statement is under
    carried = 0  # the chain of the statement that just ended, for an `else` that continues it
    total = 0  # sum(ops) + sum(chain), kept as they change
    for m in _TOKENS.finditer(text):
        kind = m.lastgroup
        if kind == "skip":
            continue
        if kind == "open":
            ops.append(0)
            chain.append(0)
        elif kind == "close":
            if len(ops) > 1:
                total -= ops.pop() + chain.pop()
            if m.group() == "}":  # a block ends a statement
                kind = "reset"
            else:  # a call, a cast or a parenthesised operand: one level under what follows
                ops[-1] += 1
                total += 1
        elif kind == "else":
            total += carried + 1 - chain[-1]
            chain[-1] = carried + 1
        elif kind == "op":  # a run of operator characters (`!!!x`, `- -x` without spaces) may be as many levels
            n = 1 if m.group()[0].isalpha() else len(m.group())
            ops[-1] += n
            total += n
        if kind == "reset":
            carried = chain[-1]
            total -= ops[-1] + chain[-1]
            ops[-1] = chain[-1] = 0
        if len(ops) - 1 + total > MAX_NESTING:
            return m.start()
    return None


def refuse_deep(text: str, where: list) -> None:
    """SOURCE_TOO_COMPLEX, naming the file and line, for a source nested deeper than MAX_NESTING."""
    offset = too_deep(text)
    if offset is None:
        return
    line = text.count("\n", 0, offset)
    file, lineno = where[line] if line < len(where) else ("the source", line + 1)
    col = offset - text.rfind("\n", 0, offset)
    raise CompileError("SOURCE_TOO_COMPLEX", f"expression nesting too deep: more than {MAX_NESTING} levels of "
                       "operators, brackets and statements (clang's and the simulator's limit)", (file, lineno, col),
                       COMPLEX_HINT)


def spend_expansion(spent: int, tokens: int, at: tuple) -> int:
    """What a source's macros have expanded to so far, with `tokens` more; SOURCE_TOO_COMPLEX past the limit, naming
    the line (file, line) whose macro use went past it."""
    spent += tokens
    if spent > EXPANSION_LIMIT:
        raise CompileError("SOURCE_TOO_COMPLEX", f"macros expand to more than {EXPANSION_LIMIT:,} tokens (a macro "
                           "that uses another several times, many levels deep, multiplies at each level)",
                           (at[0], at[1], 1), "expand fewer times: a loop, or a __device__ function, does it once")
    return spent


def read_include(path: str, spent: int) -> tuple[str, int]:
    """The text of a file an #include names, and the bytes the source and its includes have taken with it: capped
    as a source is (4 MiB together); a device or a FIFO is refused (NOT_A_FILE). A missing file raises OSError,
    which the preprocessor takes as "look in the next folder"."""
    try:
        raw = read_capped(Path(path), "source")
    except ShellError as e:
        raise CompileError(e.code, e.message) from None
    spent += len(raw)
    if spent > SOURCE_LIMIT:
        raise CompileError("INPUT_TOO_LARGE", f"the source and the files it includes come to more than "
                           f"{format_size(SOURCE_LIMIT)} (at #include {Path(path).name!r})")
    return raw.decode("utf-8-sig"), spent

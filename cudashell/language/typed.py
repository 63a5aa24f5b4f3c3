"""What the prompt does to a typed or pasted text before it runs, as IPython's input transformers and bash's
history expansion do: a transcript's prompts are taken off (and its output lines left out), and `!!`, `!N`,
`!-N`, `!PREFIX` name earlier commands. Pure: no terminal, no backend."""

from __future__ import annotations

import re

from ..errors import ShellError

PROMPT = re.compile(r"^\s*(?:cush>|\.\.\.>)(?: |$)")


def strip_prompts(text: str) -> str:
    """A paste from the README or a transcript (`cush> alloc …`, `  ...> …`): the prompts go, and the lines
    without one — what the shell printed — are left out. Text with no prompt in it is returned as it is."""
    lines = text.split("\n")
    if not any(PROMPT.match(line) for line in lines):
        return text
    return "\n".join(PROMPT.sub("", line, count=1) for line in lines if PROMPT.match(line))


REFERENCE = re.compile(r"^(\s*)!(!|-?\d+|[A-Za-z][\w-]*)(.*)$", re.S)


def expand_history(line: str, history: list[str]) -> str | None:
    """The line with a leading history reference replaced by the command it names (`!! count 8` → the last
    command, then ` count 8`); None when the line does not start with one. `history` is oldest first, numbered
    from 1 as `history` lists it."""
    m = REFERENCE.match(line)
    if m is None:
        return None
    lead, ref, rest = m.groups()
    return lead + _recalled(ref, history) + rest


def _recalled(ref: str, history: list[str]) -> str:
    if not history:
        raise ShellError("NO_SUCH_HISTORY", f"!{ref}: nothing has run yet in this session", "`history` lists what has")
    span = f"1–{len(history)}" if len(history) > 1 else "1"
    if ref == "!":
        return history[-1]
    if ref.lstrip("-").isdigit():
        n = int(ref)
        index = n - 1 if n > 0 else len(history) + n
        if n == 0 or not 0 <= index < len(history):
            raise ShellError("NO_SUCH_HISTORY", f"!{ref}: there is no command {ref} in the history ({span})",
                             "`history` lists them with their numbers")
        return history[index]
    for text in reversed(history):
        if text.startswith(ref):
            return text
    raise ShellError("NO_SUCH_HISTORY", f"!{ref}: no command in the history starts with `{ref}`",
                     "`history` lists them")

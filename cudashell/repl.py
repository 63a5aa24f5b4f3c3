"""The interactive shell on prompt_toolkit: input (completion, highlighting, validation, history, toolbar)
kept apart from evaluation, which is Shell.execute. Input and output are injectable for tests."""

from __future__ import annotations

import os
import shutil
import sys
from functools import lru_cache

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.lexers import Lexer
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.styles import Style
from prompt_toolkit.validation import ValidationError, Validator

from . import config
from .commands.checks import pinned_bytes
from .errors import ShellError
from .grammar import format_size, parse_size, split_commands, tokenize
from .registry import REGISTRY, lookup, parse_segment, specs
from .suggest import suggest

STYLES = {
    "default": Style.from_dict({"command": "ansicyan bold", "keyword": "ansigreen", "number": "ansimagenta",
                                "name": "ansiyellow", "error": "ansired underline", "comment": "ansibrightblack",
                                "bottom-toolbar": "bg:#222222 #aaaaaa"}),
    "mono": Style.from_dict({"command": "bold", "error": "underline", "bottom-toolbar": "reverse"}),
}


class ShellCompleter(Completer):
    def __init__(self, shell):
        self.shell = shell

    def get_completions(self, document, complete_event):
        for s in suggest(document.text_before_cursor, self.shell.session):
            yield Completion(s.text, s.start, display_meta=s.meta)


class ShellLexer(Lexer):
    """Colours from the registry: known command, keyword, size/number, buffer name, unknown word."""

    def __init__(self, shell):
        self.shell = shell

    def lex_document(self, document: Document):
        def line(lineno: int):
            text = document.lines[lineno]
            try:
                toks = tokenize(text)
            except ShellError:
                return [("", text)]
            out, pos, first = [], 0, True
            for t in toks:
                if t == ";":
                    idx = text.index(";", pos)
                    out += [("", text[pos:idx + 1])]
                    pos, first = idx + 1, True
                    continue
                start = t.col - 1
                out.append(("", text[pos:start]))
                word = text[start:t.end]
                out.append((self._style(t.text, first), word))
                pos, first = t.end, False
            if pos < len(text):
                rest = text[pos:]
                out.append(("class:comment" if rest.lstrip().startswith("#") else "", rest))
            return out

        return line

    def _style(self, word: str, first: bool) -> str:
        low = word.lower()
        if first:
            return "class:command" if lookup(low) or any(n.startswith(low + " ") for n in REGISTRY) \
                else "class:error"
        if word in self.shell.session.buffers or word in self.shell.session.streams:
            return "class:name"
        if low in _keywords():
            return "class:keyword"
        try:
            parse_size(word)
            return "class:number"
        except ShellError:
            return ""


@lru_cache(maxsize=1)
def _keywords() -> frozenset:
    return frozenset({w for s in specs() for w in s.keywords()} | {n.split()[-1] for n in REGISTRY if " " in n})


class ShellValidator(Validator):
    """Marks a malformed line at its column while typing, before Enter."""

    def validate(self, document):
        text = document.text
        try:
            for seg in split_commands(text):
                if seg.tokens[-1].text != "?":
                    parse_segment(seg)
        except ShellError as e:
            col = min(max((e.col or 1) - 1, 0), len(text))
            raise ValidationError(cursor_position=col, message=f"{e.code}: {e.message}") from None


def toolbar(shell) -> str:
    s, b = shell.session, shell.backend
    pinned = pinned_bytes(s)
    return (f" {b.name} · {b.info.name} · {len(s.buffers)} buffers · pinned {format_size(pinned)} · "
            f"device {format_size(s.bytes_in_use('device'))} · default stream 0 · time {s.settings['time']} · "
            f"explain {s.settings['explain']} · F1 help ")


def key_bindings(shell) -> KeyBindings:
    kb = KeyBindings()

    @kb.add("f1")
    def _(event):
        words = event.current_buffer.document.text_before_cursor.split()
        topic = " ".join(words[:2]) if words and lookup(" ".join(words[:2])) else (words[0] if words else "")
        run_in_terminal(lambda: shell.execute(f"help {topic}".strip()))

    return kb


class ColorErrors:
    """Writes errors in red on a terminal (not when NO_COLOR is set)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        self.stream.write(f"\x1b[31m{text.rstrip()}\x1b[0m\n" if text.strip() else text)

    def flush(self):
        self.stream.flush()


def use_color(setting: str) -> bool:
    if setting == "always":
        return True
    if setting == "never" or "NO_COLOR" in os.environ:
        return False
    return sys.stdout.isatty()


def make_session(shell, settings: dict, input=None, output=None) -> PromptSession:
    history = InMemoryHistory()
    if input is None:  # a real terminal keeps its history in the XDG state dir
        try:
            config.state_dir().mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(config.state_dir() / "history"))
        except OSError:
            pass
    return PromptSession(
        completer=ShellCompleter(shell), lexer=ShellLexer(shell), validator=ShellValidator(),
        validate_while_typing=True, auto_suggest=AutoSuggestFromHistory(), history=history,
        complete_while_typing=True, bottom_toolbar=lambda: toolbar(shell), key_bindings=key_bindings(shell),
        style=STYLES.get(settings.get("theme"), STYLES["default"]), enable_history_search=False,
        color_depth=None if use_color(settings.get("color", "auto")) else _mono(),
        input=input, output=output)


def _mono():
    from prompt_toolkit.output import ColorDepth

    return ColorDepth.MONOCHROME


def ask_abandon(what: str, waited: float) -> bool:
    """Ctrl-C while the GPU has not answered: give it up (the session comes back with `reset`), or wait on."""
    from prompt_toolkit.shortcuts import confirm

    try:
        return confirm(f"\nthe GPU has not finished {what} after {waited:.1f} s. Give the GPU up "
                       "(its queued work is lost; `reset` then rebuilds the session)?")
    except (KeyboardInterrupt, EOFError):
        return True


def repl(shell, banner: str, settings: dict | None = None, input=None, output=None) -> int:
    settings = settings or {}
    session = make_session(shell, settings, input, output)
    if use_color(settings.get("color", "auto")) and input is None:
        shell.err = ColorErrors(shell.err)
    info = shell.backend.info
    shell.out.write(f"{banner}\n{info.name} (compute {info.compute_capability}) — type `help` for the commands, "
                    "Tab to complete, `quit` or Ctrl-D to leave\n")
    if input is None:
        shell.backend.ask_abandon = ask_abandon
    while not shell.quitting:
        shell.session.settings["width"] = shutil.get_terminal_size().columns
        try:
            line = session.prompt("cush> ")
        except KeyboardInterrupt:  # Ctrl-C at the prompt cancels the input
            continue
        except EOFError:
            break
        try:  # Shell.execute reports its own failures; this guard is for the loop itself
            shell.execute(line)
        except KeyboardInterrupt:
            continue
        except Exception as e:
            if shell.debug:
                raise
            shell._write(shell.err, f"INTERNAL_ERROR: {type(e).__name__}: {e} — hint: run with --debug for the traceback")
    left = shell.close()
    shell.out.write(("released: " + ", ".join(left) if left else "nothing was left allocated") + "\n")
    return 0

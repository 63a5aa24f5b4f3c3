"""The interactive shell on prompt_toolkit: input (completion, highlighting, validation, history, toolbar)
kept apart from evaluation, which is Shell.execute. Input and output are injectable for tests; the terminal's
size, whether stdout is one, and where the history lives come from the `Environment`."""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import tempfile
from contextlib import nullcontext
from dataclasses import replace
from functools import lru_cache

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app_or_none, run_in_terminal
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.lexers import Lexer
from prompt_toolkit.styles import Style
from prompt_toolkit.validation import ValidationError, Validator

from ..errors import ShellError
from ..language.argkinds import parse_dim3
from ..language.grammar import split_commands, tokenize
from ..language.registry import REGISTRY, lookup, parse_segment, specs
from ..language.suggest import suggest
from ..language.typed import expand_history, strip_prompts
from ..model.settings import pager_argv
from ..output import files, render
from ..sizes import format_size, parse_size
from .config import DEFAULTS
from .environment import Environment, ExitStatus
from .frame import ShellOptions
from .shell import joined_source_lines

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
        """For the line the cursor is on: the lines above (a paste, a block's first line) are commands of their own."""
        for s in suggest(document.current_line_before_cursor, self.shell.session):
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
        if word in self.shell.session.buffers or word in self.shell.session.streams \
                or word.split("[")[0] in self.shell.session.buffers and word.endswith("]"):  # `p0[1MB:]`
            return "class:name"
        if low in _keywords():
            return "class:keyword"
        try:
            parse_dim3(word) if "," in word else parse_size(word)  # a size, a count or a launch shape
            return "class:number"
        except ShellError:
            return ""


@lru_cache(maxsize=1)
def _keywords() -> frozenset:
    return frozenset({w for s in specs() for w in s.keywords()} | {n.split()[-1] for n in REGISTRY if " " in n})


def open_block(text: str) -> bool:
    """A `<<<` not closed yet: Enter goes on to the next line instead of running."""
    return text.count("<<<") > text.count(">>>")


class ShellValidator(Validator):
    """Marks a malformed line at its column when Enter is pressed (not at every key: a half-typed `me` is no
    error), and keeps it to mend. A `<<<` block over lines is checked as one command; several commands on lines of
    their own (a paste) are not held back: each runs or fails on its own, as it would typed line by line."""

    def validate(self, document):
        text = document.text
        if open_block(text) or text != strip_prompts(text) or text.lstrip().startswith("!"):
            return  # a transcript's lines, and `!N` once expanded, are checked as they run
        joined = [line for _, line in joined_source_lines(text.split("\n"))]
        if len(joined) > 1:
            return  # a paste of several commands: each line runs or fails on its own, as Enter on each would
        line = joined[0] if joined else ""
        try:
            for seg in split_commands(line):
                if seg.tokens[-1].text != "?":
                    parse_segment(seg)
        except ShellError as e:
            col = min(max((e.col or 1) - 1, 0), len(text)) if "\n" not in line else 0  # a block: its first line
            hint = f" — {e.hint}" if e.hint and e.hint.startswith("did you mean") else ""  # as scripts show it
            raise ValidationError(cursor_position=col, message=fitted_error(f"{e.code}: {e.message}", hint)) from None


def fitted_error(said: str, hint: str, width: int | None = None) -> str:
    """The error under the prompt in one row of the terminal (the row does not wrap): the message shortened with
    `…` where it must be, so the `— did you mean …` at its end is never the part cut off."""
    if width is None:
        app = get_app_or_none()
        width = app.output.get_size().columns if app is not None else 80
    room = width - 1 - len(hint)
    if len(said) > room:
        said = said[:max(room - 1, 12)].rstrip() + "…"
    return said + hint


def names_exist(line: str, session) -> bool:
    """Whether every buffer a line names is in the session (a line that does not parse is not judged here)."""
    try:
        for seg in split_commands(line):
            cmd = parse_segment(seg)
            for arg in cmd.spec.args:
                if arg.name in cmd.args.values and any(
                        n not in session.buffers and n != "all" for n in arg.buffers(cmd.args.get(arg.name))):
                    return False
    except ShellError:
        return True
    return True


class SessionAutoSuggest(AutoSuggestFromHistory):
    """History's suggestion, unless it names a buffer this session does not have (yesterday's `d3`)."""

    def __init__(self, shell):
        super().__init__()
        self.shell = shell

    def get_suggestion(self, buffer, document):
        found = super().get_suggestion(buffer, document)
        if found is None or not names_exist(document.text + found.text, self.shell.session):
            return None
        return found


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _total(n: int) -> str:
    """A total of buffers' sizes in the words `ls` writes each one in: `65 MiB + 64 B`, never a `65.00 MiB` that
    looks round and is not."""
    text = format_size(n)
    if ".00 " not in text:
        return text
    scale = next(s for s in (1 << 30, 1 << 20, 1 << 10) if n >= s)
    return f"{format_size(n - n % scale)} + {format_size(n % scale)}"


def toolbar(shell, width: int | None = None, env: Environment | None = None) -> str:
    """The session at a glance, in one line that fits the terminal: items are dropped from the least needed
    (the last of the list) until it fits."""
    s, b = shell.session, shell.backend
    items = [f"{b.name} · {b.info.name.split(' (')[0]}", "HELD" if s.held is not None else "",
             _plural(len(s.buffers), "buffer"), f"pinned {_total(s.pinned_bytes())}",
             f"device {_total(s.bytes_in_use('device'))}", _plural(len(s.streams), "stream") if s.streams else "",
             f"time {s.settings['time']}", f"explain {s.settings['explain']}", "F1 help"]
    items = [i for i in items if i]
    width = width or (env or Environment()).terminal_size().columns
    while len(items) > 1 and len(" " + " · ".join(items) + " ") > width:  # F1 help goes last: it says where the rest is
        items.pop(-1 if items[-1] != "F1 help" or len(items) < 3 else -2)
    return (" " + " · ".join(items) + " ")[:width]


def trim_history(path, keep: int) -> None:
    """Keep the newest `keep` entries of a prompt_toolkit history file (the `history_size` setting): under the
    history's lock (another shell may be adding to it) and replaced whole, so a full disk leaves it as it was."""
    try:
        with files.locked(path):
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            starts = [i for i, line in enumerate(lines)
                      if line.startswith("# ") and (i == 0 or not lines[i - 1].strip())]
            if len(starts) > keep:
                files.replace_file(path, "".join(lines[starts[-keep] if keep else len(lines):]))
    except (OSError, UnicodeDecodeError, ShellError):
        pass


KEYS = (  # the F1 screen: what the prompt's keys do (prompt_toolkit's emacs keys, and ours)
    ("Enter", "run the line (checked first: an error is marked at its column, the line kept to mend)"),
    ("Alt-Enter, Esc Enter", "run a line the check refuses, to see the shell's own error"),
    ("Tab", "complete: commands, buffers, flags, sizes of parts, files"),
    ("→ or Ctrl-E", "take the greyed suggestion from history"),
    ("↑ ↓, Ctrl-R", "walk or search the history (`history` lists it; `!N`, `!!`, `!PREFIX` run again)"),
    ("<<< … >>>", "a block over several lines: Enter goes on until >>>"),
    ("F1", "this screen, then the help of the command being typed"),
    ("F2, Ctrl-X Ctrl-E", "edit the line in $EDITOR (`edit` does the last command)"),
    ("Ctrl-C", "cancel the line; while a command runs, stop it"),
    ("Ctrl-D", "leave (everything is released), as `quit`"),
    ("paste", "each line runs on its own; `cush> ` and `...> ` prompts of a transcript are taken off"),
)


def keys_text(width: int = 0) -> str:
    """The F1 screen, each key's text wrapped between words under its column to the terminal's `width`."""
    keys = max(len(k) for k, _ in KEYS)
    rows = [line for k, what in KEYS
            for line in render.wrap([f"  {k:<{keys}}  {what}"], width, indent=" " * (keys + 4))]
    return "\n".join(["keys at the prompt:", *rows])


def edit_in_editor(text: str, suffix: str = ".cush") -> str:
    """The text after the user's editor ($VISUAL, $EDITOR, else editor, nano or vi) has had it, as prompt_toolkit
    does for Ctrl-X Ctrl-E; no editor at all is one line."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or next(
        (e for e in ("editor", "nano", "vi") if shutil.which(e)), None)
    if editor is None:
        raise ShellError("NOT_INSTALLED", "no editor: $VISUAL and $EDITOR are unset and none of editor, nano, vi "
                         "is installed", "export EDITOR=your-editor")
    fd, name = tempfile.mkstemp(suffix=suffix, prefix="cush-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + ("\n" if text and not text.endswith("\n") else ""))
        try:
            subprocess.call(shlex.split(editor) + [name])
        except OSError as e:
            raise ShellError("NOT_INSTALLED", f"the editor `{editor}` does not start: {e.strerror}",
                             "export EDITOR=your-editor") from None
        with open(name, encoding="utf-8", errors="replace") as f:
            return f.read()
    finally:
        os.unlink(name)


def key_bindings(shell) -> KeyBindings:
    kb = KeyBindings()

    def run_anyway(event):
        """Run the line as it is: the shell says what is wrong with it, as in a script."""
        buf = event.current_buffer
        buf.validation_error = None
        buf.append_to_history()
        event.app.exit(result=buf.document.text)

    @kb.add("enter")
    def _(event):
        """Run the input, unless a `<<<` block is still open: then a new line, with a continuation prompt. Checked
        first (the error marked at its column, the line kept to mend) — but not in a paste without bracketed-paste
        mode (more keys already waiting): each of its lines runs or fails on its own, as in a script, instead of the
        next lines being typed into the refused one."""
        buf = event.current_buffer
        if open_block(buf.text):
            buf.insert_text("\n")
        elif event.key_processor.input_queue:
            run_anyway(event)
        else:
            buf.validate_and_handle()

    @kb.add("escape", "enter")
    def _(event):
        """Alt-Enter (or Esc Enter): run a line the check refuses, to see the shell's own error."""
        run_anyway(event)

    @kb.add("f1")
    def _(event):
        """The keys, then the help of the command being typed (or the list of commands)."""
        words = event.current_buffer.document.current_line_before_cursor.split()
        topic = " ".join(words[:2]) if words and lookup(" ".join(words[:2])) else (words[0] if words else "")

        def show():
            shell.write(keys_text(int(shell.session.settings["width"])) + "\n")
            if lookup(topic):
                shell.execute(f"help {topic}")
            else:
                shell.write("`help` lists the commands; `help COMMAND` (or `COMMAND ?`) explains one")
        run_in_terminal(show)

    @kb.add("f2")
    def _(event):
        event.current_buffer.open_in_editor()

    @kb.add(Keys.BracketedPaste)
    def _(event):
        """A paste, less the prompts of a transcript (and the output lines between them): its whole lines run at
        once, each on its own as Enter on each would (a transcript's lines are all whole); a last line without its
        newline waits at the next prompt, to finish. A `<<<` left open by the paste goes in as text, to go on."""
        data = event.data.replace("\r\n", "\n").replace("\r", "\n")
        stripped = strip_prompts(data)
        done, newline, rest = (stripped, "\n", "") if stripped != data else data.rpartition("\n")
        buf = event.current_buffer
        whole = buf.document.text_before_cursor + done
        if not newline or not whole.strip() or open_block(whole):
            buf.insert_text(stripped)
            return
        shell.leave_next_input(rest + buf.document.text_after_cursor)
        buf.text = whole
        buf.append_to_history()
        event.app.exit(result=whole)

    return kb


class ColorErrors:
    """Writes errors in red on a terminal (not when NO_COLOR is set)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        self.stream.write(f"\x1b[31m{text.rstrip()}\x1b[0m\n" if text.strip() else text)

    def flush(self):
        self.stream.flush()


def use_color(setting: str, env: Environment | None = None) -> bool:
    if setting == "always":
        return True
    if setting == "never" or "NO_COLOR" in os.environ:
        return False
    return (env or Environment()).stdout_isatty


class KeptHistory(FileHistory):
    """The history file, shared by the shells of one state folder: each entry is added under its lock (`trim_history`
    rewrites it under the same lock). A write that fails (a full disk, a file made read-only) is said once, naming
    the file and the reason, and the session's history stays in memory — prompt_toolkit would report it after every
    command; a file that cannot be read is said once too (prompt_toolkit would print a traceback at every prompt)."""

    def __init__(self, path: str, say):
        super().__init__(path)
        self.say, self.failed = say, False

    def load_history_strings(self):
        try:
            return list(super().load_history_strings())
        except OSError as e:
            self.failed = True
            self.say(f"history: cannot read {self.filename}: {e.strerror}; this session's history stays in memory")
            return []

    def store_string(self, string: str) -> None:
        if self.failed:
            return
        try:
            with files.locked(self.filename):
                super().store_string(string)
        except (OSError, ShellError) as e:
            self.failed = True
            why = e.strerror if isinstance(e, OSError) else e.message
            self.say(f"history: cannot write {self.filename}: {why}; this session's history stays in memory")


def unusable(path) -> str | None:
    """Why the history file cannot be kept (None: it can): something that is not a file where it goes, or a file
    that cannot be read and added to."""
    if not path.exists():
        return None
    if not path.is_file():
        return "it is not a file"
    try:
        with open(path, "ab"), open(path, "rb"):
            return None
    except OSError as e:
        return e.strerror


def make_session(shell, settings: dict, input=None, output=None, env: Environment | None = None) -> PromptSession:
    env, settings = env or Environment(), with_defaults(settings)
    history = InMemoryHistory()
    if input is None:  # a real terminal keeps its history in the XDG state dir
        path = env.history_file
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            why = unusable(path)
            if why is not None:
                raise OSError(why)
            trim_history(path, max(0, int(settings["history_size"])))
            history = KeptHistory(str(path), lambda text: shell.write(text, err=True))
        except (OSError, ValueError) as e:
            shell.write(f"history: cannot keep it in {path}: {getattr(e, 'strerror', None) or e}; "
                        "this session's history stays in memory", err=True)
    return PromptSession(
        completer=ShellCompleter(shell), lexer=ShellLexer(shell), validator=ShellValidator(),
        validate_while_typing=False, auto_suggest=SessionAutoSuggest(shell), history=history,
        complete_while_typing=True, bottom_toolbar=lambda: toolbar(shell, env=env), key_bindings=key_bindings(shell),
        style=STYLES.get(settings["theme"], STYLES["default"]), enable_history_search=False,
        color_depth=None if use_color(settings["color"], env) else _mono(),
        vi_mode=settings["editing_mode"] == "vi", enable_open_in_editor=True, input=input, output=output)


def continuation(width: int, line_number: int, wrap_count: int) -> str:
    """`...> ` before the next line of a block; nothing before a long line's soft-wrapped rest (it is one line)."""
    return "  ...> " if wrap_count == 0 else ""


def _mono():
    from prompt_toolkit.output import ColorDepth

    return ColorDepth.MONOCHROME


def page(text: str, argv: list[str] | None, out, rows: int, tty: bool) -> None:
    """Output taller than the screen goes through the pager (pgcli's `less -SRXF`: no wrapping, colours kept,
    gone when it fits), `argv` as settings.pager_argv made it: a program, run without a shell, and less without its
    own shell escapes (LESSSECURE). Shorter output, output to a non-terminal, no pager (None) or one that will not
    start: written as is."""
    if not text:
        return
    if tty and argv is not None and text.count("\n") >= rows - 1:
        try:
            subprocess.run(argv, input=text, text=True, check=False, env={**os.environ, "LESSSECURE": "1"})
            return
        except (OSError, ValueError):
            pass
    out.write(text)
    out.flush()


def recalled(shell, line: str) -> str | None:
    """The line with `!!`, `!N`, `!-N` or `!PREFIX` replaced by the command it names, shown as bash shows it; None
    (after one error line) when it names none."""
    try:
        expanded = expand_history(line, [e.text for e in shell.session.history])
    except ShellError as e:
        shell.write("\n".join(render.wrap([render.error_line(e)], int(shell.session.settings["width"]))), err=True)
        return None
    if expanded is None:
        return line
    shell.write(render.visible(expanded))  # a command a script ran may hold control characters
    return expanded


def run_typed(shell, line: str) -> None:
    """What was typed at the prompt: each line of a paste runs or fails on its own. Shell.execute reports its own
    failures; the guard here is for the loop itself."""
    try:
        lines = list(joined_source_lines(line.split("\n")))
        for lineno, text in lines:
            text = recalled(shell, text)
            if text is not None:  # a line of a paste: its error names it (`paste:2:7`)
                shell.execute(text, "paste" if len(lines) > 1 else None, lineno)
            if shell.quitting or shell.last_error is not None and shell.last_error.code == "INTERRUPTED":
                break
    except KeyboardInterrupt:
        pass
    except Exception as e:
        if shell.debug:
            raise
        shell.write(f"INTERNAL_ERROR: {type(e).__name__}: {e} — hint: run with --debug for the traceback", err=True)


def ask_abandon(what: str, waited: float) -> bool:
    """Ctrl-C while the GPU has not answered: give it up (the session comes back with `reset`), or wait on."""
    from prompt_toolkit.shortcuts import confirm

    try:
        return confirm(f"\nthe GPU has not finished {what} after {waited:.1f} s. Give the GPU up "
                       "(its queued work is lost; `reset` then rebuilds the session)?")
    except (KeyboardInterrupt, EOFError):
        return True


def with_defaults(settings: dict | None) -> dict:
    """The config file's settings, each key it lacks at the one table's default (model/settings.py)."""
    return {**DEFAULTS, **(settings or {})}


def prompt_options(options: ShellOptions, settings: dict, env: Environment) -> tuple[ShellOptions, object]:
    """What a shell at the terminal's prompt is built with: its options, and its error stream (red, unless colour
    is off)."""
    err = env.stderr or env.stdout
    options = replace(options, echo_scripts=True,  # `demo` and `run FILE` show each command as they run it
                      progress_stream=err,  # to the terminal as it is, not into the output held for the pager
                      editor=edit_in_editor)  # `edit` and F2
    return options, ColorErrors(err) if use_color(with_defaults(settings)["color"], env) else err


WELCOME = ("new here? `lesson list` (exercises, checked as you go), `demo streams` (watch one), `kernel load K.cu` "
           "(your own kernel), `run examples/tour.cush` (the tour) — `help` for more, Tab completes, Ctrl-D leaves")


def repl(shell, banner: str, settings: dict | None = None, input=None, output=None,
         env: Environment | None = None) -> ExitStatus:
    """The prompt, over a shell built for it (`prompt_options`), until `quit` or Ctrl-D."""
    settings = with_defaults(settings)
    env = env or Environment()
    pager = pager_argv(settings["pager"])
    if pager is None and settings["pager"] != "off":  # the default's program is not here (a bad one: said at load)
        shell.write(render.error_line(ShellError(
            "NOT_INSTALLED", f"the pager, {settings['pager']}, is not on your PATH: long output is not paged",
            f"install it, or name another pager (or off) as `pager =` in {env.config_file}")), err=True)
    session = make_session(shell, settings, input, output, env)
    welcome = [banner, WELCOME]
    shell.out.write("\n".join(render.wrap(welcome, env.terminal_size().columns)) + "\n")
    if input is None:
        shell.backend.ask_abandon = ask_abandon
    while not shell.quitting:
        shell.session.settings["width"] = env.terminal_size().columns
        try:
            line = session.prompt("cush> ", multiline=True, prompt_continuation=continuation,
                                  default=shell.take_next_input())
        except KeyboardInterrupt:  # Ctrl-C at the prompt cancels the input
            continue
        except EOFError:
            break
        line = strip_prompts(line)
        screen = shell.out
        first = lookup(line.split()[0]) if line.split() else None
        held = None  # a script or a demo narrates as it goes: never held back
        if first is None or not first.narrates:
            held = io.StringIO()  # held back, to page it when it is taller than the screen
        try:
            # errors with the output held, in the order the commands ran (an error must not jump above what ran
            # before it)
            with shell.writing_to(held, ColorErrors(held) if isinstance(shell.err, ColorErrors) else held) \
                    if held is not None else nullcontext():
                run_typed(shell, line)
        finally:
            if held is not None:
                page(held.getvalue(), pager if shell.session.settings["pager"] == "on" else None, screen,
                     env.terminal_size().lines,
                     input is None and getattr(screen, "isatty", lambda: False)())
    left = shell.close()
    shell.out.write(("released: " + ", ".join(left) if left else "nothing was left allocated") + "\n")
    return ExitStatus.SUCCESS

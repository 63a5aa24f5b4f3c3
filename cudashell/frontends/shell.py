"""Shell.execute(line) and the script runner: parse, dispatch to a handler, render, record. The
REPL and the CLI are thin layers over this; output goes to injected streams."""

from __future__ import annotations

import io
import os
import re
import select
import stat
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path

from ..backends.base import Backend
from ..backends.plan import Recorder, trace_plan
from ..errors import ShellError
from ..export import cemit
from ..language.confinement import Confinement
from ..language.grammar import Segment, split_commands
from ..language.registry import parse_segment, spec_of, watchers
from ..model.inputs import read_capped
from ..model.session import Session
from ..output import render
from ..output.files import replace_file
from ..output.results import (
    Action,
    Block,
    Edit,
    Output,
    Quit,
    Repeat,
    Result,
    RunScript,
)
from ..teaching.shipped import DEMO_DIR
from .environment import Environment, xdg_config_dir, xdg_state_dir
from .frame import Frame, Redirect, ShellOptions

MAX_DEPTH = 16


def script_text(raw: bytes, path: Path) -> str:
    """A script's text: UTF-8, with or without the byte-order mark an editor may write. Anything else is refused
    where it first fails, as file:line:col, naming the encoding."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        before = raw[:e.start]
        line = before.count(b"\n") + 1
        col = len(before[before.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1
        raise ShellError("BAD_ENCODING", f"{path}:{line}:{col}: byte 0x{raw[e.start]:02x} is not UTF-8",
                         "save the script as UTF-8 (a Latin-1 file: `iconv -f latin1 -t utf-8`)") from None

def script_name(path: Path) -> str:
    """How errors name a script: a shipped demo by its file name (`register.cush:21:18`, wherever the package is
    installed), another relative to the directory the shell runs in where it is below it."""
    if path.parent == DEMO_DIR:
        return path.name
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


WORD = re.compile(r"[A-Za-z_][\w.]*")
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)', re.M)  # the plain #include lines of a source
NAMED = re.compile(r"\sas\s", re.IGNORECASE)  # `as NAME` after any white space, a tab or a Unicode space too


class Shell:
    """The interpreter. Built with its options and its streams (an `Environment`, or `out`/`err`); option fields
    may be given as keywords (`Shell(backend, out=out, err=err, json_mode=True)`). What the commands running now
    see — backend, session, streams, the script's folder — is the top `Frame`, pushed by nested runs."""

    def __init__(self, backend: Backend, reason: str = "", options: ShellOptions | None = None,
                 env: Environment | None = None, *, out=None, err=None, **fields):
        opts = replace(options or ShellOptions(), **fields)
        self.reason = reason
        self.output_lost: str | None = None  # why output could not be written, once it could not
        if out is None or err is None:  # the environment's streams (the process's, unless one is given)
            env = env or Environment()
            if env.stdout is None:  # closed at start: write nowhere, and say so at the end
                self.output_lost = "stdout is closed"
            out = out or env.stdout or open(os.devnull, "w")
            err = err or env.stderr or out
        workdir = opts.workdir or Path.cwd()
        # cudashell's own folders, never written by a confined run
        self._own_dirs = (env.config_dir, env.state_dir) if env is not None else (xdg_config_dir(), xdg_state_dir())
        confinement = opts.confinement and replace(opts.confinement, guarded=self._own_dirs)
        session = Session(script_dir=workdir, root=confinement.root if confinement and confinement.reads else None,
                          progress=self._progress, state_dir=opts.state_dir)
        if opts.json_mode:
            session.settings["format"] = "json"
        if opts.advice:  # a `note:` when a command does what a teacher would comment on
            session.settings["advice"] = "on"
        self._frames = [Frame(opts, backend, session, out, err, Redirect(), (workdir,), echo=opts.echo,
                              confinement=confinement)]
        self.failed = False  # something failed that no `expect error` accounted for
        self.quitting = False
        self.closed = False
        self.last_error: ShellError | None = None
        self.interrupted = False  # Ctrl-C stopped a command: a script run ends with 130
        self.next_input = ""  # what `edit` brought back, waiting at the next prompt (`take_next_input`)
        self._running = 0  # commands running now, nested ones included: 0 between the front end's commands
        self._not_a_pipe = None  # the output stream last found to be no pipe (_reader_gone)

    # ------------------------------------------------------------------ the frame
    @property
    def frame(self) -> Frame:
        return self._frames[-1]

    options = property(lambda self: self.frame.options)
    backend = property(lambda self: self.frame.backend)
    session = property(lambda self: self.frame.session)
    out = property(lambda self: self.frame.out)
    err = property(lambda self: self.frame.err)
    dirs = property(lambda self: self.frame.dirs)
    echo = property(lambda self: self.frame.echo)
    recording = property(lambda self: self.frame.recording)
    expecting = property(lambda self: self.frame.expecting)
    keep_going = property(lambda self: self.frame.options.keep_going)
    debug = property(lambda self: self.frame.options.debug)

    @property
    def redirect(self):
        """`output FILE`'s open file, or None: results go to the screen."""
        return self.frame.redirect.file

    @contextmanager
    def _nested(self, **changes):
        """Run the body in a frame of its own: the current one with `changes`, popped when the body ends. A
        change of folder is the session's too (a kernel or profile a script names is found beside it); a frame
        with a redirect of its own closes it."""
        outer = self.frame
        if all(getattr(outer, k) is v for k, v in changes.items()):  # nothing changes (most commands): no frame
            yield outer
            return
        inner = outer.but(**changes)
        self._frames.append(inner)
        if inner.dirs != outer.dirs:
            inner.session.script_dir = inner.dirs[-1]
        try:
            yield inner
        finally:
            self._frames.pop()
            if inner.dirs != outer.dirs:
                inner.session.script_dir = outer.dirs[-1]
            if inner.redirect is not outer.redirect and inner.redirect.file is not None:
                with suppress(OSError):
                    inner.redirect.file.close()

    @contextmanager
    def writing_to(self, out, err):
        """Results and errors go to `out` and `err` while the body runs (the prompt holds them for its pager)."""
        with self._nested(out=out, err=err):
            yield

    @contextmanager
    def using(self, **options):
        """These options (`keep_going`, `debug`) while the body runs: a notebook cell's own."""
        with self._nested(options=replace(self.options, **options)):
            yield

    def leave_next_input(self, text: str) -> None:
        """What the next prompt starts with: a paste's last line, pasted without its newline, to finish."""
        self.next_input = text

    def take_next_input(self) -> str:
        """What `edit` brought back, for the next prompt; it is given once."""
        waiting, self.next_input = self.next_input, ""
        return waiting

    @contextmanager
    def confined_to(self, folder: Path, who: str):
        """Commands that run in the body write only inside `folder` (a script read from stdin: the working
        directory); a run confined already stays as it is (language/confinement.py)."""
        with self._nested(confinement=self._confinement(folder, who)):
            yield

    def _confinement(self, folder: Path, who: str) -> Confinement:
        """What a run of teaching material started now is confined to: its folder, unless a run around it (the
        script that ran it, grading, a notebook) confines it already — a script in a folder of its own gets no
        more than the run that started it."""
        return self.frame.confinement or Confinement(Path(folder), who=who, guarded=self._own_dirs)

    @property
    def json_mode(self) -> bool:
        return self.session.settings["format"] == "json"

    # ------------------------------------------------------------------ one command
    def run_segment(self, seg: Segment, file: str | None = None, lineno: int | None = None) -> bool:
        """Parse, run and render one command; True when it succeeded. The error boundary: whatever goes wrong
        — in parsing, the handler, recording, explain or rendering — ends as one line, never a traceback."""
        self._running += 1
        try:
            return self._run_segment(seg, file, lineno)
        except KeyboardInterrupt:  # between the handler and the report: the command ran; say so, briefly
            self.interrupted = True  # a script stops here with 130, as at any other Ctrl-C
            self.last_error = ShellError("INTERRUPTED", "interrupted while reporting", None)
            self.report(seg.text, None, self.last_error, file, lineno)
            return False
        except Exception as e:
            if self.debug:
                raise
            self.last_error = ShellError("INTERNAL_ERROR", f"the command's result could not be shown: "
                                         f"{type(e).__name__}: {e}", "run with --debug for the traceback")
            self.report(seg.text, None, self.last_error, file, lineno)
            return False
        finally:
            self._running -= 1
            if not self._running and not self.options.quit_ends_shell:
                self.quitting = False  # grading: a submission's `quit` ended its scripts, not the grading

    def _run_segment(self, seg: Segment, file: str | None, lineno: int | None) -> bool:
        frame = self.frame  # the command's (a nested run pushes its own and pops it before the handler returns)
        session, backend, settings = frame.session, frame.backend, frame.session.settings
        if frame.echo and settings["format"] != "json":
            spec = spec_of([t.text for t in seg.tokens[:2]])
            if spec is None or spec.echoed:
                self._write(frame.out, f"cush> {render.visible(seg.text)}")
        result, error, before, cmd = None, None, None, None
        t0 = time.perf_counter()
        try:
            if seg.tokens[-1].text == "?" and not seg.tokens[-1].quoted:  # `memcpy ?`: help, inline
                seg = split_commands("help " + " ".join(t.text for t in seg.tokens[:-1])[:200])[0]
            cmd = parse_segment(seg)
            if frame.confinement is not None:
                self._confine(cmd, frame.confinement)
            if settings["explain"] == "on":  # what was alive before: the C refers to it
                before = cemit.alive(session, WORD.findall(seg.text))  # what the command (and a block in it) names
            backend.command_started()
            result = cmd.spec.handler(session, backend, self._written_from_folder(cmd))
            if result.action is not None:
                self._act(result.action, result)
        except ShellError as e:
            error = e
        except KeyboardInterrupt:  # Ctrl-C during a long command: back to the prompt
            error = ShellError("INTERRUPTED", "interrupted", "the session keeps what finished before Ctrl-C")
            self.interrupted = True
        except Exception as e:  # a bug of ours: still one line, unless --debug
            if frame.options.debug:
                raise
            error = ShellError("INTERNAL_ERROR", f"{type(e).__name__}: {e}", "run with --debug for the traceback")
        if error is not None:
            error.at(seg.tokens[0].col)  # the driver's refusals point at the command that met them
        wall = time.perf_counter() - t0
        self.last_error = error
        recorded = self._as_recorded(seg.text, result)
        try:
            explained = cemit.explain(recorded, *before) if error is None and before else None
        except ShellError:  # the command ran: a C rendering that cannot be written is left out, not an error
            explained = None
        except Exception as e:  # a bug of the explainer's: said as its own, after the command (which succeeded)
            if frame.options.debug:
                raise
            explained = None
            said = render.visible(seg.text)
            self._write(frame.err, f"INTERNAL_ERROR: `explain` could not write the C of `{said}` (the command ran): "
                                   f"{type(e).__name__}: {e} — hint: run with --debug for the traceback")
        if frame.recording:
            session.record(recorded, error is None, error.code if error else None)
        api_call = result.api_call if result is not None else None
        if api_call is not None:
            session.api.append(api_call)
        if error is not None:  # what earlier work said when it finished (a race, a printf) comes before the error
            self._report_callbacks()
        self.report(seg.text, result, error, file, lineno, wall if settings["time"] == "on" else None, explained)
        self._report_callbacks()
        if frame.recording:  # not each round of a `repeat`: the repeat is the command
            self._report_watched(cmd, result, error)
        if error is None and result is not None and result.interrupted:
            self.interrupted = True  # a bench keeps what it measured before Ctrl-C; the script stops there
            self.last_error = ShellError("INTERRUPTED", "interrupted", "what was measured before Ctrl-C is shown")
            return False
        return error is None

    def _confine(self, cmd, confinement: Confinement) -> None:
        """Every file a command names — a file it writes; while grading, also a script, a kernel, a lesson file
        (`lesson NAME.toml`), a profile (`compare ref FILE`) — must lie where `confinement` lets it, or the command
        is refused before it opens anything; each argument's kind says whether its value is such a path, and whether
        the command writes it (argkinds.ArgKind). Paths are resolved as the commands resolve them: from the script's
        folder and from the working directory, `~` expanded, symbolic links followed. While grading, the plain
        `#include "…"` lines of CUDA C (a kind's `cuda`) are checked here too, as the shell reads those files itself
        (kernels.with_includes); what else a source makes the compiler open is refused where the compiler opens it
        (`load_kernels` with the session's root)."""

        def includes(source: str, folder: Path, col: int | None, seen: set) -> None:
            for quoted, angled in INCLUDE.findall(source):
                name = quoted or angled
                target = folder / name
                confinement.check(name, (folder,), col, writes=False, shown=f"#include {name!r}")
                if target.is_file() and target.resolve() not in seen:
                    seen.add(target.resolve())
                    includes(read_capped(target, "source").decode("utf-8", "replace"), target.parent, col, seen)

        folder = self.dirs[-1]
        for arg in (*cmd.spec.args, *(o.arg for o in cmd.spec.opts)):
            value, kind = cmd.args.values.get(arg.name), arg.kind
            if value is None:
                continue
            col = cmd.args.col(arg.name)
            if kind.path(value):  # in a script's own folder, a file written starts there (_written_from_folder)
                bases = (folder,) if kind.writes and folder != self.dirs[0] else (folder, Path.cwd())
                confinement.check(value, bases, col, writes=kind.writes)
                if kind.cuda and confinement.reads and (folder / value).is_file():
                    includes(read_capped(folder / value, "source").decode("utf-8", "replace"), (folder / value).parent,
                             col, set())
            elif kind.cuda and confinement.reads:
                includes(value, folder, col, set())

    def _written_from_folder(self, cmd):
        """The command's arguments, with each relative path of a file it writes made to start at the running
        script's folder, as every other path a script names does (`run`, `kernel load`, `output`): `save x.cush` in
        a script writes beside the script wherever the shell was started. Outside a script of another folder (the
        prompt, a cell), they are as typed."""
        dirs, args = self.frame.dirs, cmd.args
        folder = dirs[-1]
        if len(dirs) == 1 or folder == dirs[0]:
            return args
        values = dict(args.values)
        for arg in (*cmd.spec.args, *(o.arg for o in cmd.spec.opts)):
            value = values.get(arg.name)
            if value is not None and arg.kind.writes and arg.kind.path(value) and not Path(value).is_absolute():
                values[arg.name] = str(folder / value)
        return replace(args, values=values) if values != args.values else args

    @staticmethod
    def _as_recorded(text: str, result: Result | None) -> str:
        """History names what the shell named (`alloc pinned 1MB as p0`), so saving or exporting it
        replays to the same names."""
        if result is None or result.named is None or NAMED.search(f" {text} "):
            return text
        return f"{text} as {result.named}"

    def _report_callbacks(self) -> None:
        """Host callbacks that fired while the command ran (cuLaunchHostFunc runs them on a driver thread)."""
        for fired in self.backend.fired_callbacks():  # host callbacks, and what a user kernel printed
            kind = fired.get("result", "callback")
            self.report(f"({kind.replace('_', ' ')})", Result.KINDS[kind](fired), None, None, None)

    def _report_watched(self, cmd, result: Result | None, error: ShellError | None) -> None:
        """What the watchers (a lesson's check, advice) say of the command that just ran, after its output."""
        session, backend = self.session, self.backend
        for watch in watchers():
            try:
                said = watch(session, backend, cmd, result, error)
            except Exception as e:  # a bug in a watcher: the command itself ran, and stays a success
                if self.debug:
                    raise
                self._write(self.err, f"INTERNAL_ERROR: {watch.__module__}.{watch.__name__} failed after the command: "
                                      f"{type(e).__name__}: {e} — hint: run with --debug for the traceback")
                continue
            for one in said:
                self.report(f"({one.kind.replace('_', ' ')})", one, None, None, None)

    def report(self, text, result: Result | None, error: ShellError | None, file=None, lineno=None,
               wall: float | None = None, explained: tuple[str, str] | None = None) -> None:
        """Show a command's result or error as the settings say (text, CSV, a JSON line, the notebook's display):
        `text` is the command as written, `file`/`lineno` where it was. An error is shown once, however many
        nested runs pass it up."""
        frame = self.frame
        options, settings, out, redirect = frame.options, frame.session.settings, frame.out, frame.redirect.file
        if options.on_report is not None:
            options.on_report(result, error)
        if error is not None and getattr(error, "shown", False):
            return  # one error passed up through nested `run`s is printed once
        if error is not None:
            error.shown = True
            if options.on_error is not None and error.code != frame.expecting:
                options.on_error(error, render.error_text(error, file, lineno))
        width = int(settings["width"] or 0)  # the terminal's, at the prompt: text wraps between words
        json_mode = settings["format"] == "json"
        if json_mode:  # with `output FILE` the lines go there too (the output command's own to the screen)
            here = out if result is None or isinstance(result.action, Output) else redirect or out
            self._write(here, render.json_line(text, result, error, file, lineno, wall, explained))
        elif error is not None and error.code == frame.expecting:  # part of the lesson, not a failure
            self._write(out, "\n".join(render.wrap([render.expected_line(error, file, lineno)], width)))
        elif error is not None:
            self._write(frame.err, "\n".join(render.wrap([render.error_line(error, file, lineno)], width)))
        elif options.display is not None and redirect is None:
            options.display(result)
        else:
            csv = settings["format"] == "csv" and not result.prose
            body = render.visible(render.csv_text(result)) if csv else \
                render.human(result, settings["tablefmt"], width, settings["expanded"])
            if body:  # `output`'s own word goes to the screen
                self._write(out if isinstance(result.action, Output) else redirect or out, body)
        if explained and not json_mode:
            self._write(out, "\n".join(cemit.explain_lines(*explained, width)))
        if wall is not None and not json_mode:
            self._write(out, f"time: {render.fmt_seconds(wall)} (host wall clock)")

    def _progress(self, label: str, done: int | None, total: int) -> None:
        """A one-line progress bar on the shell's error stream when it is a terminal (not in JSON, not inside
        `repeat`, whose output is held back); `done` None clears it."""
        stream = self.options.progress_stream or self.err
        if self.json_mode or not getattr(stream, "isatty", lambda: False)():
            return
        if done is None:
            text = "\r" + " " * 60 + "\r"
        else:
            filled = 30 * done // max(total, 1)
            text = f"\r{label} [{'#' * filled}{' ' * (30 - filled)}] {done}/{total}"
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):
            pass

    def write(self, text: str, *, err: bool = False) -> None:
        """A line of the front end's own (a banner, a warning, what `!!` expanded to) on the shell's output or
        error stream, as the shell writes its own: a reader that went away does not stop the session."""
        self._write(self.err if err else self.out, text)

    def _write(self, stream, text: str) -> None:
        """Write a line. A reader that went away (`| head`), a full disk or a closed stream must not stop the
        session: the output is dropped and `output_lost` says why; an error line falls back to stdout."""
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError, AttributeError) as e:  # BrokenPipeError, ENOSPC, a closed file, None
            if isinstance(e, OSError) and stream is not None and stream is self.redirect:
                self._end_redirect(e)  # `output FILE` on a full disk: said once, and the result comes here
                self._write(self.out, text)
                return
            self.output_lost = self.output_lost or getattr(e, "strerror", None) or str(e) or type(e).__name__
            if stream is self.err and self.out is not self.err:
                try:
                    self.out.write(text + "\n")
                    self.out.flush()
                except (OSError, ValueError, AttributeError):
                    pass

    # ------------------------------------------------------------------ many commands
    def run_items(self, items: list[tuple[Segment | BadLine, int]], file: str | None = None) -> bool:
        """Run commands in order. A failure stops the run unless the next command is `expect error`
        (which then judges it) or keep-going is on. Returns False when something failed unexpectedly."""
        ok_all = True
        for i, (item, lineno) in enumerate(items):
            if self.quitting or self._reader_gone():  # the reader left (`| head`): the rest would write to no one
                break
            expecting = expected_code(items[i + 1][0] if i + 1 < len(items) else None)
            if expecting is self.frame.expecting:  # most commands: no frame of their own (the command path)
                ok = self._run_item(item, file, lineno)
            else:
                with self._nested(expecting=expecting):
                    ok = self._run_item(item, file, lineno)
            if ok or expecting is not None:
                continue
            ok_all = False
            self.failed = True
            if not self.keep_going:
                break
        return ok_all

    def _run_item(self, item: Segment | BadLine, file: str | None, lineno: int | None) -> bool:
        if isinstance(item, BadLine):  # the line itself did not tokenize
            if self.echo and not self.json_mode:
                self._write(self.out, f"cush> {render.visible(item.text)}")
            self.session.record(item.text, False, item.error.code)
            self.last_error = item.error
            self.report(item.text, None, item.error, file, lineno)
            return False
        return self.run_segment(item, file, lineno)

    def _reader_gone(self) -> bool:
        """True when output went to a pipe whose reader has left: a write failed so, or (Linux) the pipe says so
        before one is tried — a long bench is not run for nobody."""
        if "Broken pipe" in (self.output_lost or ""):
            return True
        out = self.out
        if out is self._not_a_pipe:  # asked before for this stream (each command asks): a file, a terminal, a StringIO
            return False
        try:
            fd = out.fileno()
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                self._not_a_pipe = out
                return False
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            gone = any(ev & select.POLLERR for _, ev in poller.poll(0))
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            self._not_a_pipe = out
            return False
        if gone:
            self.output_lost = "Broken pipe"
        return gone

    def execute_quietly(self, line: str) -> bool:
        """Run a command whose output nobody needs (settings from the config file); not in history."""
        try:
            cmd = parse_segment(split_commands(line)[0])
            cmd.spec.handler(self.session, self.backend, cmd.args)
        except ShellError:
            return False
        return True

    def execute(self, line: str, name: str | None = None, lineno: int = 1) -> bool:
        """Run one line as typed: `;`-separated commands, `#` comments; a blank line does nothing. `name`: what
        its errors say it is line `lineno` of (a paste at the prompt: `paste:2:7`)."""
        try:
            segments = split_commands(line)
        except ShellError as e:
            return self.run_items([(BadLine(e, line.strip()), lineno)], name)
        return self.run_items([(s, lineno) for s in segments], name)

    @staticmethod
    def script_items(text: str) -> list[tuple[Segment | BadLine, int]]:
        items: list[tuple[Segment | BadLine, int]] = []
        lines = text.splitlines()
        for lineno, line in joined_source_lines(lines):
            try:
                items += [(s, lineno) for s in split_commands(line)]
            except ShellError as e:
                items.append((BadLine(e, line.strip()), lineno))
        return items

    def run_script(self, path: str | Path) -> bool:
        path = Path(path)
        if not path.is_absolute():
            path = self.dirs[-1] / path
        try:
            raw = read_capped(path, "script")
        except OSError as e:
            raise ShellError("NO_SUCH_FILE", f"cannot read script {path}: {e.strerror}",
                             "paths in a script are relative to that script" if len(self.dirs) > 1
                             else "a path is relative to the directory you are in") from None
        text = script_text(raw, path)
        if len(self.dirs) > MAX_DEPTH:
            raise ShellError("RECURSION", f"scripts nest deeper than {MAX_DEPTH} (does {path.name} run itself?)")
        with self._nested(dirs=(*self.dirs, path.parent), confinement=self._confinement(path.parent, "a script")):
            return self.run_text(text, script_name(path))

    def run_text(self, text: str, name: str) -> bool:
        """A script's text (a file's, a notebook cell's): checked whole, then run; errors say `name:line:col`."""
        items = self.script_items(text)
        errors = syntax_errors(items)
        if errors:  # found before anything runs: a typo on line 300 must not cost the 299 lines before it
            for e, lineno, text in errors:
                self.report(text, None, e, name, lineno)
            if not self.json_mode:
                many = f"{len(errors)}+" if len(errors) >= MAX_SYNTAX_ERRORS else str(len(errors))
                self._write(self.err, f"{render.visible(name)}: {errors[0][0].code}: {many} syntax "
                                      f"error{'s' * (len(errors) > 1)}; nothing was run")  # the first one's code
            self.last_error = errors[0][0]
            self.failed = True
            return False
        return self.run_items(items, name)

    def _act(self, action: Action, result: Result) -> None:
        """The work a handler asked of the shell, by its type."""
        match action:
            case RunScript():
                self._run_nested(action)
            case Repeat():
                self._repeat(action, result)
            case Block():
                self._block(action)
            case Quit():
                self.quitting = True
            case Output():
                self._output_to(action)
            case Edit():
                self._edit(action)

    def _edit(self, edit: Edit) -> None:
        """Open the editor; what was saved waits at the next prompt (pgcli's \\e, bash's fc) — for a file, the
        `run` of it."""
        if self.options.editor is None:
            raise ShellError("NOT_INTERACTIVE", "`edit` opens your editor at the prompt; here no one is at one",
                             "run the script's commands as they are, or use `run FILE`", edit.col)
        if edit.path is None:
            self.next_input = self.options.editor(edit.text, ".cush").strip()
            return
        path = self.dirs[-1] / edit.path
        if not os.access(path.parent, os.W_OK):  # found before the editor opens, not after the user's edits
            raise ShellError("IO_ERROR", f"cannot write {edit.path}: {path.parent} is not a directory you can write",
                             None, edit.col)
        try:
            original = script_text(path.read_bytes(), path) if path.exists() else ""
        except OSError as e:
            raise ShellError("NO_SUCH_FILE", f"cannot read {edit.path}: {e.strerror}", None, edit.col) from None
        edited = self.options.editor(original, path.suffix or ".cush")
        replace_file(path, edited, edit.col)  # whole, or the file as it was
        quoted = f'"{edit.path}"' if re.search(r'[\s;#"<>]', edit.path) else edit.path  # one word, as typed
        self.next_input = f"run {quoted}"

    def _repeat(self, block: Repeat, result: Result) -> None:
        """Run a block N times with its output held back; a failure stops it and is the repeat's error. Round 1
        goes through the shell; when the block is only GPU calls, the other rounds run on the GPU side as a loop
        of driver calls (plan.py) — unless `shell` asks for every round through the shell."""
        segments = split_commands(block.commands.replace("\n", ";"))
        times, backend, held = block.times, self.backend, io.StringIO()
        recorder = Recorder(backend, self.session) if times > 1 and not block.shell else None
        t0 = time.perf_counter()
        # the rounds' output is held back, from `output FILE`, the screen and a notebook's display alike; history
        # keeps the repeat
        with self._nested(out=held, err=held, redirect=Redirect(), echo=False, recording=False,
                          options=replace(self.options, display=None)):
            with self._nested(backend=recorder or backend):
                self._round(segments, 1, block)
            why = recorder.why_not(self.session) if recorder else ("asked" if times > 1 else None)
            if recorder is not None and why is None:
                run = backend.run_plan(recorder.calls, times - 1)
                trace_plan(self.session, recorder, run, backend.timing_label)
                result.data["plan"] = {**{k: v for k, v in run.items() if k not in ("records", "span", "records_tag")},
                                       "rounds": times - 1, "timing": backend.timing_label}
            else:
                for i in range(1, times):
                    self._round(segments, i + 1, block)
        result.data.update(wall=time.perf_counter() - t0, ran=times * len(segments), through_shell=why)

    def _block(self, block: Block) -> None:
        """`if gpus N <<< … >>>`, a lesson's answers: the block's commands, each shown as a typed one is; the first
        failure stops it, unless the next command is an `expect error` naming it (as in a script). A lesson's
        answers (`confined`) write only inside the folder they run from."""
        segments = split_commands(block.commands.replace("\n", ";"))
        confinement = self._confinement(self.dirs[-1], "a lesson") if block.confined else self.frame.confinement
        for i, seg in enumerate(segments):
            expecting = expected_code(segments[i + 1] if i + 1 < len(segments) else None)
            with self._nested(expecting=expecting, confinement=confinement):
                ok = self.run_segment(seg)
            if not ok and expecting is None:
                raise ShellError("SCRIPT_FAILED", f"the block stopped at `{seg.text}`", "its error is printed above",
                                 block.col)

    def _round(self, segments, n: int, block: Repeat) -> None:
        for seg in segments:
            self.out.seek(0)
            self.out.truncate()
            if not self.run_segment(seg):
                e = self.last_error
                raise ShellError(e.code, f"`{seg.text}` failed in round {n}: {e.message}", e.hint, block.col)

    def _output_to(self, output: Output) -> None:
        """`output FILE` appends the results that follow to FILE (pgcli's \\o); `output off` ends it."""
        path = output.path
        self._end_redirect()
        if path is None:
            return
        try:
            self.frame.redirect.file = open(path, "a", encoding="utf-8")
        except OSError as e:
            raise ShellError("IO_ERROR", f"cannot write {path}: {e.strerror}", None, output.col) from None

    def _end_redirect(self, failure: OSError | None = None) -> None:
        """Close `output FILE`; a write or close that failed (a full disk) is said once, naming the file and the
        reason, and results come to the screen again."""
        redirect, self.frame.redirect.file = self.redirect, None
        if redirect is None:
            return
        try:
            redirect.close()
        except OSError as e:
            failure = failure or e
        if failure is not None:
            self._write(self.err, f"output: cannot write {render.visible(redirect.name)}: "
                                  f"{failure.strerror or failure}; results come to the screen again")

    def _run_nested(self, script: RunScript) -> None:
        path, scope = script.path, script.scope
        with self._nested(echo=self.echo or self.options.scripts_echo):
            ok = self._run_scoped(path, scope) if scope is not None else self.run_script(path)
        if ok:
            return
        if self.last_error is not None and self.last_error.code == "RECURSION":
            raise self.last_error  # printed once, where it happened: each enclosing `run` passes it on silently
        if self.keep_going:
            raise ShellError("SCRIPT_FAILED", f"script {path} had failed commands and went on (--keep-going)",
                             "their errors are printed above", script.col)
        raise ShellError("SCRIPT_FAILED", f"script {path} stopped at a failed command",
                         "its error is printed above", script.col)

    def _run_scoped(self, path: str, settings: dict) -> bool:
        """Run a script (a demo) on a session of its own — the same backend, the user's settings with `settings`
        on top — and release what it made at its end, whatever happened: the user's session is left as it was."""
        mine = self.session
        scope = Session(settings={**mine.settings, **settings}, script_dir=mine.script_dir, root=mine.root,
                        progress=mine.progress, measured=mine.measured)  # what a demo measures: for `compare ref`
        try:
            with self._nested(session=scope):
                self.backend.context_use(None)  # a fresh session starts in the GPU's primary context
                return self.run_script(path)
        finally:
            release_session(self.backend, scope)
            with suppress(ShellError):
                self.backend.context_use(mine.context.handle)

    # ------------------------------------------------------------------ teardown
    def close(self) -> list[str]:
        """Free every buffer and stream, then close the backend; returns what was still allocated. A backend that
        drops its whole device on close (the simulator) is not asked to free them one by one: nothing waits for
        queued work to finish, and exit after an interrupted million-round `repeat` is at once."""
        if self.closed:
            return []
        self.closed = True
        left = [f"{b.name} ({b.kind} {b.size} B)" for b in self.session.buffers.values()]
        self._end_redirect()
        if self.backend.drops_all_on_close:
            self.session.buffers.clear()
        else:
            release_session(self.backend, self.session)
        self.backend.close()
        return left


def release_session(backend, session: Session) -> None:
    """Give back everything a session made — a hold, buffers, streams, events — on a backend that lives on. A
    dead context's memory goes with it when the backend closes, so its refusals are passed over."""
    if session.held is not None:  # held work runs now, or freeing would wait for it forever
        with suppress(ShellError):
            backend.release()
        session.held = None
    for buf in list(session.buffers.values()):
        with suppress(ShellError):
            session.release_buffer(backend, buf)
        del session.buffers[buf.name]
    for s in list(session.streams.values()):
        with suppress(ShellError):
            backend.stream_destroy(s.handle)
        del session.streams[s.name]
    for ev in list(session.events.values()):
        with suppress(ShellError):
            backend.event_destroy(ev.handle)
        del session.events[ev.name]
    for c in list(session.contexts.values()):  # primaries stay retained until the backend closes
        if not c.primary:
            with suppress(ShellError):
                backend.context_destroy(c.handle)
            del session.contexts[c.name]
    session.current = "gpu0"


def expected_code(item) -> str | None:
    """The code an `expect error CODE` command names (upper case, as it compares), or None for any other item."""
    if isinstance(item, Segment) and [t.text.lower() for t in item.tokens[:2]] == ["expect", "error"]:
        return item.tokens[2].text.upper() if len(item.tokens) > 2 else ""
    return None


MAX_SYNTAX_ERRORS = 20  # a file that is not a script at all (a C file, a results file) stops being read here


@dataclass
class BadLine:
    """A source line that does not split into commands (an open quote, a NUL): its error, and its text for the
    report's `cmd` and the history."""

    error: ShellError
    text: str


def syntax_errors(items: list) -> list[tuple[ShellError, int, str]]:
    """The commands that do not tokenize or parse (the first MAX_SYNTAX_ERRORS), with their line numbers and
    text — except where the next command is `expect error`, which makes the failure part of the script. One pass,
    cached parses (registry)."""
    out = []
    for i, (item, lineno) in enumerate(items):
        if len(out) >= MAX_SYNTAX_ERRORS:
            break
        if expected_code(items[i + 1][0] if i + 1 < len(items) else None) is not None:
            continue
        if isinstance(item, BadLine):
            out.append((item.error, lineno, item.text))
            continue
        if item.tokens[-1].text == "?" and not item.tokens[-1].quoted:  # `memcpy ?`: help, at run time
            continue
        try:
            parse_segment(item)
        except ShellError as e:
            out.append((e.at(item.tokens[0].col), lineno, item.text))
    return out


def joined_source_lines(lines: list[str]):
    """(line number, line) with a `<<< … >>>` block that spans lines joined into its first line."""
    i = 0
    while i < len(lines):
        start, parts = i + 1, [lines[i]]
        depth = lines[i].count("<<<") - lines[i].count(">>>")  # counted per line: a stray <<< stays linear
        while depth > 0 and i + 1 < len(lines):
            i += 1
            parts.append(lines[i])
            depth += lines[i].count("<<<") - lines[i].count(">>>")
        yield start, "\n".join(parts)
        i += 1

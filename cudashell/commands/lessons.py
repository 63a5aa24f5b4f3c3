"""lesson: exercises the student does with their own hands, checked as they go (vimtutor, rustlings). The running
lesson lives in the session; after every command a watcher decides the step's check (cudashell/lessons/checks.py)
on the session — never on the text typed — and says ✓ and the next goal, or, after HINT_EVERY misses, a hint, then
the answer. Progress is kept in the state directory (lessons.json), so `lesson` resumes where the student stopped."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from ..errors import ShellError
from ..language.grammar import Arg, Flag, Opt, split_commands
from ..language.registry import command, watcher
from ..output import files
from ..output.results import Block, Result
from ..teaching import lessons as L
from ..teaching.lessons import checks

HINT_EVERY = 3  # commands that miss the goal between two hints (and, after the last hint, the answer)
PROGRESS_FILE = "lessons.json"
SUBCOMMANDS = {"list": "the lessons and your progress", "hint": "a hint for this step",
               "answer": "the commands that meet this step's goal", "skip": "the shell types this step's answer",
               "quit": "stop the lesson (progress is kept)"}


@dataclass
class Running:
    """A lesson in progress in a session: which step, how many commands missed it, what was shown, the results
    seen since the step began and how much of the trace was there then."""

    lesson: L.Lesson
    lang: str
    step: int = 0  # 0-based
    tries: int = 0
    hints_shown: int = 0
    answer_shown: bool = False
    results: list = field(default_factory=list)
    traced_from: int = 0
    traced_seen: int = 0  # how much of the trace the commands before the last one queued
    skipped: list = field(default_factory=list)  # 1-based steps done by `lesson skip`
    replaying: bool = False  # while `lesson NAME` runs earlier steps' answers again: not the student's tries
    skipping: int | None = None  # the step whose answer `lesson skip` is typing
    saved: dict | None = None  # its progress entry as this shell last read or wrote it: another's change differs
    said: set = field(default_factory=set)  # the near misses said in this step (each is said once)
    shapes: dict = field(default_factory=dict)  # the buffers as the command before the last one left them

    def begin(self, session) -> None:
        self.tries = self.hints_shown = 0
        self.answer_shown = False
        self.results = []
        self.said = set()
        self.shapes = checks.buffer_shapes(session)
        self.traced_from = self.traced_seen = session.traced()

    @property
    def current(self) -> L.Step:
        return self.lesson.steps[self.step]

    def base(self, event: str, step: int | None = None) -> dict:
        """The data every lesson_step result has: the lesson, the language, the step (1-based) and its goal."""
        i = self.step if step is None else step
        return {"lesson": self.lesson.name, "title": L.say(self.lesson.title, self.lang), "lang": self.lang,
                "event": event, "step": i + 1, "steps": len(self.lesson.steps),
                "goal": L.say(self.lesson.steps[min(i, len(self.lesson.steps) - 1)].goal, self.lang)}


def first_hint(step: L.Step) -> int:
    """Misses before the first hint: HINT_EVERY, or one more than the answer has commands — a student on the way
    through a five-command answer is not interrupted."""
    return max(HINT_EVERY, sum(len(split_commands(line)) for line in step.answer) + 1)


# ------------------------------------------------------------------ progress (XDG state)
def _fresh() -> dict:
    return {"current": None, "lessons": {}}


ENTRY_TYPES = {"step": (int, "a step number"), "steps": (int, "a number of steps"), "done": (bool, "true or false"),
               "lang": (str, "a language's name"), "skipped": (list, "a list of step numbers"),
               "path": (str, "a file's path")}


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def damage(data) -> str | None:
    """What is wrong with progress as read (None: nothing): {"current": name or null, "lessons": {name: {"step",
    "steps", "done", "lang", "skipped": [steps], "path"}}}, each of these of its type where it is there. Checked
    on reading, so that no command meets a wrong type later (a `"skipped": 5` made every `lesson` fail)."""
    if not isinstance(data, dict) or not isinstance(data.get("lessons"), dict):
        return "it holds no table of lessons"
    if not isinstance(data.get("current"), (str, type(None))):
        return "'current' is not a lesson's name"
    for name, entry in data["lessons"].items():
        if not isinstance(entry, dict):
            return f"lesson {name} is not a table"
        for key, (kind, what) in ENTRY_TYPES.items():
            value = entry.get(key, kind())
            if not isinstance(value, kind) or kind is int and not _whole(value) or \
                    kind is list and not all(_whole(x) for x in value):
                return f"lesson {name}'s {key!r} is not {what}"
    return None


def _read(path: Path) -> tuple[dict, str | None]:
    """Progress as the file holds it, and what is wrong with it if it is damaged (then fresh progress). A file that
    cannot be read at all (no file yet, a permission) is fresh progress, not damage."""
    try:
        raw = path.read_bytes()
    except OSError:
        return _fresh(), None
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError is one
        return _fresh(), "it is not JSON"
    why = damage(data)
    return (_fresh(), why) if why else (data, None)


def _progress(session) -> tuple[dict, dict]:
    """Saved progress, and for the command's result {"damaged": what was said} when the file was damaged: then it
    is moved aside (`lessons.json.bad-TIME`) and progress starts afresh — said once, since the next read finds no
    file."""
    if session.state_dir is None:
        return _fresh(), {}
    path = Path(session.state_dir) / PROGRESS_FILE
    data, why = _read(path)
    if why is None:
        return data, {}
    try:
        with files.locked(path):
            return _checked(path)  # again, under the lock: another shell may have just replaced it
    except (OSError, ShellError) as e:
        return _fresh(), {"damaged": f"{path.name} is damaged ({why}); {getattr(e, 'strerror', None) or e}; "
                                     "progress starts afresh"}


def _checked(path: Path) -> tuple[dict, dict]:
    """Under the lock: progress as read, a damaged file moved aside (so that another shell's good write is never
    the one moved) and said."""
    data, why = _read(path)
    if why is None:
        return data, {}
    try:
        aside = files.move_aside(path)
    except OSError as e:
        return _fresh(), {"damaged": f"{path.name} is damaged ({why}) and could not be moved aside: {e.strerror}; "
                                     "progress starts afresh"}
    return _fresh(), {"damaged": f"{path.name} was damaged ({why}); moved aside to {aside.name}; progress starts "
                                 "afresh"}


def _merged(mine: dict, theirs: dict) -> dict:
    """This shell's entry for a lesson, where another shell changed it since this one last read or wrote it:
    neither loses a step — the furthest step, done if either is, the skipped steps of both."""
    done = mine["done"] or bool(theirs.get("done"))
    step = max(mine["step"], theirs.get("step", 0))
    return {**mine, "step": mine["steps"] if done else step, "done": done,
            "skipped": sorted(set(mine["skipped"]) | set(theirs.get("skipped", [])))}


def _saved(session, run: Running) -> dict:
    """Write the lesson's progress, merged with what other shells sharing the state folder saved meanwhile (read
    again under the lock); for its result, {"unsaved": why} where it could not be written, and {"damaged": …} as
    `_progress` says, else {}."""
    if session.state_dir is None:
        return {}
    lesson = run.lesson
    done = run.step >= len(lesson.steps)
    entry = {"step": run.step, "steps": len(lesson.steps), "done": done, "lang": run.lang,
             "skipped": sorted(set(run.skipped)), **({} if lesson.key == lesson.name else {"path": lesson.key})}
    path = Path(session.state_dir) / PROGRESS_FILE
    note: dict = {}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with files.locked(path):
            data, note = _checked(path)
            theirs = data["lessons"].get(lesson.key)
            if theirs is not None and theirs != run.saved:
                entry = _merged(entry, theirs)
            data["lessons"][lesson.key] = entry
            if not entry["done"]:
                data["current"] = lesson.key
            elif data["current"] == lesson.key:
                data["current"] = None
            files.replace_file(path, json.dumps(data, ensure_ascii=False, indent=1))
    except OSError as e:
        return {"unsaved": f"{path}: {e.strerror}", **note}
    except ShellError as e:
        return {"unsaved": e.message, **note}
    run.saved = entry
    return note


# ------------------------------------------------------------------ finding a lesson
def find(session, name: str, col: int | None) -> L.Lesson:
    """A shipped lesson by name, or a lesson file (NAME.toml, relative to the script's folder)."""
    if name.endswith(".toml"):
        path = Path(name).expanduser()
        return L.load(path if path.is_absolute() else session.script_dir / path)
    available = L.shipped()
    if name not in available:
        close = difflib.get_close_matches(name, list(available), n=1)
        raise ShellError("NO_SUCH_LESSON", f"no lesson named '{name}'",
                         f"did you mean `lesson {close[0]}`?" if close else "`lesson list` lists them", col)
    return L.load(available[name])


def _names(session, words, index):
    """Completion after `lesson `: the shipped lessons and the subcommands."""
    return list(L.titles().items()) + list(SUBCOMMANDS.items())


# ------------------------------------------------------------------ the commands
@command("lesson", "scripts", "start or resume a lesson: goals you meet with your own commands, checked as you go",
         "lesson pinned lang zh", "(none: exercises on the session)",
         args=(Arg("NAME", "lesson", optional=True, complete=_names),), flags=(Flag("restart"),),
         opts=(Opt("lang", Arg("L", choices=L.LANGS)),),
         details="Each step states a goal; after every command the shell checks it against the session (buffers, "
                 f"streams, results, the timeline — never the text you typed) and says ✓ and the next goal. After "
                 f"{HINT_EVERY} commands that miss it (one more than its answer has commands, if that is more), a "
                 f"hint; every {HINT_EVERY} more, the next hint, then the answer (`help`, `set` and the other session "
                 "commands, and `expect`, are not counted); a command that comes close (a buffer too small) hears "
                 "at once what differs. `lesson hint`, `lesson answer`, `lesson skip` (the shell types the answer, "
                 "fitted to your session: a name you took for something else is freed first), `lesson quit`. "
                 "Progress is kept in the state "
                 "directory ($XDG_STATE_HOME/cudashell/lessons.json): `lesson` alone resumes the lesson you were "
                 "in — as you left it, when that was in this session; in a new shell by running the earlier steps' "
                 "answers again to rebuild the session (refused where a name they make is taken). `restart` starts "
                 "over. NAME may be a lesson file of your own (FILE.toml; its format: docs/lessons.md).",
         exported=False, saved=False)
def lesson(session, backend, args):
    name, lang, restart = args.get("NAME"), args.get("L"), "restart" in args.flags
    col = args.col("NAME") if name is not None else None  # `lesson` alone: no word to point at
    run: Running | None = session.lesson
    saved, note = _progress(session)
    if name is not None:
        found = find(session, name, col)
    elif run is not None:
        found = run.lesson
    else:
        found = _last(session, saved)
        if found is None:
            return _listing(session, saved, note)
    if run is not None and run.lesson.key == found.key and not restart:
        relang = lang is not None and lang != run.lang  # the running lesson, in another language: nothing else changes
        run.lang = lang or run.lang
        return LessonStep({**run.base("where"), "tries": run.tries, **note, **(_saved(session, run) if relang else {})})
    away = session.lessons_away.get(found.key)
    if away is not None and not restart:  # left in this session: its buffers are here, as the student left them
        new, replay = away, []
        new.lang = lang or new.lang
    else:
        entry = saved["lessons"].get(found.key, {})  # its types checked on reading (`damage`)
        resume = 0
        if not restart and not entry.get("done") and "step" in entry:
            resume = min(entry["step"], len(found.steps) - 1)
        lang = lang or (entry.get("lang") if entry.get("lang") in L.LANGS and resume else None) or \
            (session.settings["lang"] if session.settings["lang"] in L.LANGS else "en")
        new = Running(found, lang, resume, skipped=[s for s in entry.get("skipped", []) if s <= resume]
                      if resume else [], saved=saved["lessons"].get(found.key))
        replay = [line for s in found.steps[:resume] for line in s.answer]
        _check_names_free(session, found, resume, replay, col)
    session.lessons_away.pop(found.key, None)
    if run is not None and run.lesson.key != found.key:
        session.lessons_away[run.lesson.key] = run  # switched away from: resumed as it is, not replayed
    session.lesson = new
    new.replaying = bool(replay)
    new.begin(session)
    data = {**new.base("resume" if new.step or away is new else "start"), "intro": L.say(found.intro, new.lang),
            "minutes": found.minutes, "article": found.article, "replayed": replay, **note, **_saved(session, new)}
    return LessonStep(data, action=Block("; ".join(replay), col, confined=True) if replay else None)


def _last(session, saved: dict) -> L.Lesson | None:
    """What `lesson` alone resumes: the lesson the progress file says the student was in, else the last one left
    in this session; None when there is neither."""
    current = saved["current"]
    entry = saved["lessons"].get(current) if current is not None else None
    if entry is not None:
        return find(session, entry.get("path") or current, None)
    if session.lessons_away:
        return list(session.lessons_away.values())[-1].lesson
    return None


def _check_names_free(session, found: L.Lesson, resume: int, replay: list[str], col) -> None:
    """Resuming in a session that was not the lesson's runs the done steps' answers again: refused, before any of
    them runs, when a name they make is taken here (the student's own buffer must not be mistaken for the
    lesson's, nor the replay stop halfway)."""
    from ..language.registry import parse_segment

    held = {"buffer": session.buffers, "stream": session.streams, "event": session.events,
            "context": session.contexts}
    for line in replay:
        for seg in split_commands(line):
            cmd = parse_segment(seg)
            for arg in (*cmd.spec.args, *(o.arg for o in cmd.spec.opts)):
                made = cmd.args.values.get(arg.name) if arg.kind.makes else None
                what = next((noun for noun, names in held.items() if made in names), None)
                if what is not None:
                    undo = f"`free {made}`" if what == "buffer" else f"`{what} destroy {made}`"
                    raise ShellError("NAME_TAKEN", f"resuming lesson {found.name} at step {resume + 1} runs the "
                                     f"earlier steps' answers again, and `{line}` makes '{made}': this session "
                                     f"has a {what} named '{made}'",
                                     f"{undo} first, resume in a new shell, or `lesson {_typed(found)} restart`", col)


def _typed(found: L.Lesson) -> str:
    """How `lesson` names it: a shipped lesson by its name, another by its file."""
    return found.name if found.key == found.name else found.key


@command("lesson list", "scripts", "the lessons, with your progress in each", "lesson list",
         "(none: exercises on the session)", exported=False, saved=False)
def lesson_list(session, backend, args):
    return _listing(session, *_progress(session))


def _listing(session, progress: dict, note: dict) -> "LessonList":
    saved = progress["lessons"]
    run = session.lesson
    rows = []
    for name, path in L.shipped().items():
        try:
            found = L.load(path)
        except ShellError as e:  # a damaged installation: listed, with why it cannot run
            rows.append({"name": name, "title": e.message, "minutes": 0, "article": "", "steps": 0, "done_steps": 0,
                         "done": False, "running": False})
            continue
        entry = saved.get(name, {})
        steps = len(found.steps)
        done_steps = steps if entry.get("done") else min(entry.get("step", 0), steps)
        if run is not None and run.lesson.key == name:
            done_steps = run.step
        rows.append({"name": name, "title": L.say(found.title, session.settings["lang"]), "minutes": found.minutes,
                     "article": found.article, "steps": steps, "done_steps": done_steps,
                     "done": bool(entry.get("done")), "running": run is not None and run.lesson.key == name})
    return LessonList({"lessons": rows, "folder": str(L.LESSON_DIR), **note})


def _running(session, col=None) -> Running:
    if session.lesson is None:
        raise ShellError("NO_LESSON", "no lesson is running", "`lesson` resumes yours; `lesson list` lists them", col)
    return session.lesson


@command("lesson hint", "scripts", "a hint for the step you are on (the next one, each time)", "lesson hint",
         "(none: exercises on the session)", exported=False, saved=False)
def lesson_hint(session, backend, args):
    return _next_hint(_running(session), session)


def _next_hint(run: Running, session) -> "LessonStep":
    """The step's next hint (in the lesson's language, else English); past the last one, the answer."""
    hints = run.current.hints.get(run.lang) or run.current.hints["en"]
    if run.hints_shown >= len(hints):
        return _answer(run, session)
    run.hints_shown += 1
    return LessonStep({**run.base("hint"), "hint": hints[run.hints_shown - 1], "hint_number": run.hints_shown,
                       "hints": len(hints), "tries": run.tries})


def _answer(run: Running, session) -> "LessonStep":
    run.answer_shown = True
    lines, fitted = _fitted(session, run.current.answer)
    return LessonStep({**run.base("answer"), "answer": lines, "fitted": fitted, "tries": run.tries})


def _fitted(session, answer) -> tuple[list[str], list[dict]]:
    """The step's answer as it runs from the session the student made: a command that makes a name already taken
    is left out where what holds the name is already what it would make (a buffer of its kind and flags, at least
    as big; a stream of its kind), else preceded by freeing it (`free h`, `stream destroy s1`: the later steps use
    the name) — so `lesson skip` never stops at NAME_TAKEN. Also what was done to each name, for the student."""
    from ..language.registry import parse_segment

    lines, fitted, made = [], [], set()
    for line in answer:
        kept = []
        for seg in split_commands(line):
            cmd = parse_segment(seg)
            name = cmd.args.values.get("NAME") if cmd.spec.name in ("alloc", "stream create") else None
            buf = session.buffers.get(name) if cmd.spec.name == "alloc" else None
            stream = session.streams.get(name) if cmd.spec.name == "stream create" else None
            if name in made or (buf is None and stream is None):
                kept.append(seg.text)
            elif buf is not None and isinstance(cmd.args.values["SIZE"], int) and checks.buffer_matches(
                    {"kind": cmd.args.values["KIND"], "min_size": cmd.args.values["SIZE"],
                     "flags": sorted(cmd.args.flags - {"async"})}, buf) or \
                    stream is not None and stream.nonblocking == ("nonblocking" in cmd.args.flags):
                fitted.append({"name": name, "action": "kept", "was": _described(buf)})
            else:
                kept += [f"free {name}" if buf is not None else f"stream destroy {name}", seg.text]
                fitted.append({"name": name, "action": "freed" if buf is not None else "destroyed",
                               "was": _described(buf)})
            made.add(name)
        if kept:
            lines.append("; ".join(kept))
    return lines, fitted


def _described(buf) -> str:
    """A buffer as the answer's note names it (`pageable 64 B`); a stream: ""."""
    from ..sizes import format_size

    return f"{buf.kind} {format_size(buf.size)}" if buf is not None else ""


@command("lesson answer", "scripts", "the commands that meet this step's goal", "lesson answer",
         "(none: exercises on the session)", exported=False, saved=False)
def lesson_answer(session, backend, args):
    return _answer(_running(session), session)


@command("lesson skip", "scripts", "the shell types this step's answer for you, and the lesson goes on",
         "lesson skip", "(none: exercises on the session)", exported=False, saved=False)
def lesson_skip(session, backend, args):
    run = _running(session)
    run.skipping = run.step
    lines, fitted = _fitted(session, run.current.answer)
    return LessonStep({**run.base("skip"), "answer": lines, "fitted": fitted},
                      action=Block("; ".join(lines), None, confined=True) if lines else None)


@command("lesson quit", "scripts", "stop the lesson; `lesson` resumes it where you were", "lesson quit",
         "(none: exercises on the session)", exported=False, saved=False)
def lesson_quit(session, backend, args):
    run = _running(session)
    session.lesson = None
    session.lessons_away[run.lesson.key] = run  # `lesson` resumes it as it is
    return LessonStep({**run.base("quit"), **_saved(session, run)})


# ------------------------------------------------------------------ the check after every command
@watcher
def check_step(session, backend, cmd, result, error) -> list[Result]:
    """Decide the running step's check after a command; ✓ and the next goal, a hint, the answer, or nothing."""
    run: Running | None = session.lesson
    if run is None:
        return []
    if cmd is not None and cmd.spec.name.split()[0] == "lesson":
        return _after_own(session, run, cmd.spec.name, error)
    if run.replaying:
        return []
    ok = error is None and result is not None
    queued = session.trace[max(0, run.traced_seen - session.trace_dropped):]  # what this command queued
    run.traced_seen = session.traced()
    if ok:
        run.results.append((result.kind, result.data, queued))
    seen = checks.Seen(session, (result.kind, result.data) if ok else None, error.code if error else None,
                       run.results, run.traced_from)
    shapes, before = checks.buffer_shapes(session), run.shapes
    run.shapes = shapes
    fresh = {name for name, shape in shapes.items() if before.get(name) != shape}
    if checks.holds(run.current.check, seen):
        return [_advance(session, run)]
    if cmd is not None and (cmd.spec.group == "session" or cmd.spec.name.startswith("expect")):
        return []  # looking around (help, set, history) is not a try, nor is checking what just happened
    run.tries += 1
    near = _near(run, seen, fresh)
    first = first_hint(run.current)
    if run.tries < first or (run.tries - first) % HINT_EVERY:
        return near
    return near if run.answer_shown else [*near, _next_hint(run, session)]


def _near(run: Running, seen: checks.Seen, fresh: set[str]) -> list[Result]:
    """What differs from the goal where the student came close (`h is 64 B; the goal wants at least 64 MiB`), once
    each in a step: a near miss is said as soon as it is made, not three tries later with a hint."""
    misses = [m for m in checks.near_misses(run.current.check, seen, fresh) if m not in run.said]
    run.said.update(misses)
    if not misses:
        return []
    return [LessonStep({**run.base("near"), "tries": run.tries,
                        "near": [{"what": m.what, "key": m.key, "have": m.have, "want": m.want, "bound": m.bound,
                                  "buffer": m.buffer} for m in misses]})]


def _after_own(session, run: Running, name: str, error) -> list[Result]:
    """After a `lesson` command itself: a replay that failed restates the goal; a skip whose answer did not meet
    the check (the session was not as the lesson expects) still moves on."""
    if name == "lesson" and run.replaying:
        run.replaying = False
        run.begin(session)  # the replayed answers are not the student's results
        return [LessonStep({**run.base("where"), "tries": 0})] if error is not None else []
    if name == "lesson skip" and run.skipping is not None:
        skipping, run.skipping = run.skipping, None
        if error is None and run.step == skipping:
            return [_advance(session, run, forced=True)]
    return []


def _advance(session, run: Running, forced: bool = False) -> "LessonStep":
    passed = run.step
    skipped = forced or run.skipping == passed
    if skipped:
        run.skipped.append(passed + 1)
    data = {**run.base("passed", passed), "tries": run.tries, "why": L.say(run.current.why, run.lang) or None,
            "skipped": skipped}
    run.step += 1
    if run.step >= len(run.lesson.steps):
        session.lesson = None
        data.update(done=True, next_goal=None, summary=L.say(run.lesson.summary, run.lang) or None,
                    skipped_steps=sorted(set(run.skipped)))
    else:
        run.begin(session)
        data.update(done=False, next_goal=L.say(run.current.goal, run.lang))
    return LessonStep({**data, **_saved(session, run)})


# ------------------------------------------------------------------ results
UI = {
    "en": {"start": "lesson {lesson}: {title} — {steps} step{plural}, about {minutes} minutes{article}",
           "article": " ({article})",
           "usage": "After each command the shell checks the goal. `lesson hint`, `lesson answer`, `lesson skip` "
                    "(the shell types the answer), `lesson quit` (your progress is kept).",
           "resume": "resuming at step {step}/{steps}: the answers of the steps before it ran again above, to "
                     "rebuild the session",
           "resume_here": "resuming at step {step}/{steps}, with the session as it is",
           "goal": "step {step}/{steps}: {goal}", "passed": "✓ step {step}/{steps}: {goal}",
           "skipped": " (skipped: the shell typed the answer)",
           "done": "lesson {lesson} done{skipped_note}. `lesson list` shows the others.",
           "skipped_note": " ({n} skipped)",
           "hint": "hint {hint_number}/{hints} for step {step}/{steps}: {hint}",
           "answer": "answer to step {step}/{steps}: {commands} — type it, or `lesson skip` to have it typed",
           "quit": "lesson {lesson} stopped at step {step}/{steps}; `lesson` resumes it",
           "where": "you are at step {step}/{steps} of lesson {lesson}: {goal}",
           "unsaved": "(progress not saved: {unsaved})",
           "near": "not yet: {misses}", "miss_buffer": "{what}'s {key} is {have} where the goal wants {bound}{want}",
           "miss_result": "this {what}'s {key} is {have} where the goal wants {bound}{want}", "misses": "; ",
           "at_least": "at least ", "at_most": "at most ", "size": "size", "kind": "kind", "flags": "flags",
           "kept": "{name} already is what this step makes ({was}): kept",
           "freed": "{name} is taken ({was}): the answer frees it first",
           "destroyed": "stream {name} is of another kind: the answer destroys it first",
           "kept_done": "{name} already was what this step makes ({was}): kept",
           "freed_done": "{name} was taken ({was}): the answer freed it first",
           "destroyed_done": "stream {name} was of another kind: the answer destroyed it first"},
    "zh": {"start": "课程 {lesson}：{title} —— 共 {steps} 步，约 {minutes} 分钟{article}",
           "article": "（{article}）",
           "usage": "每条命令之后 shell 都会检查目标是否达成。`lesson hint` 提示，`lesson answer` 答案，`lesson skip` "
                    "由 shell 代为输入答案，`lesson quit` 退出（进度会保存）。",
           "resume": "从第 {step}/{steps} 步继续：上面重新运行了之前各步的答案，以恢复会话",
           "resume_here": "从第 {step}/{steps} 步继续，会话保持现在的样子",
           "goal": "第 {step}/{steps} 步：{goal}", "passed": "✓ 第 {step}/{steps} 步：{goal}",
           "skipped": "（已跳过：由 shell 输入了答案）",
           "done": "课程 {lesson} 完成{skipped_note}。`lesson list` 列出其他课程。",
           "skipped_note": "（跳过 {n} 步）",
           "hint": "第 {step}/{steps} 步的提示 {hint_number}/{hints}：{hint}",
           "answer": "第 {step}/{steps} 步的答案：{commands} —— 自己输入，或用 `lesson skip` 让 shell 代为输入",
           "quit": "课程 {lesson} 停在第 {step}/{steps} 步；`lesson` 可以继续",
           "where": "你在课程 {lesson} 的第 {step}/{steps} 步：{goal}",
           "unsaved": "（进度未保存：{unsaved}）",
           "near": "还差一点：{misses}", "miss_buffer": "{what} 的{key}是 {have}，目标要求{bound} {want}",
           "miss_result": "这次 {what} 的 {key} 是 {have}，目标要求{bound} {want}", "misses": "；",
           "at_least": "至少", "at_most": "至多", "size": "大小", "kind": "种类", "flags": "标志",
           "kept": "{name} 已经符合这一步的要求（{was}）：保留",
           "freed": "名字 {name} 已被占用（{was}）：答案先释放它",
           "destroyed": "流 {name} 的种类不同：答案先销毁它",
           "kept_done": "{name} 已经符合这一步的要求（{was}）：已保留",
           "freed_done": "名字 {name} 已被占用（{was}）：答案先释放了它",
           "destroyed_done": "流 {name} 的种类不同：答案先销毁了它"},
}


class NearMiss(TypedDict):
    what: str  # a buffer's name, or (buffer false) the kind of the result just shown
    key: str  # size, kind, flags, … or the result's field
    have: str
    want: str
    bound: str  # at_least | at_most | "" (equal)
    buffer: bool


class AnswerFit(TypedDict):
    name: str
    action: str  # kept (already what the answer makes) | freed | destroyed (a stream), before the answer makes it
    was: str  # the buffer that held the name (`pageable 64 B`); "" for a stream


class LessonStepData(TypedDict):
    lesson: str
    title: str
    lang: str
    event: str  # start | resume | where | passed | hint | answer | skip | quit | near
    step: int  # the step it is about, from 1 (passed: the step just passed)
    steps: int
    goal: str  # that step's goal
    tries: NotRequired[int]  # commands that missed the goal so far
    intro: NotRequired[str]  # start, resume
    minutes: NotRequired[int]
    article: NotRequired[str]
    replayed: NotRequired[list[str]]  # start, resume: the earlier steps' answers, run again ([]: the session as it is)
    why: NotRequired[str | None]  # passed: what the step showed
    skipped: NotRequired[bool]  # passed: by `lesson skip`
    done: NotRequired[bool]  # passed: it was the last step
    next_goal: NotRequired[str | None]  # passed: the goal of the step now current
    summary: NotRequired[str | None]  # passed, done: the lesson's closing words
    skipped_steps: NotRequired[list[int]]  # passed, done
    hint: NotRequired[str]
    hint_number: NotRequired[int]
    hints: NotRequired[int]
    answer: NotRequired[list[str]]  # answer, skip: the answer as it runs from this session (see fitted)
    fitted: NotRequired[list[AnswerFit]]  # answer, skip: names the answer would make that the session holds
    near: NotRequired[list[NearMiss]]  # near: what differs from the goal where the student came close
    unsaved: NotRequired[str]  # why progress could not be kept
    damaged: NotRequired[str]  # the progress file was damaged: what was wrong, where it was moved (said once)


class LessonStep(Result, kind="lesson_step"):
    """What a lesson says: its start, ✓ and the next goal, a hint, the answer, where you are."""

    Data = LessonStepData
    prose = True

    def text(self):
        d = self.data
        ui = UI.get(d["lang"], UI["en"])
        event = d["event"]
        out: list[str] = []
        if event in ("start", "resume"):
            out.append(ui["start"].format(**{**d, "article": ui["article"].format(**d) if d["article"] else ""},
                                          plural="s" * (d["steps"] != 1)))
            if d["intro"]:
                out += d["intro"].strip().splitlines()
            out.append(ui["usage"])
            if event == "resume":
                out.append(ui["resume" if d["replayed"] else "resume_here"].format(**d))
            out.append(ui["goal"].format(**d))
        elif event == "passed":
            out.append(ui["passed"].format(**d) + (ui["skipped"] if d["skipped"] else ""))
            if d["why"]:
                out += ["  " + line for line in d["why"].strip().splitlines()]
            if d["done"]:
                if d["summary"]:
                    out += d["summary"].strip().splitlines()
                n = len(d["skipped_steps"])
                out.append(ui["done"].format(**d, skipped_note=ui["skipped_note"].format(n=n) if n else ""))
            else:
                out.append(ui["goal"].format(**{**d, "step": d["step"] + 1, "goal": d["next_goal"]}))
        elif event == "hint":
            out.append(ui["hint"].format(**d))
        elif event == "answer":
            out.append(ui["answer"].format(**d, commands="; ".join(d["answer"])))
        elif event == "near":
            out.append(ui["near"].format(misses=ui["misses"].join(
                ui["miss_buffer" if m["buffer"] else "miss_result"].format(
                    **{**m, "key": ui.get(m["key"], m["key"]) if m["buffer"] else m["key"],
                       "bound": ui[m["bound"]] if m["bound"] else ""}) for m in d["near"])))
        elif event == "quit":
            out.append(ui["quit"].format(**d))
        if event in ("answer", "skip"):
            done = "_done" * (event == "skip")  # shown after the answer ran
            out += [ui[f["action"] + done].format(**f) for f in d.get("fitted", [])]
        elif event == "where":
            out.append(ui["where"].format(**d))
        if d.get("unsaved"):
            out.append(ui["unsaved"].format(**d))
        return ([d["damaged"]] if d.get("damaged") else []) + out


class LessonListItem(TypedDict):
    name: str
    title: str
    minutes: int
    article: str
    steps: int
    done_steps: int  # steps passed (all of them once done)
    done: bool
    running: bool  # the lesson running in this session


class LessonListData(TypedDict):
    lessons: list[LessonListItem]
    folder: str
    damaged: NotRequired[str]  # as lesson_step's


class LessonList(Result, kind="lessons"):
    Data = LessonListData

    def text(self):
        d = self.data
        out = []
        for x in d["lessons"]:
            progress = "done" if x["done"] else f"{x['done_steps']}/{x['steps']}" if x["done_steps"] else "-"
            mark = "▶" if x["running"] else " "
            out.append(f"{mark} {x['name']:<10} {progress:>5}  {x['minutes']:>2} min  {x['title']}")
        damaged = [d["damaged"]] if d.get("damaged") else []
        return damaged + out + ["`lesson NAME` starts one (`lang zh` in Chinese) or resumes it; `lesson` resumes "
                                f"the last. The lesson files are in {d['folder']}"]

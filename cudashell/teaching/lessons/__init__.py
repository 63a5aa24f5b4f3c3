"""Lessons: TOML files (the shipped ones here, a teacher's anywhere) that docs/lessons.md describes — a title, an
introduction, and steps, each a goal, a check (checks.py), hints and the answer, in English and Chinese. This module
reads and validates them: every problem of a file is reported at once, as file:line, in one BAD_LESSON error."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ...errors import ShellError
from ...model.inputs import read_capped
from . import checks

LESSON_DIR = Path(__file__).resolve().parent
LANGS = ("en", "zh")
RESERVED = ("list", "hint", "answer", "skip", "quit")  # `lesson WORD` does these: no lesson takes their names
TOP_KEYS = {"title": "text", "article": "a line naming what it teaches", "minutes": "how long it takes (1-60)",
            "intro": "text", "summary": "text", "step": "[[step]] tables"}
STEP_KEYS = {"goal": "text", "check": "checks", "hints": "texts", "answer": "commands", "why": "text"}


@dataclass(frozen=True)
class Step:
    goal: dict[str, str]
    check: dict
    hints: dict[str, list[str]]
    answer: tuple[str, ...]
    why: dict[str, str]  # said when the step is passed: what it showed (may be empty)


@dataclass(frozen=True)
class Lesson:
    name: str
    path: Path
    title: dict[str, str]
    article: str
    minutes: int
    intro: dict[str, str]
    summary: dict[str, str]
    steps: tuple[Step, ...]

    @property
    def key(self) -> str:
        """Its progress's key: a shipped lesson's name, another file's full path (a teacher's pinned.toml is not
        the shipped pinned)."""
        return self.name if self.path.parent == LESSON_DIR else str(self.path.resolve())


def say(text: dict, lang: str) -> str:
    """A text in the language asked (English where the lesson has none in it), its paragraphs one line each: the
    terminal wraps them. A blank line in the file starts a paragraph; lines are joined with a space, or with
    nothing after a line that ends in a CJK character (Chinese has no spaces between words)."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", (text.get(lang) or text.get("en", "")).strip()):
        joined = ""
        for line in block.splitlines():
            line = line.strip()
            joined += ("" if not joined or not line or ord(joined[-1]) > 0x2E80 else " ") + line
        paragraphs.append(joined)
    return "\n".join(p for p in paragraphs if p)


def shipped() -> dict[str, Path]:
    """The lessons in the package, by name (file stem), in name order."""
    return {p.stem: p for p in sorted(LESSON_DIR.glob("*.toml"))}


def titles() -> dict[str, str]:
    """Shipped lessons' English titles, for completion (read without validating: completion must not fail)."""
    out = {}
    for name, path in shipped().items():
        m = re.search(r'^title\.en\s*=\s*"([^"]*)"', path.read_text(encoding="utf-8"), re.M)
        out[name] = m.group(1) if m else ""
    return out


class _Lines:
    """Where a key of a lesson file is, for its error: the line of the step's `[[step]]` header, or of the key
    below it (tomllib gives values, not places)."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.steps = [i + 1 for i, line in enumerate(self.lines) if re.match(r"\s*\[\[\s*step\s*\]\]", line)]

    def of(self, step: int | None, path: str) -> int:
        """The line of the longest leading part of a dotted key (`check.last_result.src`, then `check.last_result`,
        then `check`) written at the start of a line in that step (None: before the first step)."""
        start = self.steps[step] if step is not None and step < len(self.steps) else 1
        end = self.steps[step + 1] if step is not None and step + 1 < len(self.steps) else \
            (self.steps[0] if step is None and self.steps else len(self.lines) + 1)
        parts = re.split(r"[.\[]", path)
        for k in range(len(parts), 0, -1):
            key = re.escape(".".join(parts[:k])).replace(r"\.", r"\s*\.\s*")
            for n in range(start, end):
                if re.match(rf"\s*{key}\s*[=.]", self.lines[n - 1]):
                    return n
        return start


def _text(value, where: str) -> list[str]:
    if not isinstance(value, dict) or not isinstance(value.get("en"), str) or not value["en"].strip():
        return [f"{where}: a text: a table with en = \"…\" (and zh = \"…\")"]
    return [f"{where}: language '{k}' (languages: {', '.join(LANGS)})" for k in value if k not in LANGS] + \
        [f"{where}.{k}: text" for k, v in value.items() if not isinstance(v, str)]


def _hints(value, where: str) -> list[str]:
    if not isinstance(value, dict) or not isinstance(value.get("en"), list) or not value["en"]:
        return [f"{where}: at least one hint, as hints.en = [\"…\"] (and hints.zh)"]
    out = [f"{where}: language '{k}' (languages: {', '.join(LANGS)})" for k in value if k not in LANGS]
    for k, v in value.items():
        if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
            out.append(f"{where}.{k}: a list of texts")
        elif len(v) != len(value["en"]):
            out.append(f"{where}.{k}: {len(v)} hints, but hints.en has {len(value['en'])}")
    return out


def _answer(value, where: str) -> list[str]:
    from ...language.grammar import split_commands
    from ...language.registry import parse_segment

    if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
        return [f"{where}: a list of the commands that meet the goal, e.g. [\"alloc pinned 64MB as p\"]"]
    out = []
    for line in value:
        try:
            for seg in split_commands(line):
                parse_segment(seg)
        except ShellError as e:
            out.append(f"{where}: `{line}`: {e.code}: {e.message}")
    return out


def parse(text: str, path: Path, name: str | None = None) -> Lesson:
    """A lesson from its file's text; BAD_LESSON listing every problem (file:line: what) when it does not follow
    docs/lessons.md."""
    name = name or path.stem
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise ShellError("BAD_LESSON", f"{path}:{m.group(1) if m else 1}: not TOML: {e}",
                         "docs/lessons.md describes the format") from None
    where = _Lines(text)
    problems: list[tuple[int, str]] = []

    def add(step: int | None, key: str, found: list[str]) -> None:
        """Each problem at the line of the key it names (`step 2: hints.zh: …`), else of `key`."""
        for p in found:
            named = re.match(r"(?:step \d+: )?([\w.\[\]]+):", p)
            problems.append((where.of(step, named.group(1) if named else key), p))

    if name.lower() in RESERVED:
        problems.append((1, f"a lesson cannot be called '{name}': `lesson {name}` is a command"))
    for key in data:
        if key not in TOP_KEYS:
            add(None, key, [f"no key '{key}' (keys: {', '.join(TOP_KEYS)})"])
    add(None, "title", _text(data.get("title"), "title"))
    for key in ("intro", "summary"):
        if key in data:
            add(None, key, _text(data[key], key))
    minutes = data.get("minutes", 10)
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= 60:
        add(None, "minutes", [f"minutes: a whole number of minutes, 1 to 60, got {minutes!r}"])
    if not isinstance(data.get("article", ""), str):
        add(None, "article", ["article: a line of text"])
    steps = data.get("step")
    if not isinstance(steps, list) or not steps:
        problems.append((1, "no steps: each step is a [[step]] table"))
        steps = []
    for i, step in enumerate(steps):
        label = f"step {i + 1}"
        if not isinstance(step, dict):
            problems.append((where.of(i, "step"), f"{label}: a [[step]] table"))
            continue
        for key in step:
            if key not in STEP_KEYS:
                add(i, key, [f"{label}: no key '{key}' (keys: {', '.join(STEP_KEYS)})"])
        add(i, "goal", _text(step.get("goal"), f"{label}: goal"))
        add(i, "check", checks.validate(step.get("check"), f"{label}: check"))
        add(i, "hints", _hints(step.get("hints"), f"{label}: hints"))
        add(i, "answer", _answer(step.get("answer"), f"{label}: answer"))
        if "why" in step:
            add(i, "why", _text(step["why"], f"{label}: why"))
    if problems:
        problems.sort(key=lambda p: p[0])
        first, rest = problems[0], problems[1:]
        more = "".join(f"; {path.name}:{n}: {p}" for n, p in rest)
        raise ShellError("BAD_LESSON", f"{path}:{first[0]}: {first[1]}{more}", "docs/lessons.md describes the format")
    return Lesson(name, path, data["title"], data.get("article", ""), minutes, data.get("intro", {}),
                  data.get("summary", {}), tuple(Step(s["goal"], s["check"], s["hints"], tuple(s["answer"]),
                                                      s.get("why", {})) for s in steps))


def load(path: Path) -> Lesson:
    try:
        raw = read_capped(path, "lesson")
    except OSError as e:
        raise ShellError("NO_SUCH_LESSON", f"cannot read lesson {path}: {e.strerror}",
                         "`lesson list` lists the shipped lessons; a file of your own ends in .toml") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ShellError("BAD_LESSON", f"{path}:1: not UTF-8", "save the lesson as UTF-8") from None
    return parse(text, path)

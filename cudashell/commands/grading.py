"""What a teacher's checks file adds to a script: `section` (a heading that groups the checks after it), and the
result `cudashell grade` reports (cudashell/grade.py runs the checks; its Result is here so that the JSON Schema,
built from the command modules' results, describes a grade's JSON line too)."""

from __future__ import annotations

from typing import TypedDict

from ..language.grammar import Arg
from ..language.registry import command
from ..output.render import fit, plural
from ..output.results import Result
from .checks import POINTS


@command("section", "scripts", "a heading; in a checks file (`cudashell grade`) it groups the checks that follow",
         'section "Pinned copies" points 40', "(none)", args=(Arg("TITLE", "word"),), opts=(POINTS,),
         details="In a checks file each section runs on a fresh session in a process of its own, so a submission "
                 "that crashes, loops or is refused in one section costs that section only. `points N`: the "
                 "section is worth N in all; its expect lines without `points` of their own share what their "
                 "own points leave. Elsewhere it prints its title.", exported=False, saved=False,
         grading="section")
def section(session, backend, args):
    return Section({"title": args.get("TITLE"), "points": args.get("POINTS")})


class SectionData(TypedDict):
    title: str
    points: int | float | None  # `points 2.5` too


class Section(Result, kind="section"):
    Data = SectionData
    prose = True

    def text(self):
        d = self.data
        return [f"── {d['title']}" + (f" ({plural(d['points'], 'point')})" if d["points"] is not None else "") + " ──"]


class GradeCheck(TypedDict):
    line: int  # in the checks file
    command: str  # the expect line, as written
    points: float  # what it is worth
    score: float  # what it scored: its points or 0
    status: str  # passed | failed (its expect found something else) | error (not reached, refused, stopped)
    code: str | None  # why it did not pass: EXPECT_FAILED, TIME_LIMIT, CHECK_CRASHED, OUTSIDE_SUBMISSION, …
    message: str | None  # the error line(s) the shell printed for it
    seconds: float | None  # wall time from the check before it (or the section's start) to its result


class GradeSection(TypedDict):
    title: str
    line: int
    points: float
    score: float
    checks: list[GradeCheck]


class GradeData(TypedDict):
    checks_file: str
    submission: str
    backend: str | None  # the backend the checks ran on (sim, cuda), None if none could start
    timing: str | None  # modeled (the simulator: the same grade on every machine) or measured
    score: float
    total: float
    percent: float
    pass_at: float  # the threshold in points (`--pass`)
    passed: bool
    sections: list[GradeSection]


def _points(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


class Grade(Result, kind="grade"):
    """One submission's grade: a row per check, then the total and whether it passes."""

    Data = GradeData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        rows, said = [], []
        for s in d["sections"]:
            for c in s["checks"]:
                message = c["message"] or ""
                reason, _, detail = message.partition(" — ")
                if reason.startswith("not reached") and detail and any(detail in m for m in said):
                    message = reason + " (above)"  # the checks a failure left unreached: its error shown once
                said.append(c["message"] or "")
                mark = "✓" if c["status"] == "passed" else f"✗ {c['code']}: {message}".strip()
                rows.append([s["title"], str(c["line"]), c["command"], f"{_points(c['score'])}/{_points(c['points'])}",
                             mark])
        where = f" on {d['backend']} ({d['timing']})" if d["backend"] else ""
        head = f"grade of {d['submission']}{where}, checks {d['checks_file']}"
        total = (f"total {_points(d['score'])}/{_points(d['total'])} points ({_points(d['percent'])}%): "
                 + ("passed" if d["passed"] else "not passed") + f" (passing takes {_points(d['pass_at'])})")
        return [head, fit(rows, ["section", "line", "check", "score", ""], tablefmt, width,
                          colalign=("left", "right", "left", "right", "left")), total]

    def text(self):
        return self.lines()

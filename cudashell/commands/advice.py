"""advice: the notes the advice rules (cudashell/advice.py) made so far, with counts, like an expert-rules report —
and the watcher that runs the rules after each command while `set advice on`."""

from __future__ import annotations

from typing import TypedDict

from ..language.registry import command, watcher
from ..output.render import fit
from ..output.results import Result
from ..teaching.advice import Advisor


def advisor(session) -> Advisor:
    if session.advice is None:
        session.advice = Advisor()
    return session.advice


@watcher
def advise_on(session, backend, cmd, result, error) -> list[Result]:
    """After a command that succeeded, while advice is on: a note for each rule that fired on a new occurrence."""
    if session.settings.get("advice") != "on" or error is not None or cmd is None or result is None:
        return []
    return [Note({"rule": s.rule.id, "note": s.text, "section": s.rule.section, "command": s.command})
            for s in advisor(session).look(session, backend, cmd, result.data)]


@command("advice", "session", "the advice notes so far: each rule that fired, how often, and its guide section",
         "advice", "(none: like Nsight's expert rules, live)", exported=False, saved=False,
         details="With `set advice on` (the default at the prompt and in notebooks; `--advice` for scripts and "
                 "--json) a rule that sees what a teacher would comment on — an async copy from pageable memory, "
                 "free between async work, managed memory moving back and forth, … — prints one `note:` line with "
                 "the reason and the guide's section (docs/guide.md, \"Advice\"). A note is printed once for each "
                 "buffer, stream or kernel it is about; every occurrence is counted here.")
def advice(session, backend, args):
    rows = advisor(session).report()
    return AdviceReport({"advice": session.settings.get("advice", "off"), "notes": rows})


# ------------------------------------------------------------------ the results
class NoteData(TypedDict):
    rule: str  # the rule's id: pageable-async, free-syncs, …
    note: str  # what it saw, why it matters, what fixes it
    section: str  # the guide's section: docs/guide.md#…
    command: str  # the command it saw (a round of `repeat`: the command in its block)


class Note(Result, kind="note"):
    Data = NoteData
    prose = True

    def text(self):
        return [f"note: {self.data['note']} ({self.data['section']})"]


class AdviceDataNotesItem(TypedDict):
    rule: str
    title: str  # the guide's heading for the rule
    count: int  # occurrences (the note itself was printed once per buffer, stream or kernel)
    first: str  # the first command it fired on
    note: str  # the note printed then
    section: str


class AdviceData(TypedDict):
    advice: str  # on or off
    notes: list[AdviceDataNotesItem]


class AdviceReport(Result, kind="advice"):
    Data = AdviceData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        if not d["notes"]:
            why = "" if d["advice"] == "on" else " (advice is off: `set advice on`)"
            return [f"no advice so far{why}"]
        rows = [[r["count"], r["rule"], r["first"], r["section"]] for r in d["notes"]]
        total = sum(r["count"] for r in d["notes"])
        return [fit(rows, ["count", "rule", "first seen at", "guide"], tablefmt, width),
                f"{total} occurrence{'s' * (total != 1)} of {len(rows)} rule{'s' * (len(rows) != 1)}"
                + ("" if d["advice"] == "on" else "; advice is off now")]

    def text(self):
        return self.lines()

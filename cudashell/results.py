"""What a handler returns: a kind (which picks its view in render.VIEWS), JSON-ready data, and an optional action
for the shell (run a script, quit). Handlers never print."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Result:
    kind: str
    data: dict = field(default_factory=dict)
    action: str | None = None  # "run" or "quit": work only the Shell can do
    as_json: bool = False  # `bench … --json`: shown as its JSON object even in text mode (not part of the data)
    named: str | None = None  # the name the shell gave what it made (`alloc` → p0): history records `as p0`


def hexptr(p: int | None) -> str | None:
    return None if p is None else f"0x{p:012x}"


def timing_data(t) -> dict:
    return {"seconds": t.seconds, "host_seconds": t.host_seconds, "blocking": t.blocking, "timing": t.label,
            "sync_rule": t.rule, "blocking_basis": t.basis or None}

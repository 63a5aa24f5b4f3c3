"""The table of GPU operations (cudashell/operations.py): every traced operation has a row, every row says how it is
shown, timed and judged, and no module outside the table reads an operation's text."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cudashell.backends.base import CONTRACT, WORK_CALLS
from cudashell.language.registry import lookup
from cudashell.model import operations, syncrules
from cudashell.model.operations import BY_KEY, ENGINES, OPERATIONS, TraceEntry, of_text

ROOT = Path(operations.__file__).parent.parent  # the package
KEYS = set(BY_KEY)
WORDS = {k.split()[0] for k in KEYS}  # memcpy, memset, kernel, prefetch, repeat


def test_every_row_says_how_it_is_shown_timed_and_judged():
    assert len(KEYS) == len(OPERATIONS)
    for op in OPERATIONS:
        assert op.engine in ENGINES, op
        assert len(op.glyph) == 1 and op.glyph not in "#. ", op
        assert op.colour and op.legend, op
        assert op.nvprof or op.runs_kernel, op  # a kernel is listed under its own name
        assert op.sync is None and op.method == "run_plan" or isinstance(op.sync, syncrules.Rule) \
            or (callable(op.sync) and getattr(syncrules, op.sync.__name__) is op.sync), op
        assert op.method in CONTRACT, op
        assert op.command is None or lookup(op.command) is not None, op
        assert of_text(op.text("x") if op.runs_kernel else op.text()) == (op, "x" if op.runs_kernel else None)


def test_every_traced_contract_method_issues_an_operation_with_a_row():
    assert WORK_CALLS <= {op.method for op in OPERATIONS}


def _track_calls():
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "track":
                yield path, node


def test_every_track_call_passes_a_row_of_the_table():
    """Session.track takes a row (MEMCPY[direction], MEMSET, KERNEL, PREFETCH[where]), never an operation's text."""
    calls = list(_track_calls())
    assert len(calls) >= 4
    for path, call in calls:
        first = call.args[0]
        base = first.value if isinstance(first, ast.Subscript) else first
        assert isinstance(base, ast.Name) and isinstance(getattr(operations, base.id, None), (dict, operations.Operation)), \
            f"{path.relative_to(ROOT.parent)}:{call.lineno}: track() is given {ast.unparse(first)}, not a row"


def test_what_the_simulator_traces_has_a_row(sim):
    sim.ok("alloc pinned 1MB as p; alloc device 1MB as d; alloc managed 1MB as m; alloc pageable 1MB as h")
    sim.ok("memcpy p d async; memcpy d p; memcpy d d; memcpy h p; memset d 0 async; launch increment d; "
           "prefetch m device; prefetch m host; repeat 3 <<< memcpy p d async; launch increment d >>>; "
           "alloc device 1MB async as a; free a async; sync")
    trace = sim.shell.session.trace
    assert {e.operation for e in trace} >= {*operations.MEMCPY.values(), operations.MEMSET, operations.KERNEL,
                                            *operations.PREFETCH.values(), operations.ALLOC_ASYNC,
                                            operations.FREE_ASYNC}
    assert all(isinstance(e, TraceEntry) and e.operation in OPERATIONS for e in trace)
    assert all(of_text(s["op"])[0] in OPERATIONS for s in sim.ok("timeline")["spans"])


# ------------------------------------------------------------------ nothing outside the table reads an operation's text
MATCHERS = ("startswith", "endswith", "removeprefix", "removesuffix")


def _strings(node) -> list[str]:
    """The string literals a node is (a constant; an f-string's text before its first value) or holds (a tuple,
    list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return [node.values[0].value + "…"]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def op_text_matches(source: str) -> list[tuple[int, str]]:
    """(line, code) where source matches an operation's text: `.startswith("memcpy")` and its kin on an operation's
    word, a comparison with an operation's full text (`== "memcpy h2d"`, `in ("prefetch device", …)`), or a table keyed
    by it (`{"memcpy h2d": "H", …}`). A bare word compared with `==` ("memset") is a command's or a method's name too,
    and is left alone."""
    found = []
    for node in ast.walk(ast.parse(source)):
        hits = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MATCHERS:
            hits = [s for a in node.args for s in _strings(a) if s.strip() in WORDS | KEYS
                    or s.strip().split(" ", 1)[0] in WORDS and s.startswith(tuple(k for k in KEYS if " " in k))]
        elif isinstance(node, ast.Compare):
            hits = [s for side in (node.left, *node.comparators) for s in _strings(side)
                    if " " in s and s in KEYS or s.endswith(" …") and s.split(" ", 1)[0] in WORDS]
        elif isinstance(node, ast.Dict):
            hits = [s for k in node.keys if k is not None for s in _strings(k) if " " in s and s in KEYS]
        if hits:
            found.append((node.lineno, ast.unparse(node)[:80]))
    return found


@pytest.mark.parametrize("code", [
    'rate = e["op"].startswith("memcpy")',
    'name = e["op"].removeprefix("kernel ")',
    'if op in ("memcpy h2d", "prefetch device"): pass',
    'ok = entry.op != "memcpy d2h"',
    'GLYPH = {"memcpy h2d": "H", "memset": "M"}',
    'x = op.startswith(("callback", "prefetch"))',
    'if entry["op"] != f"memcpy {d[\'direction\']}": pass',
])
def test_the_scan_finds_a_match_on_an_operations_text(code):
    assert op_text_matches(code)


@pytest.mark.parametrize("code", [
    'if method == "memset": pass',  # a contract method's name
    'if act.name in ("fill", "advise"): pass',
    'by = f"memcpy {direction} {kind}"',  # a label, not a match
    'if cmd.spec.name.startswith("expect"): pass',
])
def test_the_scan_leaves_names_and_labels_alone(code):
    assert not op_text_matches(code)


def test_no_module_outside_the_table_matches_an_operations_text():
    bad = [f"{path.relative_to(ROOT.parent)}:{line}: {code}" for path in sorted(ROOT.rglob("*.py"))
           if path != Path(operations.__file__) for line, code in op_text_matches(path.read_text())]
    assert not bad, "read the operation's row (cudashell/model/operations.py) instead:\n" + "\n".join(bad)

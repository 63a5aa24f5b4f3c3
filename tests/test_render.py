"""Every kind of result a handler can return is a registered result type (Result.KINDS) with its view, and
text output at 80 and 120 columns keeps parts of buffers and pointers whole."""

from __future__ import annotations

import pytest

from cudashell.output import render
from cudashell.output.results import Result


def test_every_result_kind_has_a_type_with_a_view():
    from cudashell.language import registry

    registry.load()  # the kinds beside their handlers register as the commands are imported
    assert len(Result.KINDS) > 30
    for kind, cls in Result.KINDS.items():
        assert cls.kind == kind
        assert cls.text is not Result.text or cls.lines is not Result.lines, f"{kind}: neither text() nor lines()"


@pytest.mark.parametrize("width", [80, 120])
def test_every_result_that_comes_out_of_real_runs_is_its_kinds_type_and_renders(real_runs, width):
    """The results of fuzzed lines, the demos and the benches (conftest.real_runs): each one's type is the one
    registered for its kind, and its view draws it as text (a table fits the width it is given)."""
    assert len(real_runs.results) > 30  # the runs returned results of many kinds
    assert set(real_runs.results) <= set(Result.KINDS)
    for kind, results in real_runs.results.items():
        for result in results:
            assert type(result) is Result.KINDS[kind]
            text = render.human(result, "simple", width)
            assert isinstance(text, str)


def test_a_copy_of_parts_reads_back_in_the_shells_own_syntax():
    import io

    from cudashell.backends.sim import SimBackend
    from cudashell.frontends.shell import Shell

    out = io.StringIO()
    shell = Shell(SimBackend(), out=out, err=out)
    shell.session.settings["width"] = "80"
    shell.execute("alloc pinned 64MB as h; alloc device 64MB as d; memcpy h[32MB:+32MB] d[32MB:] async")
    shell.close()
    text = out.getvalue()
    assert "memcpy h2d h[32MB:+32MB] → d[32MB:+32MB]: 32 MiB" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_the_quick_simple_table_is_tabulates_byte_for_byte():
    """`ls` draws its table without tabulate (for speed): the same text for any cells it accepts, and it declines
    (None) what tabulate measures differently — tabs, newlines, wide or non-ASCII characters, ragged rows."""
    import random

    from tabulate import tabulate

    rng = random.Random(7)
    words = ["", "-", "a", " b ", "0x7f0000", "same (UVA)", "12", "3.5", "pinned, mapped", "  ", "x" * 30, "name"]
    odd = ["\tq", "a\nb", "µs", "漢"]
    taken = 0
    for _ in range(3000):
        k, m = rng.randint(1, 8), rng.randint(0, 6)
        pool = words + (odd if rng.random() < 0.3 else [])
        heads = [rng.choice(pool) for _ in range(k)]
        rows = [[rng.choice(pool) for _ in range(k)] for _ in range(m)]
        quick = render._simple_left(rows, heads)
        if any(c in odd for c in (*heads, *(c for r in rows for c in r))):
            assert quick is None
            continue
        taken += 1
        assert quick == tabulate(rows, heads, "simple", colalign=["left"] * k, disable_numparse=True)
    assert taken > 1000
    assert render._simple_left([["a"]], ["x", "y"]) is None  # ragged

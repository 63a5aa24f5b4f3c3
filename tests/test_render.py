"""Every kind of result a handler can return has one view (render.VIEWS), and text output at 80 and 120
columns keeps parts of buffers and pointers whole."""

from __future__ import annotations

import re
from pathlib import Path

from cudashell import render

SOURCE = Path(render.__file__).parent


def test_every_result_kind_in_the_code_has_a_view():
    kinds = {m for f in SOURCE.rglob("*.py") for m in re.findall(r'Result\(\s*"(\w+)"', f.read_text())}
    assert len(kinds) > 30
    assert kinds - set(render.VIEWS) == set()


def test_a_copy_of_parts_reads_back_in_the_shells_own_syntax():
    import io

    from cudashell.backends.sim import SimBackend
    from cudashell.shell import Shell

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

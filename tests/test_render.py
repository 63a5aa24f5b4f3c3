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

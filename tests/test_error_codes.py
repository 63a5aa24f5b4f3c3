"""Every code the shell raises is in the catalogue the reference lists (errors.SHELL_CODES)."""

from __future__ import annotations

import re
from pathlib import Path

from cudashell.errors import SHELL_CODES

SOURCE = Path(__file__).resolve().parent.parent / "cudashell"


def raised_codes() -> set[str]:
    codes = set()
    for path in SOURCE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        codes |= set(re.findall(r'(?:ShellError|Fault|CompileError)\(\s*"([A-Z_]+)"', text))
        codes |= set(re.findall(r'self\.dead\s*(?:,\s*self\.answering)?\s*=\s*"([A-Z_]+)"', text))
    return {c for c in codes if not c.startswith("CUDA_ERROR_")}


def test_every_code_raised_is_in_the_catalogue():
    codes = raised_codes()
    assert len(codes) > 25  # the scan finds them
    assert codes - set(SHELL_CODES) == set()


def test_the_catalogue_has_no_code_nothing_raises():
    assert set(SHELL_CODES) - raised_codes() - {"USAGE"} == set()  # USAGE comes from errors.usage()

"""The demos shipped in the package (demos/*.cush): where they are and what each is called — for `demo` and
for completion, which must not import a command module to know them."""

from __future__ import annotations

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent / "demos"


def demos() -> dict[str, str]:
    """Shipped demos: name → the title on their first line."""
    out = {}
    for path in sorted(DEMO_DIR.glob("*.cush")):
        first = path.read_text(encoding="utf-8").splitlines()[0]
        out[path.stem] = first.lstrip("# ").strip()
    return out

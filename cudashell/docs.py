"""docs/commands.md, generated from the registry. `python -m cudashell.docs --write` refreshes it;
a test fails when the file is stale."""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import SHELL_CODES
from .registry import GROUPS, specs

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "commands.md"


def reference_markdown() -> str:
    out = ["# cudashell command reference", "",
           "Generated from the command registry by `python -m cudashell.docs --write`; do not edit by hand.",
           "Keywords are case-insensitive; `[x]` is optional, `a|b` a choice, `…` repeats. Sizes: `4096`, "
           "`4KB`/`4KiB`, `64MB`, `1GiB`, `2^20` (units are powers of 1024).", ""]
    for group in GROUPS:
        group_specs = [s for s in specs() if s.group == group]
        if not group_specs:
            continue
        out += [f"## {group}", ""]
        for s in group_specs:
            out += [f"### `{s.name}`", "", s.summary + ".", "", "```", s.syntax(), "```", ""]
            if s.details:
                out += [s.details, ""]
            out += [f"- Example: `{s.example}`", f"- CUDA: {s.cuda}"]
            if s.aliases:
                out.append(f"- Aliases: {', '.join(s.aliases)}")
            out.append("")
    out += ["## Error codes", "", "The driver's refusals keep its `CUDA_ERROR_*` names; the shell's own codes:", "",
            "| code | meaning |", "|---|---|"] + [f"| `{c}` | {m} |" for c, m in SHELL_CODES.items()] + [""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = reference_markdown()
    if "--write" in argv:
        REFERENCE.write_text(text)
        print(f"wrote {REFERENCE}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

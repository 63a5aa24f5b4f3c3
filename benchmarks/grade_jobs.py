"""Grading a class in parallel (issue 38): 40 submissions — the docs/grading example's right, slow and wrong, copied
round — graded on the simulator with `--jobs 2` against `--jobs 1` in the same run, the grades compared. Target:
≥ 1.8× faster with two jobs on a 2-core machine. `python benchmarks/grade_jobs.py [SUBMISSIONS] [JOBS]`."""

from __future__ import annotations

import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "grading"


def run(checks: Path, folders: list[str], jobs: int) -> tuple[float, list[tuple]]:
    from cudashell.frontends.cli import main
    from cudashell.frontends.environment import Environment

    out = io.StringIO()
    with tempfile.TemporaryDirectory() as state:
        env = Environment(stdin=None, stdout=out, stderr=io.StringIO(), stdin_isatty=False, stdout_isatty=False,
                          config_dir=Path(state) / "config", state_dir=Path(state) / "state")
        t0 = time.perf_counter()
        main(["grade", "--backend", "sim", "--json", "--jobs", str(jobs), str(checks), *folders], env)
        seconds = time.perf_counter() - t0
    grades = [json.loads(line)["result"] for line in out.getvalue().splitlines()]
    return seconds, [(g["submission"], g["score"], [c["status"] for s in g["sections"] for c in s["checks"]])
                     for g in grades]


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    with tempfile.TemporaryDirectory() as tmp:
        folders = []
        for i in range(count):
            who = ("right", "slow", "wrong")[i % 3]
            folder = Path(tmp) / f"student{i:03d}-{who}"
            shutil.copytree(EXAMPLE / who, folder)
            folders.append(str(folder))
        one, graded_one = run(EXAMPLE / "checks.cush", folders, 1)
        many, graded_many = run(EXAMPLE / "checks.cush", folders, jobs)
    same = graded_one == graded_many
    print(f"{count} submissions: --jobs 1 {one:.1f} s ({one / count:.2f} s each), --jobs {jobs} {many:.1f} s: "
          f"{one / many:.2f}× faster (target ≥ 1.8× with 2 jobs); grades {'the same' if same else 'DIFFERENT'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())

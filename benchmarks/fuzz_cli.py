"""Generated lines through the program a person runs: scripts of fuzzed lines handed to `python -m cudashell
--keep-going` (text and `--json`), and the same lines piped to its standard input. Counts processes that print
a traceback or INTERNAL_ERROR, end with an exit code outside the documented ones, hang, or (with `--json`)
print a line that is not one JSON object. `python benchmarks/fuzz_cli.py [LINES] [PROCESSES] [FIRST_SEED]`."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import cudashell.commands  # noqa: E402,F401  (the registry the generator draws from)
from cudashell.backends.profile import Profile  # noqa: E402
from cudashell.backends.sim import SimBackend  # noqa: E402
from cudashell.errors import ShellError  # noqa: E402
from cudashell.frontends.shell import Shell, syntax_errors  # noqa: E402
from cudashell.language.grammar import split_commands  # noqa: E402
from tests import fuzzing  # noqa: E402

SCRIPT_LINES = 500
EXIT_CODES = {0, 1}  # every script runs to its end under --keep-going: ok, or some command failed
TIMEOUT_S = 300
CHECKER = Shell(SimBackend(Profile.load(None)), "check", out=io.StringIO(), err=io.StringIO())


def generate(seed: int, lines: int, workdir: Path) -> list[str]:
    """Lines as the in-process fuzzer makes them, run on a simulator as they are made so names stay live."""
    fuzz = fuzzing.Fuzzer(seed, workdir)
    out = []
    for start in range(0, lines, SCRIPT_LINES):
        shell = Shell(SimBackend(Profile.load(None)), "gen", out=io.StringIO(), err=io.StringIO())
        shell.session.script_dir, shell.dirs = workdir, [workdir]
        home = os.getcwd()
        os.chdir(workdir)
        try:
            while len(out) < min(start + SCRIPT_LINES, lines):
                line = fuzz.line(shell)
                shell.execute(line)
                if not cuts_script(line):
                    out.append(line)
                shell.quitting = False
                shell.out.seek(0), shell.out.truncate(), shell.err.seek(0), shell.err.truncate()
        finally:
            os.chdir(home)
            shell.close()
    return out


def cuts_script(line: str) -> bool:
    """A line after which the script's later lines would never be tried: `quit` in it (run even after a failure
    under --keep-going), or a `<<<` left open (in a file, a block runs on to its `>>>` lines later)."""
    if line.count("<<<") != line.count(">>>"):
        return True
    try:
        return any(seg.tokens and seg.tokens[0].text.lower() in ("quit", "exit") for seg in split_commands(line))
    except ShellError:
        return False


def parses(line: str) -> bool:
    return not syntax_errors(CHECKER.script_items(line))


def one_process(args: list[str], workdir: Path, stdin: str | None, json_lines: bool) -> list[str]:
    """Run cudashell once; what went wrong, if anything."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(workdir / "config"), "XDG_STATE_HOME": str(workdir / "state")}
    try:
        p = subprocess.run([sys.executable, "-m", "cudashell", "--backend", "sim", "--sim-profile",
                            str(workdir / "budget.json"), "--keep-going", *args], cwd=workdir, input=stdin,
                           capture_output=True, text=True, errors="replace", timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return [f"{args}: hung past {TIMEOUT_S} s"]
    problems = []
    both = p.stdout + p.stderr
    if "Traceback" in both or "INTERNAL_ERROR" in both:
        at = both.find("Traceback") if "Traceback" in both else both.find("INTERNAL_ERROR")
        problems.append(f"{args}: {both[max(0, at - 200):at + 400]!r}")
    if p.returncode not in EXIT_CODES:
        problems.append(f"{args}: exit {p.returncode}; {p.stderr[-300:]!r}")
    if json_lines:
        for text in p.stdout.splitlines():
            try:
                json.loads(text)
            except ValueError:
                problems.append(f"{args}: not JSON: {text[:200]!r}")
                break
    return problems


def main() -> int:
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 12_000
    procs = int(sys.argv[2]) if len(sys.argv) > 2 else os.cpu_count() or 1
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        jobs = []
        for seed in range(first, first + procs):
            work = Path(d) / str(seed)
            work.mkdir()
            (work / "budget.json").write_text(json.dumps({"storage_budget": fuzzing.STORAGE}))
            text = generate(seed, lines // procs, work)
            for i in range(0, len(text), SCRIPT_LINES):
                script = work / f"fuzz{i // SCRIPT_LINES}.cush"
                chunk = text[i:i + SCRIPT_LINES]
                # a file with a syntax error is refused whole before it runs: files get the lines that parse,
                # standard input (run line by line) gets them all
                script.write_text("\n".join(x for x in chunk if parses(x)) + "\n", errors="surrogatepass")
                jobs.append(([script.name], work, None, False))
                jobs.append((["--json", script.name], work, None, True))
                jobs.append(([], work, "\n".join(chunk) + "\n", False))
        generated = time.perf_counter() - t0
        with ThreadPoolExecutor(procs) as pool:
            problems = [p for found in pool.map(lambda j: one_process(*j), jobs) for p in found]
    wall = time.perf_counter() - t0
    print(f"lines {lines} (each run three ways: script, --json script, standard input), {len(jobs)} processes, "
          f"in {wall:.1f} s ({generated:.1f} s generating)")
    print(f"problems {len(problems)}")
    for p in problems[:10]:
        print(f"  {p[:600]}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

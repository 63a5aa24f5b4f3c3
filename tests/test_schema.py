"""The published JSON Schema (`cudashell --json-schema`, docs/json-schema.json) holds for real output, not samples:
the scenario below on both backends; on the simulator every demo, every example script, a fuzzer's generated lines,
and the runs that reach the kinds those leave out (user kernels on each kind of memory, every bench with its
defaults, two GPUs, calibrate, lessons, advice, grade). A result kind no run produced valid output of fails."""

from __future__ import annotations

import io
import json
import os
import re
import typing
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")

from cudashell.backends.profile import Profile  # noqa: E402
from cudashell.backends.sim import SimBackend  # noqa: E402
from cudashell.commands.kernels import LaunchDataCountsGlobal  # noqa: E402
from cudashell.frontends.shell import Shell  # noqa: E402
from cudashell.output.results import Result, json_schema  # noqa: E402
from cudashell.teaching.shipped import demos  # noqa: E402
from tests import fuzzing  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# a session that meets most kinds of result, errors among them
SCENARIO = """alloc pinned 1MB mapped as p; alloc device 1MB as d; alloc pageable 64KB as h; alloc managed 64KB as m
register h; info h; info p; ls; fill p iota float32; show p count 8; memcpy p d async; memcpy d p[0:4KB]
memset d 0; memset d 1 async; stream create; stream create nonblocking; streams; stream query 1; event create e
event record e stream 1; memcpy p d 4KB async stream 1; event record f stream 1; sync stream 1; elapsed e f
event destroy e; callback stream 1 hello; sync; launch increment d 16; launch spin 1000 stream 2; sync
hold; memcpy p d 4KB async stream 1; release; prefetch m device; advise m preferred device; sync; compare p d
checksums; timeline; profile; history; kernels; devices; doctor; contexts; settings; echo done; say hi
expect ok; unregister h; show nosuch; memcpy p d 2MB; free d; repeat 3 <<< memcpy h2d p[0:4] p[4:8] >>>
help memcpy; help memcpy memset; help; set time on; ls; set time off; free all; ls
alloc pitched 1000x4 as img; alloc pinned 4000 as q; memcpy2d q img 1000x4; alloc pitched 1000x2x2 as vol
memcpy3d q vol 1000x2x2 async; sync; info img; ls"""


@pytest.fixture(scope="module")
def validator():
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _lines(shell_out: io.StringIO) -> list[dict]:
    return [json.loads(x) for x in shell_out.getvalue().splitlines() if x.strip()]


def _invalid(validator, objs) -> list[str]:
    """One line per wrong line of output: its deepest reason (an anyOf's own message names no field; the branch
    that got furthest into the data says what is wrong)."""
    out = []
    for o in objs:
        for e in validator.iter_errors(o):
            e = max(_leaves(e), key=lambda leaf: len(leaf.absolute_path))
            out.append(f"{o['cmd'][:100]!r} ({o.get('kind')}): {e.message[:200]} at "
                       f"{'/'.join(map(str, e.absolute_path))}")
    return out


def _leaves(e) -> list:
    return [leaf for c in e.context for leaf in _leaves(c)] if e.context else [e]


def test_the_schema_names_every_kind_of_result_and_each_has_its_type():
    kinds = set(json_schema()["properties"]["kind"]["anyOf"][0]["enum"])
    assert kinds == set(Result.KINDS) and len(kinds) > 40
    assert all(getattr(cls, "Data", None) is not None for cls in Result.KINDS.values())


def test_the_schema_refuses_what_no_type_declares(validator):
    line = {"cmd": "ls", "ok": True, "kind": "ls", "error": None,
            "result": {"buffers": [], "totals": {"pageable": 0, "pinned": 0, "device": 0, "managed": 0}}}
    assert not _invalid(validator, [line])
    assert _invalid(validator, [{**line, "result": {**line["result"], "surprise": 1}}])
    assert _invalid(validator, [{**line, "result": {**line["result"], "totals": "none"}}])
    assert _invalid(validator, [{**line, "kind": "no-such-kind"}])


def test_a_scenario_on_each_backend_validates(cush, validator):
    for line in SCENARIO.splitlines():
        for command in line.split("; "):
            cush.run(command)
    objs = _lines(cush.out)
    assert len(objs) > 60 and {o["kind"] for o in objs if o["ok"]} >= {"alloc", "copy", "ls", "timeline", "event"}
    assert not _invalid(validator, objs)
    assert any(not o["ok"] and o["error"]["code"] == "NO_SUCH_BUFFER" for o in objs)


def test_the_published_schema_is_the_one_the_types_make():
    published = Path(__file__).resolve().parent.parent / "docs" / "json-schema.json"
    assert json.loads(published.read_text()) == json_schema(), \
        "docs/json-schema.json is stale: `python -m cudashell.docs --write`"


def test_the_cli_prints_the_schema_and_starts_nothing(tmp_path, monkeypatch):
    from cudashell.backends import prestart
    from cudashell.frontends import entry

    started = []
    monkeypatch.setattr(prestart, "start", lambda *where: started.append(where))
    from cudashell.frontends.environment import Environment, ExitStatus

    env = Environment(stdin=io.StringIO(""), stdout=io.StringIO(), stderr=io.StringIO(), config_dir=tmp_path,
                      state_dir=tmp_path)
    assert entry.main(["--json-schema"], env) == ExitStatus.SUCCESS
    assert json.loads(env.stdout.getvalue()) == json_schema() and env.stderr.getvalue() == ""
    assert started == []  # no GPU worker was started for it


# ------------------------------------------------------------------ real runs on the simulator, every kind among them
TWICE = "kernel define twice <<< __global__ void twice(const float *a, float *b, int n) { int i = blockIdx.x * " \
        "blockDim.x + threadIdx.x; if (i < n) b[i] = 2 * a[i]; } >>>"
HELLO = "kernel define hello <<< __global__ void hello(int n) { if (threadIdx.x == 0) printf(\"n=%d\\n\", n); } >>>"

# what the demos and the examples leave out (the fuzzer meets some of it by chance, so it is driven here): each list
# runs on a fresh shell, on the named profile; `{tmp}` is a folder of the test's own
DRIVES = {
    "a batch of copies": (None, [
        "alloc pinned 8KB as p", "alloc device 8KB as d", "stream create", "memcpy batch <<< memcpy p[0:4KB] "
        "d[4KB:]; memcpy d[0:4KB] p[4KB:] >>> stream 1 order any", "sync", "timeline"]),
    "kernels on each kind of memory": (None, [
        TWICE, HELLO, "kernels", "alloc device 4KB as d", "alloc managed 4KB as m", "alloc pinned 4KB mapped as z",
        "alloc pageable 4KB as h", "register h mapped", "alloc pageable 4KB as u", "fill d 1 dtype float32",
        "launch twice d d 1024", "launch twice m d 1024", "launch twice z d 1024", "launch twice h d 1024",
        "launch twice u d 1024", "launch twice z d 8 grid 2 block 4 show-access", "launch hello 7 grid 1 block 32",
        "launch sum z m d", "sync", "checksum d m", "compare d m", "compare z z", "info m", "info z",
        "prefetch m device", "advise m readmostly", "info m", "streams", "reset", "ls", "quit"]),
    "every bench with its defaults": (None, [
        "bench memcpy", "bench memcpy d2d", "bench memcpy bidir pinned sizes 64KB reps 2",
        "bench memcpy h2d writecombined registered mapped managed sizes 64KB,1MB reps 2 ungated", "bench latency",
        "bench alloc", "bench zerocopy", "bench overlap", "bench peer"]),
    "two GPUs": ("two-h200", [
        TWICE, "devices", "device", "bench peer 1MB reps 2", "alloc device 4KB as a0", "device use 1",
        "peer enable 1 0", "alloc device 4KB as b1", "launch twice a0 b1 1024", "peer disable 1 0", "device use 0",
        "calibrate out {tmp}/profile.json"]),
    "pools and stream-ordered races": (None, [
        "stream create nonblocking", "pool create as mine", "alloc device 1MB async stream 1 pool mine as x",
        "memset x 1 async", "pool set mine threshold max", "pool trim mine", "free x async stream 1", "sync", "pool",
        "pool destroy mine"]),
    "help, settings, history, units": (None, [
        "help", "help memcpy", "help memcpy memset", "demo", "settings", "set time on", "units 64MB", "units 3",
        "doctor", "history", 'section "one" points 2.5', "section two"]),
    "pitched memory": (None, [
        "alloc pitched 1000x4 as img", "alloc pinned 4000 as q", "memcpy2d q img 1000x4", "alloc pitched 100x2x2 as v",
        "memcpy3d q v 100x2x2 async", "sync", "info img", "ls"]),
    "lessons and advice": (None, [
        "lesson list", "lesson pinned", "lesson hint", "lesson answer", "lesson skip", "lesson quit", "lesson list",
        "set advice on", "alloc pageable 4KB as h", "alloc device 4KB as d", "memcpy h d async", "sync", "advice",
        "compare ref h200"]),
}


def _shell_objs(profile: str | None, commands: list[str]) -> list[dict]:
    out = io.StringIO()
    shell = Shell(SimBackend(Profile.load(profile)), out=out, err=io.StringIO(), json_mode=True, quit_ends_shell=False)
    try:
        for command in commands:
            shell.execute(command)
    finally:
        shell.close()
    return _lines(out)


def _example(path: Path) -> list[dict]:
    """An example script, on the profile its header names (`cudashell --sim-profile one-copy-engine …`)."""
    profile = re.search(r"--sim-profile (\S+)", path.read_text(encoding="utf-8"))
    return _shell_objs(profile and profile[1], [f"run {path}"])


def _graded(tmp: Path) -> list[dict]:
    from cudashell.frontends.cli import main
    from cudashell.frontends.environment import Environment

    out = io.StringIO()
    env = Environment(stdin=None, stdout=out, stderr=io.StringIO(), stdin_isatty=False, stdout_isatty=False,
                      config_dir=tmp / "config", state_dir=tmp / "state")
    grading = ROOT / "docs" / "grading"
    main(["grade", "--backend", "sim", "--json", str(grading / "checks.cush"), str(grading / "wrong")], env)
    return _lines(out)


FUZZ_LINES = 1500
EXAMPLES = sorted((ROOT / "examples").glob("*.cush"))


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory, validator) -> dict[str, list[tuple[dict, list[str]]]]:
    """Every run's `--json` objects, by what ran (each demo, each example, the fuzzer's lines, each drive, grade),
    each with what the schema found wrong in it (validated once: it takes most of the time)."""
    tmp = tmp_path_factory.mktemp("real_runs")
    runs = {f"demo {name}": _shell_objs(None, [f"demo {name}"]) for name in demos()}
    runs.update({f"run {path.name}": _example(path) for path in EXAMPLES})
    fuzzed = tmp / "fuzz"
    fuzzed.mkdir()
    runs["fuzz"] = _lines(io.StringIO(fuzzing.json_output(0, FUZZ_LINES, fuzzed)))
    home = os.getcwd()
    os.chdir(tmp)  # a lesson's or a drive's relative paths
    try:
        runs.update({name: _shell_objs(profile, [c.replace("{tmp}", str(tmp)) for c in commands])
                     for name, (profile, commands) in DRIVES.items()})
    finally:
        os.chdir(home)
    runs["grade"] = _graded(tmp)
    return {name: [(o, _invalid(validator, [o])) for o in objs] for name, objs in runs.items()}


def _problems(runs) -> list[str]:
    return [p for objs in runs for _, problems in objs for p in problems]


def test_every_demo_and_example_runs_and_validates(real_runs):
    scripts = {k: v for k, v in real_runs.items() if k.startswith(("demo ", "run "))}
    assert len(scripts) == len(demos()) + len(EXAMPLES)
    for name, objs in scripts.items():
        assert objs and objs[-1][0]["ok"], (name, objs[-1][0])
    assert _problems(scripts.values()) == []


def test_generated_lines_validate(real_runs):
    objs = real_runs["fuzz"]
    assert len(objs) > FUZZ_LINES // 2 and sum(o["ok"] for o, _ in objs) > 100
    assert _problems([objs]) == []


def test_the_runs_for_the_other_kinds_validate(real_runs):
    assert _problems(real_runs[name] for name in [*DRIVES, "grade"]) == []
    assert [o["kind"] for o, _ in real_runs["grade"]] == ["grade"]


def test_a_launch_counts_the_memory_kinds_the_simulator_names_and_the_schema_declares(real_runs):
    launches = [o["result"] for objs in real_runs.values() for o, _ in objs if o["ok"] and o["kind"] == "launch"]
    touched = {kind for r in launches if r["counts"] for kind in r["counts"]["global"]}
    assert touched == set(typing.get_type_hints(LaunchDataCountsGlobal))  # device, peer, managed, zero-copy


def test_every_result_kind_has_real_output_that_validates(real_runs):
    valid = {o["kind"] for objs in real_runs.values() for o, problems in objs if o["ok"] and not problems}
    assert sorted(set(Result.KINDS) - valid) == []

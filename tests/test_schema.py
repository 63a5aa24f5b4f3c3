"""The published JSON Schema (`cudashell --json-schema`, docs/json-schema.json) holds for real output: every
command of the scenarios below on both backends, and every demo on the simulator, validates against it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")

from cudashell import render  # noqa: E402
from cudashell.backends.sim import SimBackend  # noqa: E402
from cudashell.results import Result, json_schema  # noqa: E402
from cudashell.shell import Shell  # noqa: E402

# a session that meets most kinds of result, errors among them
SCENARIO = """alloc pinned 1MB mapped as p; alloc device 1MB as d; alloc pageable 64KB as h; alloc managed 64KB as m
register h; info h; info p; ls; fill p iota float32; show p count 8; memcpy p d async; memcpy d p[0:4KB]
memset d 0; memset d 1 async; stream create; stream create nonblocking; streams; stream query 1; event create e
event record e stream 1; memcpy p d 4KB async stream 1; event record f stream 1; sync stream 1; elapsed e f
event destroy e; callback stream 1 hello; sync; launch increment d 16; launch spin 1000 stream 2; sync
hold; memcpy p d 4KB async stream 1; release; prefetch m device; advise m preferred device; sync; compare p d
checksums; timeline; profile; history; kernels; devices; doctor; contexts; settings; echo done; say hi
expect ok; unregister h; show nosuch; memcpy p d 2MB; free d; repeat 3 <<< memcpy h2d p[0:4] p[4:8] >>>
help memcpy; help memcpy memset; help; set time on; ls; set time off; free all; ls"""


@pytest.fixture(scope="module")
def validator():
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _lines(shell_out: io.StringIO) -> list[dict]:
    return [json.loads(x) for x in shell_out.getvalue().splitlines() if x.strip()]


def _invalid(validator, objs) -> list[str]:
    """One line per wrong line of output: the deepest reason (an anyOf's own message names no field)."""
    out = []
    for o in objs:
        for e in validator.iter_errors(o):
            e = jsonschema.exceptions.best_match([e, *e.context]) if e.context else e
            while e.context:
                e = jsonschema.exceptions.best_match(e.context)
            out.append(f"{o['cmd']!r} ({o.get('kind')}): {e.message[:200]} at {'/'.join(map(str, e.absolute_path))}")
    return out


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


@pytest.mark.parametrize("demo", sorted(p.stem for p in (Path(render.__file__).parent / "demos").glob("*.cush")))
def test_every_demo_validates_on_the_simulator(demo, validator):
    out = io.StringIO()
    shell = Shell(SimBackend(), out=out, err=out, json_mode=True)
    try:
        shell.execute(f"demo {demo}")
    finally:
        shell.close()
    objs = _lines(out)
    assert objs and all(o["ok"] for o in objs[-1:]), objs[-1:]
    assert not _invalid(validator, objs)


def test_the_published_schema_is_the_one_the_types_make():
    published = Path(__file__).resolve().parent.parent / "docs" / "json-schema.json"
    assert json.loads(published.read_text()) == json_schema(), \
        "docs/json-schema.json is stale: `python -m cudashell.docs --write`"


def test_the_cli_prints_the_schema_and_starts_nothing(tmp_path):
    from cudashell import entry
    from cudashell.environment import Environment, ExitStatus

    env = Environment(stdin=io.StringIO(""), stdout=io.StringIO(), stderr=io.StringIO(), config_dir=tmp_path,
                      state_dir=tmp_path)
    assert entry.main(["--json-schema"], env) == ExitStatus.SUCCESS
    assert json.loads(env.stdout.getvalue()) == json_schema() and env.stderr.getvalue() == ""
    assert entry._started is None  # no GPU worker was started for it

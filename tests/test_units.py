"""`units`: a command added by its own module alone (commands/units.py: spec, handler and result) — the registry,
help, completion, the docs and the JSON Schema find it there."""

from __future__ import annotations

from cudashell.language.registry import REGISTRY, load
from cudashell.output.results import Result, json_schema


def test_units_reads_sizes_as_powers_of_1024(sim):
    r = sim.ok("units 64MB")
    assert r == {"bytes": 64 << 20, "text": "64 MiB", "shortest": "64MB", "power_of_two": 26,
                 "decimal_mb": 67.108864}
    assert sim.ok("units 1000")["power_of_two"] is None
    assert sim.fails("units 1.5MB")["code"] == "USAGE"


def test_the_new_command_is_everywhere_its_spec_and_result_reach():
    load()
    assert "units" in REGISTRY and REGISTRY["units"].group == "session"
    assert Result.KINDS["units"].__module__ == "cudashell.commands.units"
    assert "UnitsData" in json_schema()["$defs"]

"""How values are written: a size as a size in text and as bytes in JSON, JSON floats rounded to what was measured
(no binary noise) and still numbers, and a buffer's own values never rounded."""

from __future__ import annotations

import json
import re

from cudashell.backends.sim import SimBackend
from cudashell.output import render

from .conftest import Cush, text_run


# ------------------------------------------------------------------ sizes
def test_set_pinlimit_shows_a_size_and_keeps_bytes_in_json():
    text = text_run(["set pinlimit 1GB", "set", "set pinlimit 1000000"])
    assert text.splitlines()[0] == "pinlimit = 1 GiB"
    assert "pinlimit = 1 GiB" in text.splitlines()[1:]
    assert text.splitlines()[-1] == "pinlimit = 976.56 KiB (1000000 B)"
    assert Cush(SimBackend()).ok("set pinlimit 1GB")["settings"]["pinlimit"] == 1 << 30


# ------------------------------------------------------------------ JSON floats
NOISE = re.compile(r"\d\.\d{13,}|\de-\d\d\d")  # 14+ significant digits: binary noise, not a measurement


def test_json_floats_are_rounded_to_what_was_measured_and_stay_numbers():
    import jsonschema

    from cudashell.output.results import json_schema

    c = Cush(SimBackend())
    lines = []
    for cmd in ["alloc pinned 1MB as p0", "alloc device 1MB as d0", "memcpy p0 d0", "event create a",
                "event create b", "event record a", "memcpy p0 d0 async", "launch increment d0", "event record b",
                "sync", "elapsed a b", "timeline", "profile", "bench overlap streams 1,2"]:
        start = c.out.tell()
        c.shell.execute(cmd)
        c.out.seek(start)
        lines += c.out.read().splitlines()
    schema = json_schema()
    for line in lines:
        assert not NOISE.search(line), line
        jsonschema.validate(json.loads(line), schema)
    alloc = json.loads(lines[1])["result"]
    assert alloc["host_seconds"] == round(c.shell.backend.profile.device_alloc, 9) and isinstance(alloc["host_seconds"], float)
    copy = json.loads(lines[2])["result"]
    assert copy["gbps"] == 42.82


def test_a_buffers_own_values_are_never_rounded():
    c = Cush(SimBackend())
    c.ok("alloc pageable 64 as h")
    c.ok("fill h 0.1 dtype float32")
    assert c.ok("show h count 1")["values"][0] == 0.10000000149011612
    assert render.rounded({"args": [0.1234567891234], "seconds": 1.0000000000000002}) == \
        {"args": [0.1234567891234], "seconds": 1.0}

"""Advice as it happens: each rule's scenario on both backends (the simulator always; marked gpu for a GPU), the
note said once per occurrence pattern and counted by `advice`, where advice is on by default, and every shipped demo
with exactly the notes it teaches."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cudashell.backends.sim import SimBackend
from cudashell.frontends.shell import Shell
from cudashell.teaching import advice
from cudashell.teaching.shipped import demos

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide.md"


def notes(objs: list[dict]) -> list[str]:
    return [o["result"]["rule"] for o in objs if o["kind"] == "note"]


def advised(cush, line: str) -> list[str]:
    """The rules whose notes a line printed (every command in it must succeed)."""
    objs = cush.run(line)
    assert all(o["ok"] for o in objs), objs
    return notes(objs)


@pytest.fixture
def on(cush):
    cush.ok("set advice on")
    return cush


def test_an_async_copy_from_pageable_memory_says_why_once_per_buffer(on):
    on.ok("alloc pageable 1MB as h; alloc device 1MB as d; alloc pinned 1MB as p")
    assert advised(on, "memcpy p d async; sync") == []  # pinned: truly async
    objs = on.run("memcpy h d async")
    assert notes(objs) == ["pageable-async"]
    note = objs[-1]["result"]
    assert "pageable h" in note["note"] and "staged into pinned memory" in note["note"]  # the sync rule's reason
    assert note["section"] == "docs/guide.md#async-copies-from-pageable-memory"
    assert note["command"] == "memcpy h d async"
    assert advised(on, "sync; memcpy d h async; memcpy h d") == []  # h again: counted, not said again; a plain copy
    # is what it says it is
    rows = on.ok("advice")["notes"]
    assert [(r["rule"], r["count"], r["first"]) for r in rows] == [("pageable-async", 2, "memcpy h d async")]


def test_a_registered_buffer_is_pinned_and_not_advised(on):
    on.ok("alloc pageable 1MB as h; alloc device 1MB as d; register h")
    assert advised(on, "memcpy h d async; sync") == []


def test_async_copies_each_followed_at_once_by_sync(on):
    on.ok("alloc pinned 1MB as p; alloc device 1MB as d")
    assert advised(on, "memcpy p d async; sync; memcpy p d async; sync") == []  # twice is not yet a habit
    assert advised(on, "memcpy p d async; sync") == ["copy-then-sync"]
    assert advised(on, "memcpy p d async; sync") == []  # said once


def test_an_async_copy_with_work_between_it_and_the_sync_is_fine(on):
    on.ok("alloc pinned 1MB as p; alloc device 1MB as d")
    line = "memcpy p d async; launch increment d; sync"
    assert advised(on, "; ".join([line] * 4)) == []


def test_work_on_the_legacy_default_stream_between_blocking_streams(on):
    on.ok("alloc device 1MB as d; stream create as s1; stream create nonblocking as s2; stream create as s3")
    assert advised(on, "launch spin 100 stream s2; launch increment d; sync") == []  # non-blocking: not serialised
    assert advised(on, "launch spin 100 stream s1; launch increment d") == ["legacy-stream"]
    assert advised(on, "sync; launch increment d; launch spin 100 stream s1") == []  # the same pair: said once
    assert advised(on, "sync; launch increment d; launch spin 100 stream s3") == ["legacy-stream"]  # the other way
    assert advised(on, "sync; launch spin 100 stream s1; sync stream s1; launch increment d; sync") == []
    assert [(r["rule"], r["count"]) for r in on.ok("advice")["notes"]] == [("legacy-stream", 3)]


def test_free_between_async_work(on):
    on.ok("alloc device 1MB as d; alloc device 1MB as e; alloc pageable 1MB as h; stream create as s1")
    assert advised(on, "launch spin 100 stream s1; free h") == []  # freeing pageable memory does not sync
    objs = on.run("free d")
    assert notes(objs) == ["free-syncs"] and "stream s1" in objs[-1]["result"]["note"]
    assert advised(on, "launch spin 100 stream s1; sync; free e") == []  # waited for first


def test_many_tiny_copies_of_one_buffer_in_a_row(on):
    on.ok("alloc pinned 1MB as p; alloc device 1MB as d")
    piece = "memcpy p[{0}KB:+1KB] d[{0}KB:+1KB]"
    assert advised(on, "; ".join(piece.format(i) for i in range(7))) == []
    assert advised(on, piece.format(7)) == ["tiny-copies"]  # p to d: one pattern
    assert advised(on, "; ".join(piece.format(i) for i in range(8, 20))) == []
    assert advised(on, "repeat 3 <<< memcpy p d >>>") == []  # large copies break the row


def test_tiny_copies_in_a_repeat_count(on):
    on.ok("alloc pinned 1MB as p; alloc device 1MB as d")
    assert advised(on, "repeat 100 <<< memcpy p[0:+4KB] d[0:+4KB] >>>") == ["tiny-copies"]


def test_kernels_reading_mapped_memory_again(on):
    on.ok("alloc pinned 1MB mapped as z; alloc device 1MB as d")
    assert advised(on, "launch sum z z d; launch sum z z d; fill z 1; launch sum z z d; launch sum z z d") == []
    objs = on.run("launch sum z z d")
    assert notes(objs) == ["mapped-reread"] and "3 kernels have read mapped z" in objs[-1]["result"]["note"]


def test_managed_memory_on_alternating_sides_without_prefetch(on):
    on.ok("alloc managed 1MB as m")
    assert advised(on, "fill m 1; launch increment m; show m count 1; prefetch m device; launch increment m") == []
    assert advised(on, "show m count 1; launch increment m") == []  # counted from the prefetch: 2 switches
    assert advised(on, "show m count 1") == ["managed-pingpong"]
    assert advised(on, "launch increment m; sync; show m count 1") == []  # said once for m


def test_pinning_most_of_ram(on, monkeypatch):
    monkeypatch.setattr(advice, "host_ram", lambda backend: 1 << 30)  # a GPU's host is not pinned to 40% in a test
    assert advised(on, "alloc pinned 256MB as a; alloc pageable 192MB as b") == []
    assert advised(on, "register b") == ["pinned-ram"]  # 448 MiB of 1 GiB
    assert advised(on, "alloc pinned 64MB as c") == []  # still high: said once
    assert advised(on, "free a; alloc pinned 256MB as a") == ["pinned-ram"]  # fell below, climbed again


def test_pinning_most_of_the_simulators_ram():
    """The simulator's profile says how much RAM its host has: 128 GiB; 40% of it needs the pin limit raised."""
    sh = Shell(SimBackend(), "t", out=io.StringIO(), err=io.StringIO(), json_mode=True)
    sh.execute("set advice on; set pinlimit 100GB; alloc pinned 50GB as a; alloc pinned 2GB as b")
    objs = [json.loads(x) for x in sh.out.getvalue().splitlines()]
    assert notes(objs) == ["pinned-ram"]
    assert "52 GiB of the host's 128 GiB RAM is pinned (41%)" in objs[-1]["result"]["note"]
    sh.close()


STRIDED = """kernel define strided <<<
__global__ void strided(const float *in, float *out, int n, int stride)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(i * stride) % n];
}
>>>"""


def test_a_strided_kernel_on_the_simulator_and_never_on_a_gpu(on):
    on.run(STRIDED)
    on.ok("alloc device 1MB as a; alloc device 1MB as b")
    assert advised(on, "launch strided a b 65536 1 grid 256 block 256; sync") == []
    got = advised(on, "launch strided a b 65536 32 grid 256 block 256; sync")
    assert got == (["strided-kernel"] if on.backend.name == "sim" else [])  # counts come from the simulator only


def test_advice_is_off_in_scripts_and_json_unless_asked(sim):
    sim.ok("alloc pageable 1MB as h; alloc device 1MB as d")
    assert advised(sim, "memcpy h d async") == []
    assert sim.ok("advice") == {"advice": "off", "notes": []}
    assert sim.ok("set advice on")["settings"] == {"advice": "on"}
    assert advised(sim, "memcpy h d async") == ["pageable-async"]
    assert sim.fails("set advice maybe")["code"] == "USAGE"


def test_a_failed_command_is_not_advised(on):
    on.ok("alloc pageable 1MB as h; alloc device 1MB as d; hold")
    objs = on.run("memcpy d h async")
    assert objs[-1]["error"]["code"] == "STREAMS_HELD" and notes(objs) == []
    on.ok("release")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "cudashell", "--backend", "sim", "--quiet", *args],
                          capture_output=True, text=True, timeout=60)


def test_the_advice_flag_turns_notes_on_for_scripts_and_json():
    line = "alloc pageable 1MB as h; alloc device 1MB as d; memcpy h d async"
    assert "note:" not in cli("-c", line).stdout
    text = cli("--advice", "-c", line).stdout
    assert re.search(r"^note: memcpy … async from pageable h .*\(docs/guide.md#async-copies-from-pageable-memory\)$",
                     text, re.M)
    objs = [json.loads(x) for x in cli("--advice", "--json", "-c", line).stdout.splitlines()]
    assert objs[-1]["kind"] == "note" and objs[-1]["cmd"] == "(note)"


def test_advice_is_on_at_the_prompt():
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from cudashell.frontends.repl import repl

    out = io.StringIO()
    from cudashell.frontends.cli import build_parser, shell_options
    from cudashell.frontends.environment import Environment

    env = Environment(stdin=None, stdout=None, stderr=None)
    asked = {(argv, interactive): shell_options(build_parser(env).parse_args(argv), interactive, env).advice
             for argv in ((), ("--json",), ("--no-advice",), ("--advice",)) for interactive in (True, False)}
    assert [a for a, on in asked.items() if on] == [((), True), (("--advice",), True), (("--advice",), False)]
    sh = Shell(SimBackend(), "t", out=out, err=out, advice=True)  # as the CLI builds it for the prompt
    with create_pipe_input() as inp:
        inp.send_text("alloc pageable 1MB as h; alloc device 1MB as d; memcpy h d async\n\x04")
        repl(sh, "banner", {"color": "never", "pager": "off"}, input=inp, output=DummyOutput())
    assert "note: memcpy … async from pageable h" in out.getvalue()
    sh2 = Shell(SimBackend(), "t", out=io.StringIO(), err=io.StringIO())
    with create_pipe_input() as inp:
        inp.send_text("quit\n")
        repl(sh2, "banner", {"color": "never"}, input=inp, output=DummyOutput())
    assert sh2.session.settings["advice"] == "off"


# every shipped demo, advice on: the notes it fires, each where the demo teaches it
DEMO_NOTES = {"pinned-vs-pageable": ["pageable-async"], "streams": ["free-syncs"], "coalescing": ["strided-kernel"],
              "pools": ["pool-gives-back"],  # the allocation after a sync at threshold 0
              "pitched": ["narrow-rows"] * 3}  # the image's 100-byte rows out, the 4-byte rows in and out


@pytest.mark.parametrize("name", sorted(demos()))
def test_each_demo_fires_exactly_the_notes_it_teaches(name):
    sh = Shell(SimBackend(), "t", out=io.StringIO(), err=io.StringIO(), json_mode=True)
    assert sh.execute("set advice on")
    assert sh.execute(f"demo {name}")
    objs = [json.loads(x) for x in sh.out.getvalue().splitlines()]
    assert notes(objs) == DEMO_NOTES.get(name, [])
    sh.close()


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(demos()))
def test_each_demo_fires_the_same_notes_on_a_gpu(name):
    from tests.conftest import make_backend

    sh = Shell(make_backend("cuda"), "t", out=io.StringIO(), err=io.StringIO(), json_mode=True)
    try:
        assert sh.execute("set advice on")
        assert sh.execute(f"demo {name}")
        objs = [json.loads(x) for x in sh.out.getvalue().splitlines()]
        assert notes(objs) == [n for n in DEMO_NOTES.get(name, []) if n != "strided-kernel"]
    finally:
        sh.close()


def test_every_rule_has_its_section_in_the_guide():
    headings = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", GUIDE.read_text(encoding="utf-8"), re.M)}
    assert [r.id for r in advice.RULES if r.section.split("#")[1] not in headings] == []
    assert len(advice.RULES) == 12


def test_advice_loads_neither_the_driver_bindings_nor_the_commands():
    """The rules are pure: on a GPU backend (no profile) the host's RAM is read without `cuda.bindings.driver`
    (the architecture keeps it in the worker), and nothing of commands/ is imported."""
    code = """
import sys
from types import SimpleNamespace
from cudashell.teaching import advice
from cudashell.model.machine import meminfo
gpu = SimpleNamespace(capabilities=SimpleNamespace(profile=None))  # what a GPU backend declares: no profile
assert advice.host_ram(gpu) == meminfo()["MemTotal"] > 0
print(sorted(m for m in sys.modules if m.startswith(("cuda.", "cudashell.backends", "cudashell.commands"))))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_async_copy_then_sync_only_in_a_row_of_them(on):
    """A copy-then-sync, other work, another copy-then-sync: the other work breaks the row (the review's program)."""
    on.ok("alloc pinned 1MB as p; alloc device 1MB as d")
    assert advised(on, "memcpy p d async; sync; launch increment d; sync; show p count 1; memcpy d p async; sync; "
                       "fill p 1; memcpy p d async; sync") == []
    assert advised(on, "memcpy p d async; sync; memcpy d p async; sync") == ["copy-then-sync"]  # 3 in a row now


def test_tiny_copies_between_two_buffers_are_one_note(on):
    """A row of tiny copies from p to d is one pattern: one note, naming both."""
    on.ok("alloc pinned 1MB as p; alloc device 1MB as d; alloc device 1MB as e")
    objs = on.run("repeat 10 <<< memcpy p[0:+4KB] d[0:+4KB] >>>")
    assert notes(objs) == ["tiny-copies"] and "8 copies from p to d in a row" in objs[-1]["result"]["note"]
    objs = on.run("; ".join(f"memcpy p[{i}KB:+1KB] e[{i}KB:+1KB]" for i in range(8)))
    assert notes(objs) == ["tiny-copies"]  # another pair: another note
    assert on.ok("advice")["notes"][0]["count"] == 2

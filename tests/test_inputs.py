"""What a user hands the shell that is not quite right: a script in another encoding, a profile with wrong values."""

from __future__ import annotations

import io
import json

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.errors import ShellError
from cudashell.frontends.shell import Shell


def _run(path) -> tuple[bool, str]:
    out = io.StringIO()
    shell = Shell(SimBackend(), out=out, err=out)
    try:
        ok = shell.run_script(path)
    except ShellError as e:
        return False, f"{e.code}: {e.message}"
    finally:
        shell.close()
    return ok, out.getvalue()


def test_a_script_with_a_byte_order_mark_runs(tmp_path):
    script = tmp_path / "bom.cush"
    script.write_bytes(b"\xef\xbb\xbfalloc pinned 4KB as first\nls\n")
    ok, out = _run(script)
    assert ok and "first" in out and "UNKNOWN_COMMAND" not in out


def test_a_latin1_script_is_refused_at_its_first_foreign_byte(tmp_path):
    script = tmp_path / "latin1.cush"
    script.write_bytes("alloc pinned 4KB\necho café\n".encode("latin-1"))
    ok, text = _run(script)
    assert not ok and text == f"BAD_ENCODING: {script}:2:9: byte 0xe9 is not UTF-8"


@pytest.mark.parametrize("key, value, says", [
    ("pinned_h2d", "fast", "must be a number"),
    ("pinned_h2d", -5, "above 0"),
    ("copy_latency", 0, "above 0"),
    ("device_free", -1e-6, "above 0"),  # the sync and free figures (issue 25, 2) too
    ("pinned_free_per_mib", "slow", "a number"),
    ("unregister_per_mib", 0, "above 0"),
    ("sync_latency", -2e-6, "0 or more"),
    ("unified_addressing", 1, "true or false"),
    ("gpus", 1.5, "a whole number"),
    ("copy_curves", {"pinned h2d": [[4096, "x"]]}, "[[bytes, seconds]"),
])
def test_a_profile_value_of_the_wrong_kind_is_refused_at_load(tmp_path, key, value, says):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({key: value}))
    with pytest.raises(ShellError) as e:
        Profile.load(str(path))
    assert e.value.code == "BAD_PROFILE" and key in e.value.message and says in e.value.message


def test_a_good_profile_still_loads(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"pinned_h2d": 25e9, "priority_greatest": -3, "sync_latency": 0.0,
                                "copy_curves": {"pinned h2d": [[4096, 1e-5], [1 << 20, 5e-5]]}}))
    p = Profile.load(str(path))
    assert p.pinned_h2d == 25e9 and p.priority_greatest == -3


def test_help_takes_several_commands(sim):
    r = sim.ok("help memcpy memset")
    assert [c["name"] for c in r["commands"]] == ["memcpy", "memset"]
    assert sim.fails("help memcpy nosuch")["code"] == "UNKNOWN_COMMAND"


def test_a_misspelt_name_or_choice_gets_a_did_you_mean(sim):
    sim.ok("alloc pinned 4KB")
    assert sim.fails("show p1")["hint"] == "did you mean `p0`?"
    assert sim.fails("show P0")["hint"] == "did you mean `p0`?"
    assert sim.fails("alloc pinnned 1MB")["hint"] == "did you mean `pinned`?"


def test_show_says_how_many_values_it_printed(tmp_path):
    out = io.StringIO()
    shell = Shell(SimBackend(), out=out, err=out)
    try:
        shell.execute("alloc pinned 1MB; show p0 count 300")
    finally:
        shell.close()
    assert "(300 of 1048576 read, 56 printed: --json has them all)" in out.getvalue()


def test_set_lists_only_what_set_takes(sim):
    listed = sim.ok("set")["settings"]
    assert "width" not in listed and "lang" not in listed and {"count", "format", "gpu-timeout"} <= set(listed)
    for key, value in listed.items():  # each listed setting can be set back to its value
        sim.ok(f"set {key} {value}")


def test_a_name_that_is_gone_says_what_became_of_it(sim):
    sim.ok("alloc pinned 4KB as p; free p")
    assert sim.fails("free p")["message"] == "no buffer named 'p' (p was freed)"
    sim.ok("alloc pinned 4KB as p")  # made again: nothing to say
    sim.ok("stream create; stream destroy 1")
    e = sim.fails("memcpy p[0:4] p[4:8] async stream 1")
    assert e["code"] == "NO_SUCH_STREAM" and "(stream 1 was destroyed)" in e["message"] and "none now" in e["hint"]


def test_save_counts_in_words(sim, tmp_path):
    sim.ok("alloc pinned 4KB")
    assert "saved 1 command to" in sim.ok(f"save {tmp_path}/one.cush")["text"]


def test_a_demo_run_from_a_script_narrates_in_its_language_only(tmp_path):
    """Issue 25, 4: the echo of a script shows the commands, but a `say` line is its narration, once, and only in
    the demo's language."""
    script = tmp_path / "d.cush"
    script.write_text("demo register lang zh\n")
    out = io.StringIO()
    shell = Shell(SimBackend(), out=out, err=out, echo=True)
    try:
        assert shell.run_script(script)
    finally:
        shell.close()
    text = out.getvalue()
    assert "cush> say" not in text and "Seed 004" not in text and "种子文章 004" in text
    assert text.count("种子文章 004") == 1 and "cush> alloc pageable 8MB as buf" in text

"""Scripts: nesting with relative paths, expect, stopping on failure, keep-going, file:line:col."""

from __future__ import annotations

import io

import pytest

from cudashell.backends.sim import SimBackend
from cudashell.frontends.shell import Shell


def shell(**kw):
    out, err = io.StringIO(), io.StringIO()
    return Shell(SimBackend(), out=out, err=err, **kw), out, err


def test_nested_run_resolves_paths_relative_to_the_calling_script(tmp_path, monkeypatch):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "inner.cush").write_text("alloc pinned 4KB as fromInner\nrun deeper.cush\n")
    (tmp_path / "lib" / "deeper.cush").write_text("alloc device 4KB as fromDeeper\n")
    (tmp_path / "main.cush").write_text("run lib/inner.cush\nls\n")
    monkeypatch.chdir("/")
    sh, out, _ = shell()
    assert sh.run_script(tmp_path / "main.cush") is True
    assert set(sh.session.buffers) == {"fromInner", "fromDeeper"}


def test_failure_stops_the_script_with_its_location(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.cush").write_text("alloc pinned 4KB\n\nfree p0; free  p9\nalloc device 4KB\n")
    sh, out, err = shell()
    assert sh.run_script("s.cush") is False
    line = err.getvalue().strip()
    assert line.startswith("s.cush:3:16: NO_SUCH_BUFFER: no buffer named 'p9'")
    assert "d0" not in sh.session.buffers


def test_expect_error_accepts_the_failure_it_names(tmp_path):
    p = tmp_path / "s.cush"
    p.write_text("alloc pageable 4KB\nregister h0\nregister h0\n"
                 "expect error CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED\nexpect error cuda_error_x  # wrong\n")
    sh, out, err = shell()
    assert sh.run_script(p) is False  # the last expect fails: the register before it was accepted
    assert "EXPECT_FAILED" in err.getvalue() and err.getvalue().count("\n") == 1  # the one failure
    assert "as expected: " in out.getvalue() and ":3:1: CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED" in out.getvalue()


def test_an_error_the_next_line_expects_is_shown_as_expected_only_when_its_code_is_named(tmp_path):
    """Issue 25, 4: a demo's expected error is part of what it shows, not a failure; another code is a failure."""
    p = tmp_path / "s.cush"
    p.write_text("free nothing\nexpect error NO_SUCH_BUFFER\nfree nothing\nexpect error OUT_OF_BOUNDS\n")
    sh, out, err = shell()
    assert sh.run_script(p) is False
    assert "as expected: " in out.getvalue() and "s.cush:1:6: NO_SUCH_BUFFER" in out.getvalue()
    assert "s.cush:3:6: NO_SUCH_BUFFER" in err.getvalue() and "as expected" not in err.getvalue()


def test_expect_error_with_the_wrong_code_stops(tmp_path):
    p = tmp_path / "s.cush"
    p.write_text("free nothing\nexpect error OUT_OF_BOUNDS\nls\n")
    sh, out, err = shell()
    assert sh.run_script(p) is False
    assert "expected OUT_OF_BOUNDS, but `free nothing` failed with NO_SUCH_BUFFER" in err.getvalue()


def test_expect_equal_and_ok(tmp_path):
    p = tmp_path / "s.cush"
    p.write_text("alloc pinned 1MB; alloc device 1MB; alloc pageable 1MB\nfill p0 random seed 3\n"
                 "memcpy p0 d0; expect ok; memcpy d0 h0\nexpect equal p0 h0\nfill h0 0\nexpect equal p0 h0\n")
    sh, out, err = shell()
    assert sh.run_script(p) is False
    assert err.getvalue().startswith(f"{p}:6:14: EXPECT_FAILED: p0 and h0 differ — first difference at byte")


def test_keep_going_runs_on_and_reports_failure(tmp_path):
    p = tmp_path / "s.cush"
    p.write_text("free a\nfree b\nalloc pinned 4KB\n")
    sh, out, err = shell(keep_going=True)
    assert sh.run_script(p) is False
    assert "p0" in sh.session.buffers and err.getvalue().count("NO_SUCH_BUFFER") == 2


def test_a_nested_failure_fails_the_run_command(tmp_path):
    (tmp_path / "bad.cush").write_text("bogus\n")
    (tmp_path / "main.cush").write_text("run bad.cush\nexpect error SCRIPT_FAILED\nalloc pinned 4KB\n")
    sh, out, err = shell()
    assert sh.run_script(tmp_path / "main.cush") is True
    assert "UNKNOWN_COMMAND" in err.getvalue() and "p0" in sh.session.buffers


def test_a_script_that_runs_itself_is_stopped(tmp_path):
    (tmp_path / "loop.cush").write_text("run loop.cush\n")
    sh, out, err = shell()
    assert sh.run_script(tmp_path / "loop.cush") is False
    assert "RECURSION" in err.getvalue()


def test_save_writes_a_script_that_replays(tmp_path):
    sh, out, err = shell()
    assert sh.execute("alloc pinned 4KB mapped; fill p0 iota; bogus; alloc device 4KB") is False
    assert "d0" not in sh.session.buffers  # the rest of the line stopped at the failure
    sh.execute("alloc device 4KB; memcpy p0 d0; ls")
    sh.execute(f"save {tmp_path / 'again.cush'}")
    text = (tmp_path / "again.cush").read_text()
    assert "bogus" not in text and "memcpy p0 d0" in text
    sh2, _, _ = shell()
    assert sh2.run_script(tmp_path / "again.cush") is True
    assert set(sh2.session.buffers) == {"p0", "d0"}


def test_quit_stops_a_script(tmp_path):
    p = tmp_path / "s.cush"
    p.write_text("alloc pinned 4KB\nquit\nalloc device 4KB\n")
    sh, out, err = shell()
    assert sh.run_script(p) is True and "d0" not in sh.session.buffers


def test_blank_line_never_repeats(tmp_path):
    sh, out, err = shell()
    sh.execute("alloc pinned 4KB")
    sh.execute("")
    sh.execute("   # nothing")
    assert list(sh.session.buffers) == ["p0"] and len(sh.session.history) == 1


def test_internal_errors_are_one_line():
    sh, out, err = shell()
    sh.session.settings["count"] = "not a number"  # corrupt state a handler trips over
    sh.execute("alloc pinned 4KB; show p0")
    assert err.getvalue().count("\n") == 1 and "INTERNAL_ERROR" in err.getvalue()


def test_the_shipped_examples_check_themselves_on_the_simulator():
    from pathlib import Path

    from cudashell.backends.profile import Profile

    root = Path(__file__).resolve().parent.parent / "examples"
    for name, profile in (("tour.cush", None), ("../cudashell/teaching/demos/streams.cush", None),
                          ("streams-one-copy-engine.cush", "one-copy-engine")):
        out, err = io.StringIO(), io.StringIO()
        sh = Shell(SimBackend(Profile.load(profile)), out=out, err=err)
        assert sh.run_script(root / name) is True, (name, err.getvalue())
        sh.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_demo_checks_itself_on_the_simulator(lang):
    from cudashell.teaching.shipped import demos

    names = list(demos())
    assert len(names) >= 8
    for name in names:
        out, err = io.StringIO(), io.StringIO()
        sh = Shell(SimBackend(), out=out, err=err)
        assert sh.execute(f"demo {name} lang {lang}") is True, (name, err.getvalue())
        chinese = any("\u4e00" <= ch <= "\u9fff" for ch in out.getvalue())
        assert chinese == (lang == "zh"), name
        sh.close()


def test_the_constant_memory_demo_counts_a_broadcast_and_a_divergent_index(sim):
    """demo constant-memory's timed launches (262,144 threads, 33 taps): the broadcast reads constant memory at one
    address a warp request, the divergent index at 32, and the kernels given the coefficients as a pointer read
    none of it; the modeled times follow the passes, and the symbol and everything else the demo made are gone."""
    objs = sim.run("demo constant-memory")
    assert all(o["ok"] or o["cmd"].startswith("memcpy h2d hc4") for o in objs)
    counts = {o["result"]["kernel"]: o["result"]["counts"] for o in objs
              if o["kind"] == "launch" and o["result"]["grid"][0] == 1024}
    warps = 262144 // 32
    assert counts["stencil_constant"]["constant"] == {"requests": 33 * warps, "addresses": 33 * warps,
                                                      "addresses_per_request": 1.0}
    assert counts["stencil_constant_divergent"]["constant"] == {"requests": 33 * warps, "addresses": 32 * 33 * warps,
                                                                "addresses_per_request": 32.0}
    for name in ("stencil_global", "stencil_global_divergent"):
        assert counts[name]["constant"]["requests"] == 0
        assert counts[name]["global"]["device"]["requests"] == 67 * warps  # in, c and the store
    assert counts["stencil_constant"]["global"]["device"]["requests"] == 34 * warps  # in and the store
    ms = {o["result"]["from"]: o["result"]["ms"] for o in objs if o["kind"] == "elapsed"}
    assert ms["b0"] < ms["d0"] and ms["gd0"] < ms["d0"]
    assert sim.ok("ls")["buffers"] == [] and sim.shell.backend.device_used == 0


def test_the_pools_demo_shows_reuse_a_release_at_threshold_0_and_a_warm_pool_beating_cudamalloc(cush):
    """demo pools, after the user kept memory in the default pool (threshold max, as lesson allocators leaves it):
    the same address back on the same stream, 0 bytes reserved after a sync at threshold 0 and the next allocation
    mapping again, a pool at threshold max keeping its GiB; the warm allocation's events closer together than
    cudaMalloc's and than the one after the release; its pools gone at its end, the default pool as it was. On both
    backends (the H100 gave these bytes and addresses)."""
    cush.ok("pool set default threshold max; alloc device 64MB async as mine; free mine async; sync")
    objs = cush.run("demo pools")
    assert all(o["ok"] for o in objs), [o for o in objs if not o["ok"]]
    made = {o["result"]["buffer"]["name"]: o["result"] for o in objs if o["kind"] == "alloc"}
    assert made["b"]["buffer"]["device_ptr"] == made["a"]["buffer"]["device_ptr"]
    assert (made["a"]["pool"], made["w"]["pool"], made["w"]["call"]) == ("fresh", "keep", "cudaMallocFromPoolAsync")
    listed = [{p["name"]: p for p in o["result"]["pools"]} for o in objs if o["kind"] == "pools"]
    assert listed[0]["fresh"]["reserved"] == listed[0]["fresh"]["used"] == 1 << 30  # the cold allocation
    assert listed[1]["fresh"]["reserved"] == 0  # freed, synchronized, threshold 0: given back
    assert listed[2]["keep"]["reserved"] == 1 << 30 and listed[2]["keep"]["used"] == 0  # threshold max: kept
    ms = {o["result"]["from"]: o["result"]["ms"] for o in objs if o["kind"] == "elapsed"}
    assert ms["w0"] < ms["m0"] and ms["w0"] < ms["r0"]
    assert cush.ok("ls")["buffers"] == []
    assert [(p["name"], p["threshold_text"], p["reserved"]) for p in cush.ok("pool")["pools"]] == [
        ("default", "max", 64 << 20)]


def test_the_pitched_demo_walks_rows_by_the_pitch_and_times_narrow_rows_against_wide_ones(cush):
    """demo pitched: rows of 100 bytes padded to a 512-byte pitch, a kernel given img.pitch writing what a packed
    copy back reads as 0, 1, 2, …; a width over the pitch refused by the driver; the same 256 KiB slower in rows of
    4 bytes than of 4096 and the same bytes either way; a 3-D box in and out; nothing left behind. On both backends."""
    objs = cush.run("demo pitched")
    assert all(o["ok"] or o["cmd"].startswith("memcpy2d out img 600x8") for o in objs)
    shapes = {o["result"]["buffer"]["name"]: o["result"]["buffer"]["shape"] for o in objs if o["kind"] == "alloc"
              and "shape" in o["result"]["buffer"]}
    assert (shapes["img"]["pitch"], shapes["narrow"]["pitch"], shapes["wide"]["pitch"]) == (512, 512, 4096)
    assert shapes["vol"]["pitch"] == 1024 and shapes["vol"]["depth"] == 32
    refused = next(o for o in objs if o["cmd"].startswith("memcpy2d out img 600x8"))
    assert refused["error"]["code"] == "CUDA_ERROR_INVALID_VALUE"
    shown = next(o["result"] for o in objs if o["kind"] == "show")
    assert shown["values"] == [0.0, 1.0, 2.0, 3.0]
    ms = {o["result"]["from"]: o["result"]["ms"] for o in objs if o["kind"] == "elapsed"}
    assert ms["w0"] * 5 < ms["n0"]  # the H100: 238 µs against 9.3 µs
    assert cush.ok("ls")["buffers"] == []


def test_a_demo_leaves_the_users_session_as_it_found_it(sim):
    """Its names do not clash with the user's (zero-copy makes `za`), and nothing it made stays behind."""
    sim.ok("alloc pinned 4KB as za; fill za 7; stream create as mine; event record mark")
    before = sim.ok("ls")["buffers"]
    sim.ok("demo zero-copy lang zh")
    assert sim.ok("ls")["buffers"] == before
    assert sim.ok("show za count 1")["values"] == [7]
    assert [s["name"] for s in sim.ok("streams")["streams"]] == ["0", "mine"]
    assert list(sim.shell.session.events) == ["mark"] and sim.shell.session.settings["lang"] == "en"
    assert sim.shell.backend.host_used == 4096 and sim.shell.backend.device_used == 0


def test_show_reads_a_buffer_as_it_was_last_filled_or_computed(sim):
    sim.ok("alloc pinned 64 as a; fill a 7 dtype int32")
    shown = sim.ok("show a count 2")
    assert shown["dtype"] == "int32" and shown["values"] == [7, 7]
    sim.ok("alloc pinned 64 as z; fill z 0 dtype int32; launch increment z; sync")
    assert sim.ok("show z count 1") == {**sim.ok("show z count 1 dtype float32")} and \
        sim.ok("show z count 1")["values"] == [1.0]
    assert sim.ok("show a count 1 dtype uint8")["values"] == [7]  # asked: as asked


def test_json_errors_from_a_script_carry_the_column_the_text_shows(tmp_path):
    import json
    import subprocess
    import sys

    script = tmp_path / "bad.cush"
    script.write_text("echo one\n\n\nnosuch thing\n")
    out = subprocess.run([sys.executable, "-m", "cudashell", "--backend", "sim", "--json", str(script)],
                         capture_output=True, text=True).stdout
    err = [json.loads(x) for x in out.splitlines() if x.strip()][-1]["error"]
    assert (err["line"], err["col"]) == (4, 1)


def test_a_script_with_syntax_errors_reports_them_all_and_runs_nothing(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "typos.cush"
    script.write_text("alloc pinned 4KB as a\nfill a 1\nmemcpy a\nbogus x\nmemset a 999 oops\n"
                      "alloc pinned 5XB\nexpect error USAGE\n")
    r = subprocess.run([sys.executable, "-m", "cudashell", "--backend", "sim", str(script)],
                       capture_output=True, text=True)
    lines = [x for x in r.stderr.splitlines() if "typos.cush:" in x]
    assert [x.split(": ")[0].rsplit(":", 2)[1:] for x in lines[:3]] == [["3", "10"], ["4", "1"], ["5", "14"]], lines
    assert "3 syntax errors; nothing was run" in r.stderr and r.returncode == 1
    assert "alloc" not in r.stdout  # line 1 never ran


def test_nested_runs_say_what_happened_once(tmp_path):
    import subprocess
    import sys

    def cush(*args):
        return subprocess.run([sys.executable, "-m", "cudashell", "--backend", "sim", "--quiet", *args],
                              capture_output=True, text=True, cwd=tmp_path)

    (tmp_path / "self.cush").write_text("alloc pinned 4KB\nrun self.cush\n")
    r = cush("self.cush")
    assert [x for x in r.stderr.splitlines() if "RECURSION" in x or "SCRIPT_FAILED" in x] == \
        ["self.cush:2:1: RECURSION: scripts nest deeper than 16 (does self.cush run itself?)"] and r.returncode == 1
    (tmp_path / "outer.cush").write_text("run inner.cush\necho after\n")
    (tmp_path / "inner.cush").write_text("alloc pinned 0\necho in\n")
    r = cush("--keep-going", "outer.cush")
    assert "went on (--keep-going)" in r.stderr and "stopped" not in r.stderr and "after" in r.stdout
    r = cush("nosuch.cush")
    assert "relative to the directory you are in" in r.stderr and "that script" not in r.stderr


def test_a_watcher_that_fails_leaves_the_command_a_success(monkeypatch):
    """A bug in what looks at a command after it ran (advice, a lesson's check) is one line, not the command's
    failure: the command did run."""
    from cudashell.language import registry

    def broken(*args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(registry, "WATCHERS", registry.watchers() + [broken])
    sh, out, err = shell()
    assert sh.execute("alloc pinned 4KB as a") is True and "a" in sh.session.buffers
    assert "INTERNAL_ERROR: tests.test_scripts.broken failed after the command: ZeroDivisionError" in err.getvalue()


def test_a_line_that_does_not_split_is_echoed_and_expected_like_any_other(tmp_path):
    p = tmp_path / "bad.cush"
    p.write_text('echo "open\nexpect error USAGE\necho after\n')
    out, err = io.StringIO(), io.StringIO()
    sh = Shell(SimBackend(), out=out, err=err, echo=True)
    try:
        assert sh.run_script(p) is True
    finally:
        sh.close()
    assert 'cush> echo "open' in out.getvalue() and "as expected: " in out.getvalue() and err.getvalue() == ""

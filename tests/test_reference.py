"""compare ref (issue 26, reference figures): the session's measured figures beside a calibrated profile's, each rule of
why they differ tested with faked `doctor` facts, and `compare A B` on buffers untouched."""

from __future__ import annotations

import io
import json
import shutil

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.frontends.shell import Shell
from cudashell.output.results import json_schema
from cudashell.teaching import reference
from cudashell.teaching.reference import explain, reference_path
from tests.conftest import Cush


@pytest.fixture
def one_engine():
    c = Cush(SimBackend(Profile.load("one-copy-engine")))
    yield c
    c.shell.close()


# ------------------------------------------------------------------ the command on the simulator
def test_on_the_h100_profile_every_figure_of_benches_demos_and_copies_matches_the_h100_reference(sim):
    sim.ok("bench memcpy h2d pinned pageable sizes 64KB,16MB reps 2")
    sim.ok("bench latency rounds 10")
    sim.ok("demo memory-api")  # its copies count: a demo's scope shares the session's measurements
    sim.ok("alloc pinned 8MB as p; alloc device 8MB as d")
    sim.run("memcpy p d; memcpy p d; memcpy d p 4KB async")
    d = sim.ok("compare ref h100")
    by = [r["by"] for r in d["rows"]]
    assert "bench memcpy: pinned 16 MiB" in by and "bench latency: kernel launch + sync" in by
    assert "memcpy h2d pageable 16 MiB ×1" in by  # the demo's
    assert "memcpy h2d pinned 8 MiB ×2" in by and "memcpy d2h pinned 4 KiB async ×1" in by
    assert all(r["ratio"] == pytest.approx(1, abs=1e-9) and r["explanation"] is None for r in d["rows"])
    assert d["reference"] == "h100" and d["path"].endswith("profiles/h100.json") and d["timing"] == "modeled"
    row = next(r for r in d["rows"] if r["by"] == "bench memcpy: pinned 16 MiB")
    assert (row["figure"], row["unit"], row["category"]) == ("pinned_h2d", "GB/s", "link")
    assert row["session"] == pytest.approx(53.84, abs=0.01)


def test_one_copy_engine_halves_both_directions_at_once_and_the_line_says_why(one_engine):
    one_engine.ok("bench memcpy bidir pinned sizes 64MB reps 2; bench memcpy h2d pinned sizes 64MB reps 2")
    rows = {r["figure"]: r for r in one_engine.ok("compare ref h100")["rows"]}
    both, h2d = rows["pinned h2d+d2h"], rows["pinned_h2d"]
    assert both["ratio"] == pytest.approx(0.5, abs=0.01) and both["cause"] == "simulated"
    assert both["explanation"] == "modeled from the simulator's profile, not measured: 1 copy engine, the reference's 3"
    assert h2d["ratio"] == pytest.approx(1, abs=1e-9) and h2d["explanation"] is None  # one direction: unchanged


def test_calibrate_is_compared_figure_for_figure_and_its_file_is_a_reference(sim, tmp_path):
    out = tmp_path / "lab.json"
    sim.ok(f"calibrate out {out}")
    rows = {r["figure"]: r for r in sim.ok("compare ref h100")["rows"]}
    assert rows["kernel_zero_copy_read"]["ratio"] == pytest.approx(1, abs=0.01)
    assert rows["copy_latency"]["unit"] == "µs" and rows["pinned_alloc_per_mib"]["unit"] == "µs/MiB"
    d = sim.ok(f"compare ref {out}")
    assert d["reference"] == str(out) and d["profile"] == json.loads(out.read_text())["name"]
    assert all(r["ratio"] == pytest.approx(1, abs=1e-9) for r in d["rows"] if r["by"] == "calibrate")


def test_the_references_are_the_profiles_folder_h200_refused_until_its_file_is_there(sim, tmp_path, monkeypatch):
    shutil.copy(reference.PROFILES / "h100.json", tmp_path / "h100.json")
    monkeypatch.setattr(reference, "PROFILES", tmp_path)
    sim.ok("bench memcpy h2d pinned sizes 64MB reps 2")
    err = sim.fails("compare ref h200")
    assert err["code"] == "NO_REFERENCE" and err["col"] == 13
    assert err["message"] == "no reference 'h200': cudashell ships calibrated profiles for h100"
    assert err["hint"] == "`calibrate out h200.json` on that GPU writes one; then `compare ref h200.json`"
    (tmp_path / "h200.json").write_text(json.dumps({"name": "H200 (test)", "pinned_h2d": 27e9,
                                                    "copy_curves": {}}))
    d = sim.ok("compare ref h200")
    assert d["reference"] == "h200" and d["profile"] == "H200 (test)"
    row = d["rows"][0]
    assert row["reference"] == pytest.approx(2**26 / (Profile().copy_latency + 2**26 / 27e9) / 1e9)
    assert row["ratio"] == pytest.approx(2.0, abs=0.05) and row["cause"] == "simulated"


def test_a_missing_file_a_bad_profile_and_nothing_measured_are_one_line_each(sim, tmp_path):
    err = sim.fails("compare ref h100")
    assert err["code"] == "NOTHING_MEASURED" and "bench memcpy" in err["hint"]
    sim.ok("bench latency rounds 10")
    err = sim.fails(f"compare ref {tmp_path}/none.json")
    assert err["code"] == "NO_REFERENCE" and err["message"].endswith("no such profile file")
    (tmp_path / "bad.json").write_text('{"pinned_h2d": "fast"}')
    assert sim.fails(f"compare ref {tmp_path}/bad.json")["code"] == "BAD_PROFILE"


def test_compare_of_buffers_still_works_and_ref_cannot_name_a_buffer(sim):
    sim.ok("alloc pageable 4KB as a; alloc pageable 4KB as b; fill a 7; fill b 7")
    assert sim.ok("compare a b")["equal"] is True
    err = sim.fails("alloc pageable 4KB as ref")
    assert err["code"] == "USAGE" and err["message"].startswith("'ref' cannot name a buffer")
    assert sim.fails("alloc pageable 4KB as REF")["code"] == "USAGE"
    sim.ok("bench latency rounds 10")
    err = sim.fails("compare ref a")
    assert err["code"] == "NO_REFERENCE" and err["hint"].startswith("`compare ref` sets figures beside a profile")


def test_a_bench_run_again_replaces_its_rows_and_output_options_do_not_make_it_another(sim, tmp_path):
    sim.ok("bench memcpy h2d pinned sizes 1MB reps 2")
    sim.ok(f"bench memcpy h2d pinned sizes 1MB reps 2 --csv {tmp_path}/a.csv")
    (tmp_path / "a.csv").unlink()
    rows = sim.ok("compare ref h100")["rows"]
    assert [r["by"] for r in rows] == ["bench memcpy: pinned 1 MiB"]
    assert not (tmp_path / "a.csv").exists()  # the reference's run of it writes no file


def test_the_result_validates_against_the_schema_and_help_has_an_example(sim):
    jsonschema = pytest.importorskip("jsonschema")
    sim.ok("bench memcpy h2d pinned sizes 1MB reps 2")
    objs = sim.run("compare ref h100")
    jsonschema.validate(objs[-1], json_schema())
    assert objs[-1]["kind"] == "reference"
    assert "compare ref h100" in json.dumps(sim.ok("help compare ref"))


def test_the_text_has_a_table_with_why_for_figures_off_by_more_than_a_quarter():
    out = io.StringIO()
    shell = Shell(SimBackend(Profile.load("one-copy-engine")), "test", out=out, err=io.StringIO())
    try:
        shell.execute("bench memcpy bidir pinned sizes 64MB reps 2")
        start = out.tell()
        shell.execute("compare ref h100")
    finally:
        shell.close()
    text = out.getvalue()[start:]
    head, table = text.split("\nfigure ", 1)
    assert head.startswith("this session (modeled, H100 with one copy engine") and " beside h100 (H100 80GB" in head
    assert "this compares two profiles" in head
    assert table.splitlines()[0].split() == ["measured", "by", "this", "session", "reference", "ratio", "why"]
    row = next(line for line in table.splitlines() if line.startswith("pinned h2d+d2h"))
    assert row.endswith("  0.50  (1) simulated")
    assert table.splitlines()[-1] == ("(1) modeled from the simulator's profile, not measured: 1 copy engine, the "
                                      "reference's 3")


# ------------------------------------------------------------------ the rules, on faked doctor facts
GPU = {"backend": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "sim_profile": None, "engines": 3, "pcie_gen": 5,
       "pcie_width": 16, "pcie_max_gen": 5, "pcie_max_width": 16, "gpu_node": 0, "cpu_node": 0, "iommu_groups": 0,
       "iommu_cmdline": None, "virtualised": False}
H100 = {"name": "h100", "gpu": "H100 80GB HBM3 (simulated; calibrated on the H100, 2026-11-22)", "engines": 3}


def test_a_link_below_the_gpus_own_explains_slow_pinned_copies():
    cause, line = explain("link", 0.26, True, {**GPU, "pcie_gen": 3, "pcie_width": 8}, H100)
    assert cause == "pcie-link"
    assert line == "the link runs at Gen3 x8, below this GPU's Gen5 x16: copies top out near 7.9 GB/s, not 63.0"


def test_a_far_numa_node_explains_slow_host_copies_and_says_how_to_bind():
    cause, line = explain("pageable", 0.6, True, {**GPU, "gpu_node": 1, "cpu_node": 0}, H100)
    assert cause == "numa" and "`numactl --cpunodebind=1 --membind=1`" in line


def test_the_iommu_explains_slow_small_copies_and_pinning_but_not_bandwidth():
    facts = {**GPU, "iommu_groups": 42}
    assert explain("latency", 1.6, False, facts, H100)[0] == "iommu"
    assert explain("pinning", 2.0, False, facts, H100)[1].startswith("the IOMMU remaps DMA (42 IOMMU groups)")
    assert explain("pinning", 2.0, False, {**GPU, "virtualised": True}, H100)[1].startswith(
        "the IOMMU remaps DMA (under a hypervisor)")
    assert explain("link", 0.5, True, facts, H100)[0] == "unexplained"


def test_one_copy_engine_explains_both_directions_and_overlap():
    cause, line = explain("engines", 0.5, True, {**GPU, "engines": 1}, H100)
    assert cause == "one-copy-engine" and line.startswith("one copy engine (asyncEngineCount 1")
    assert explain("engines", 2.0, True, GPU, {**H100, "engines": 1})[0] == "one-copy-engine"
    assert explain("link", 0.5, True, {**GPU, "engines": 1}, H100)[0] == "unexplained"  # one direction: not it


def test_pageable_figures_follow_the_hosts_memcpy():
    assert explain("pageable", 0.6, True, GPU, H100)[0] == "host-memcpy"
    assert explain("pageable", 1.5, True, GPU, H100)[0] == "host-memcpy"


def test_on_the_simulator_the_figures_are_modeled_from_a_profile_whatever_else():
    facts = {**GPU, "backend": "sim", "pcie_gen": 3, "gpu_node": 1, "engines": 1}
    cause, line = explain("engines", 0.5, True, facts, H100)
    assert cause == "simulated"
    assert line == "modeled from the simulator's profile, not measured: 1 copy engine, the reference's 3"


def test_another_gpu_then_better_then_unexplained():
    assert explain("device", 2.5, True, {**GPU, "gpu": "NVIDIA H200"}, H100) == (
        "other-gpu", "another GPU: NVIDIA H200 here, the reference is " + H100["gpu"])
    assert explain("device", 1.4, True, GPU, H100)[0] == "better"
    assert explain("device", 0.5, True, GPU, H100)[0] == "unexplained"
    assert explain("host", 3.0, False, {**GPU, "gpu": "NVIDIA A100"}, H100)[0] == "unexplained"


def test_a_quarter_is_the_tolerance_both_ways():
    assert not reference.off(0.76) and not reference.off(1.25) and not reference.off(None)
    assert reference.off(0.74) and reference.off(1.26)


def test_every_json_file_in_profiles_is_a_reference(tmp_path):
    (tmp_path / "a100.json").write_text("{}")
    assert reference_path("A100", tmp_path) == ("a100", tmp_path / "a100.json")
    assert set(reference.references()) >= {"h100"}


# ------------------------------------------------------------------ on the GPU (the lead runs these)
@pytest.mark.gpu
def test_on_the_gpu_pinned_bandwidth_is_near_its_own_calibrated_profile():
    from tests.conftest import make_backend

    c = Cush(make_backend("cuda"))
    try:
        name = c.ok("device")["name"]
        ref = "h200" if "H200" in name else "h100" if "H100" in name else None
        if ref is None:
            pytest.skip(f"no shipped reference for {name}")
        c.ok("bench memcpy h2d pinned sizes 64MB,256MB reps 3")
        d = c.ok(f"compare ref {ref}")
        assert d["timing"] == "measured" and d["facts"]["backend"] == "cuda"
        for row in d["rows"]:
            assert 0.75 <= row["ratio"] <= 1.25, row
    finally:
        c.shell.close()

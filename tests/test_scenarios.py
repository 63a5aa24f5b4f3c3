"""Scenarios that run unchanged on the simulator and on the GPU: data, error codes, pointer relations,
blocking. Where they disagree, the driver is right and the simulator gets fixed."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from cudashell.backends.hostdata import random_values
from tests.conftest import gpu_missing


def hexint(s):
    return int(s, 16)


def test_round_trip_through_device_is_byte_exact(cush):
    cush.ok("alloc pageable 1MB as src; alloc device 1MB; alloc pageable 1MB as back")
    cush.ok("fill src random seed 7")
    copy = cush.ok("memcpy src d0")
    assert copy["direction"] == "h2d" and copy["bytes"] == 1 << 20 and copy["blocking"] is True
    cush.ok("memcpy d0 back")
    assert cush.ok("compare src back")["equal"] is True
    shown = cush.ok("show back count 4")["values"]
    expect = random_values(7, 0, 4, np.dtype(np.uint8)).tolist()
    assert shown == expect


@pytest.mark.parametrize("flags", ["", "portable", "mapped", "writecombined", "portable mapped wc"])
def test_every_pinned_allocation_is_reachable_through_its_host_pointer_under_uva(cush, flags):
    row = cush.ok(f"alloc pinned 64KB {flags}")["buffer"]
    assert row["host_ptr"] == row["device_ptr"] and row["same_pointer"]
    info = cush.ok(f"info {row['name']}")
    assert info["driver"]["memory_type"] == "host"
    assert info["driver"]["host_flags"] & 2, "DEVICEMAP is reported even when not asked for"
    assert info["driver"]["host_device_ptr"] == row["host_ptr"]
    wc, portable = "wc" in flags or "writecombined" in flags, "portable" in flags
    assert info["driver"]["host_flags"] == 2 | (4 if wc else 0) | (1 if portable else 0)


def test_pointer_pairs_of_each_kind(cush):
    cush.ok("alloc pageable 4KB; alloc device 4KB; alloc managed 4KB")
    h, d, m = cush.buffer("h0"), cush.buffer("d0"), cush.buffer("m0")
    assert h["host_ptr"] and h["device_ptr"] is None
    assert d["host_ptr"] is None and d["device_ptr"]
    assert m["host_ptr"] == m["device_ptr"]
    mi = cush.ok("info m0")["driver"]
    assert mi["memory_type"] == "device" and mi["is_managed"] is True
    assert mi["host_device_ptr"] == "CUDA_ERROR_INVALID_VALUE"
    assert cush.ok("info d0")["driver"]["memory_type"] == "device"
    hi = cush.ok("info h0")["driver"]
    assert hi["memory_type"] == "CUDA_ERROR_INVALID_VALUE" and hi["host_flags"] == "CUDA_ERROR_INVALID_VALUE"


def test_registration_pins_in_place_with_the_drivers_errors(cush):
    cush.ok("alloc pageable 64KB")
    before = cush.buffer("h0")["host_ptr"]
    row = cush.ok("register h0 portable")["buffer"]
    assert row["host_ptr"] == before and row["device_ptr"] == before
    assert cush.ok("info h0")["driver"]["host_flags"] == 3
    assert cush.fails("register h0")["code"] == "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"
    cush.ok("unregister h0")
    assert cush.buffer("h0")["device_ptr"] is None
    assert cush.fails("unregister h0")["code"] == "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"


def test_registering_pinned_memory_is_already_registered(cush):
    cush.ok("alloc pinned 64KB")
    assert cush.fails("register p0")["code"] == "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"


def test_launch_sum_on_zero_copy_and_device_memory(cush):
    cush.ok("alloc pinned 4KB as a; alloc pinned 4KB as b; alloc device 4KB as c; alloc pinned 4KB as r")
    cush.ok("fill a iota dtype float32; fill b 0.5 dtype float32")
    launch = cush.ok("launch sum a b c")
    assert launch["n"] == 1024 and launch["blocking"] is False
    cush.ok("sync")
    cush.ok("memcpy c r")
    vals = cush.ok("show r dtype float32 count 1024")["values"]
    assert vals == [i + 0.5 for i in range(1024)]


def test_launch_on_a_registered_buffer_and_partial_grid(cush):
    cush.ok("alloc pageable 4KB as x; register x; alloc managed 4KB as y")
    cush.ok("fill x 2 dtype float32; fill y 0 dtype float32")
    res = cush.ok("launch sum x x y n 1024 grid 2 block 128")
    assert res["computed"] == 256
    cush.ok("sync")
    vals = cush.ok("show y dtype float32 count 1024")["values"]
    assert vals[:256] == [4.0] * 256 and vals[256:] == [0.0] * 768


def test_kernel_refuses_pageable_memory_before_launch(cush):
    cush.ok("alloc pageable 4KB as a; alloc device 4KB as b; alloc device 4KB as c")
    err = cush.fails("launch sum a b c")
    assert err["code"] == "NOT_DEVICE_ACCESSIBLE" and "register" in err["hint"]


def test_device_memory_is_not_host_accessible(cush):
    cush.ok("alloc device 4KB")
    for line in ("show d0", "fill d0 1"):
        err = cush.fails(line)
        assert err["code"] == "NOT_HOST_ACCESSIBLE" and "memcpy d2h" in err["hint"]


def test_bounds_are_checked_before_the_copy(cush):
    cush.ok("alloc pinned 4KB; alloc device 1KB")
    err = cush.fails("memcpy p0 d0")
    assert err["code"] == "OUT_OF_BOUNDS"
    assert cush.fails("memcpy p0 d0 8KB")["code"] == "OUT_OF_BOUNDS"
    assert cush.fails("show p0 offset 5KB")["code"] == "OUT_OF_BOUNDS"
    assert cush.ok("memcpy p0 d0 1KB")["bytes"] == 1024


def test_a_direction_that_contradicts_the_buffers(cush):
    cush.ok("alloc pinned 4KB; alloc device 4KB")
    err = cush.fails("memcpy d2h p0 d0")
    assert err["code"] == "KIND_MISMATCH" and "memcpy h2d p0 d0" in err["hint"]
    assert cush.ok("memcpy d2h d0 p0")["direction"] == "d2h"


def test_async_copy_blocks_from_pageable_and_not_from_pinned(cush):
    cush.ok("alloc pageable 16MB; alloc pinned 16MB; alloc device 16MB; stream create; launch spin 20000 stream 1")
    pinned = cush.ok("memcpy p0 d0 async stream 1")
    assert pinned["blocking"] is False and pinned["stream"] == "1"
    assert cush.buffer("d0")["state"].startswith("pending")
    cush.ok("sync stream 1")
    assert cush.buffer("d0")["state"] == "ready"
    pageable = cush.ok("memcpy h0 d0 async stream 1")
    assert pageable["blocking"] is True


def test_memset_then_copy_back(cush):
    cush.ok("alloc device 8KB; alloc pinned 8KB")
    cush.ok("memset d0 171 4KB")
    cush.ok("memcpy d0 p0")
    vals = cush.ok("show p0 count 8192")["values"]
    assert vals[:4096] == [171] * 4096 and vals[4096:] == [0] * 4096


def test_memset_refuses_pageable_memory(cush):
    cush.ok("alloc pageable 4KB")
    assert cush.fails("memset h0 1")["code"] == "NOT_DEVICE_ACCESSIBLE"


def test_free_all_releases_everything_and_unregisters(cush):
    cush.ok("alloc pageable 4KB; register h0; alloc pinned 4KB; alloc device 4KB; alloc managed 4KB")
    freed = cush.ok("free all")["freed"]
    assert {f["name"] for f in freed} == {"h0", "p0", "d0", "m0"}
    assert next(f for f in freed if f["name"] == "h0")["unregistered"] is True
    assert cush.ok("ls")["buffers"] == []


def test_failed_command_changes_nothing(cush):
    cush.ok("alloc pinned 4KB as a")
    before = cush.ok("ls")
    cush.fails("alloc pinned 4KB as a")
    cush.fails("free a nosuch")
    cush.fails("alloc device 1TiB")
    assert cush.ok("ls") == before


def test_out_of_device_memory_is_the_drivers_error(cush):
    err = cush.fails("alloc device 1TiB")
    assert err["code"] == "CUDA_ERROR_OUT_OF_MEMORY"


def test_streams_and_priorities(cush):
    least, greatest = cush.ok("stream create")["priority_range"]
    s = cush.ok("stream create nonblocking priority -100 as hi")
    assert s["name"] == "hi" and s["nonblocking"] and s["priority"] == greatest
    rows = cush.ok("streams")["streams"]
    assert [r["name"] for r in rows] == ["0", "1", "hi"]
    cush.ok("stream destroy hi")
    assert cush.fails("sync stream hi")["code"] == "NO_SUCH_STREAM"
    assert least == 0


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_readonly_registration_faults_a_kernel_that_writes_it(backend):
    """In its own process: after a fault the driver's state is dead for the whole process."""
    if backend == "cuda" and gpu_missing():
        pytest.skip(f"no GPU: {gpu_missing()}")
    script = "alloc pageable 4KB as ro; register ro readonly; alloc device 4KB as a; launch sum a a ro; sync; " \
             "alloc device 4KB; free all"
    r = subprocess.run([sys.executable, "-m", "cudashell", "--backend", backend, "--json", "--keep-going", "-c",
                        script], capture_output=True, text=True, timeout=120)
    codes = [(json.loads(x)["error"] or {}).get("code") for x in r.stdout.splitlines()]
    fault = codes.index("CUDA_ERROR_ILLEGAL_ADDRESS")  # at the launch, or at the next sync on a GPU
    assert codes[:3] == [None, None, None] and fault in (3, 4)
    assert codes[5] == "CUDA_ERROR_ILLEGAL_ADDRESS"  # every later CUDA call fails the same way
    assert r.returncode == 1 and "Traceback" not in r.stderr and "context stack" not in r.stderr


def test_managed_prefetch_and_advice(cush):
    cush.ok("alloc managed 2MB; fill m0 7")
    cush.ok("advise m0 readmostly")
    assert cush.ok("info m0")["driver"]["read_mostly"] is True
    cush.ok("advise m0 preferred host")
    assert cush.ok("info m0")["driver"]["preferred_location"] == "host"
    cush.ok("prefetch m0 device")
    cush.ok("sync")
    assert cush.ok("info m0")["driver"]["last_prefetch_location"] == "device 0"
    cush.ok("prefetch m0 host")
    cush.ok("sync")
    assert cush.ok("info m0")["driver"]["last_prefetch_location"] == "host"
    assert cush.ok("show m0 count 3")["values"] == [7, 7, 7]
    cush.ok("alloc device 4KB")
    assert cush.fails("prefetch d0 host")["code"] == "KIND_MISMATCH"


def test_pin_limit_refuses_before_pinning(cush):
    cush.ok("set pinlimit 1MB; alloc pinned 512KB; alloc pageable 1MB")
    err = cush.fails("alloc pinned 1MB")
    assert err["code"] == "PIN_LIMIT" and "set pinlimit" in err["hint"]
    assert cush.fails("register h0")["code"] == "PIN_LIMIT"
    cush.ok("set pinlimit auto")
    cush.ok("register h0")


def test_timings_say_how_they_were_obtained(cush):
    cush.ok("alloc pinned 1MB; alloc device 1MB")
    label = cush.ok("memcpy p0 d0")["timing"]
    assert label == ("modeled" if cush.backend.name == "sim" else "measured")
    cush.ok("launch spin 20000")  # 20 ms of kernel ahead of it: the copy is still queued when its call returns
    async_copy = cush.ok("memcpy p0 d0 async")
    assert async_copy["timing"] == label and async_copy["blocking"] is False
    done = cush.ok("sync")
    assert [c["op"] for c in done["completed"]] == ["kernel spin", "memcpy h2d"]  # both settle at the sync
    copy = done["completed"][1]
    assert copy["bytes"] == 1 << 20 and copy["seconds"] > 0
    if cush.backend.name == "sim":  # modeled when the call is made; the sync reports the same figure
        assert async_copy["seconds"] == pytest.approx(copy["seconds"], rel=1e-6)
    else:  # measured: unknown until the copy has run, resolved at the sync
        assert async_copy["seconds"] is None


def test_calibrate_writes_a_profile_the_simulator_loads(cush, tmp_path):
    from cudashell.backends.profile import Profile
    from cudashell.backends.sim import SimBackend
    from tests.conftest import Cush

    path = tmp_path / "lab.json"
    res = cush.ok(f"calibrate out {path}")
    p = res["profile"]
    assert p["pinned_h2d"] > p["pageable_h2d"] > 0 and p["d2d"] > p["pinned_h2d"]
    assert p["kernel_device_read"] > p["kernel_zero_copy_read"] > 0
    assert 0 < p["copy_latency"] < 1e-3
    assert cush.ok("ls")["buffers"] == []  # its scratch buffers are gone
    assert p["gpus"] == len(cush.ok("devices")["devices"])
    sim = Cush(SimBackend(Profile.load(str(path))))
    try:
        modeled = sim.ok("alloc pinned 64MB; alloc device 64MB; memcpy p0 d0")
    finally:
        sim.shell.close()
    curve = dict((n, t) for n, t in p["copy_curves"]["pinned h2d"])
    assert modeled["seconds"] == pytest.approx(curve[64 * 2**20])  # the model uses the measured curve
    small, large = p["copy_curves"]["pageable h2d"][0], p["copy_curves"]["pageable h2d"][-1]
    assert small[0] / small[1] < large[0] / large[1]  # small pageable copies are slower per byte
    if cush.backend.name == "sim":  # calibrating the simulator gives back its own (calibrated) curves
        default = Profile.load(None)
        for path in ("pinned h2d", "pageable d2h", "d2d"):
            for (n, t), (n0, t0) in zip(p["copy_curves"][path], default.copy_curves[path]):
                assert n == n0 and t == pytest.approx(t0, rel=0.01), path
        for key in ("kernel_device_read", "kernel_zero_copy_read", "shell_overhead", "engine_switch"):
            assert p[key] == pytest.approx(getattr(default, key), rel=0.1), key


def test_doctor_explains_the_memory_path(cush):
    found = {f["topic"]: f for f in cush.ok("doctor")["findings"]}
    assert {"GPU", "PCIe link", "NUMA", "memlock", "huge pages", "IOMMU / virtualisation", "unifiedAddressing",
            "pageableMemoryAccess", "asyncEngineCount"} <= set(found)
    assert found["unifiedAddressing"]["value"] == "yes" and found["pageableMemoryAccess"]["value"] == "no"
    assert all(f["meaning"] for f in found.values())


def test_bench_memcpy_reports_rates_against_the_link(cush, tmp_path):
    res = cush.ok(f"bench memcpy h2d pinned pageable sizes 1MB,4MB reps 3 --csv {tmp_path / 'b.csv'}")
    rows = {(r["kind"], r["size"]): r for r in res["rows"]}
    assert rows[("pinned", 4 << 20)]["gbps"] > rows[("pageable", 4 << 20)]["gbps"] > 0
    assert 0 < rows[("pinned", 4 << 20)]["percent_of_peak"] <= 100 and res["timing"] in ("measured", "modeled")
    assert (tmp_path / "b.csv").read_text().splitlines()[0].startswith("kind,size,gbps,cv")
    z = cush.ok("bench zerocopy 2^16..2^18")
    assert [r["n"] for r in z["rows"]] == [2**16, 2**17, 2**18]
    assert all(r["zc_kernel_us"] > r["dev_kernel_us"] for r in z["rows"])
    a = cush.ok("bench alloc pinned device sizes 64MB")
    assert {r["call"] for r in a["rows"]} == {"cudaHostAlloc", "cudaMalloc"}
    assert cush.ok("ls")["buffers"] == []


def test_bench_plot_writes_a_png(sim, tmp_path):
    pytest.importorskip("matplotlib")
    sim.ok(f"bench overlap streams 1,2 --plot {tmp_path / 'o.png'}")
    assert (tmp_path / "o.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_json_flag_is_presentation_not_data(sim):
    """`--json` on a bench prints its object in text mode; it is not a field of the result."""
    res = sim.ok("bench alloc pinned sizes 4MB --json")
    assert "json" not in res and res["bench"] == "alloc"
    sim.shell.session.settings["format"] = "table"
    start = sim.out.tell()
    sim.shell.execute("bench alloc pinned sizes 4MB --json")
    sim.out.seek(start)
    import json
    assert json.loads(sim.out.read().splitlines()[-1])["bench"] == "alloc"


def test_csv_format_and_output_to_a_file(sim, tmp_path):
    import csv

    sim.shell.session.settings["format"] = "table"
    path = tmp_path / "results.csv"
    sim.shell.execute(f"alloc pinned 1MB as a; alloc device 1MB as b; set format csv; output {path}; ls; streams; "
                      "output off; set format json")
    rows = list(csv.DictReader(path.read_text().splitlines()[:3]))
    assert [(r["name"], r["kind"], r["size"]) for r in rows] == [("a", "pinned", "1048576"), ("b", "device", "1048576")]
    assert "name,number,nonblocking" in path.read_text()
    screen = sim.out.getvalue()
    assert f"results go to {path}" in screen and "0x" not in screen.split("results go to")[1].split("results go")[0]
    assert sim.fails("output /nonexistent-dir/x.txt")["code"] == "IO_ERROR"


@pytest.mark.parametrize("width", [80, 120])
def test_text_output_fits_the_terminal_and_keeps_pointers_whole(width):
    import io
    import re

    from cudashell.backends.sim import SimBackend
    from cudashell.frontends.shell import Shell

    out = io.StringIO()
    shell = Shell(SimBackend(), out=out, err=out)
    shell.session.settings["width"] = width
    shell.execute("alloc pinned 1MB as a; alloc device 64MB as dev; alloc pageable 4MB as mine; register mine mapped; "
                  "alloc managed 1MB; stream create; memcpy a dev async stream 1; ls; memcpy h2d mine dev; profile")
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= width, [x for x in lines if len(x) > width]
    pointers = {b.host_ptr for b in shell.session.buffers.values() if b.host_ptr} | \
        {b.device_ptr for b in shell.session.buffers.values() if b.device_ptr}
    text = out.getvalue()
    assert all(f"0x{p:012x}" in text for p in pointers)  # each printed whole somewhere
    assert not re.search(r"0x[0-9a-f]{1,11}$", text, re.M)  # and never cut at a line's end
    shell.close()

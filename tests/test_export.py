"""export c: the session as a CUDA C program that nvcc compiles and that, on a GPU, prints the checksums
the session computed."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.conftest import Cush, gpu_missing, make_backend

SESSION = ("alloc pinned 1MB mapped; alloc device 1MB; alloc pageable 64KB; fill p0 random seed 5 dtype float32; "
           "fill h0 iota dtype int32; register h0 portable; stream create; stream create nonblocking priority high; "
           "event record a; memcpy p0 d0 async stream 1; launch scale d0 2.5 stream 1; launch spin 100 stream 2; "
           "event record b stream 1; wait 2 b; memcpy d2h d0 p0 async stream 2; callback 2 done; sync; "
           "elapsed a b; repeat 3 <<< launch increment d0; memset d0 1 16 >>>; alloc managed 4KB; "
           "launch fill m0 3; launch saxpy 0.5 m0 m0; prefetch m0 host; advise m0 readmostly; sync; "
           "alloc device 64KB as tmp; memcpy h0 tmp; launch sum tmp tmp tmp; launch scale tmp 0.5 grid 3,2 block 8,4,2; "
           "sync; "
           "memcpy p0[512KB:+64KB] d0[4KB:] async stream 1; launch scale d0[8KB:+8KB] 3.0; memset tmp[60KB:] 9; "
           "memcpy d0[0:256KB] p0[768KB:]; sync; echo all done")
NVCC = shutil.which("nvcc")


def export(cush, path):
    objs = cush.run(SESSION)
    assert all(o["ok"] for o in objs), [o for o in objs if not o["ok"]]
    sums = cush.ok("checksum p0 d0 h0 m0 tmp")["checksums"]
    cush.ok(f"export c {path}")
    return sums


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_the_export_compiles_with_nvcc(sim, tmp_path):
    export(sim, tmp_path / "s.cu")
    text = (tmp_path / "s.cu").read_text()
    assert "cudaHostAlloc((void **)&b_p0, 1048576, cudaHostAllocMapped)" in text
    assert "for (int round = 0; round < 3; round++)" in text and "k_scale<<<" in text
    assert "dim3 grid(3, 2); dim3 block(8, 4, 2);" in text and "k_scale<<<grid, block, 0, 0>>>" in text
    r = subprocess.run([NVCC, "-O2", "-o", str(tmp_path / "s"), str(tmp_path / "s.cu")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.mark.gpu
def test_the_export_prints_the_sessions_checksums_on_the_gpu(tmp_path):
    if gpu_missing():
        pytest.skip(f"no GPU: {gpu_missing()}")
    cush = Cush(make_backend("cuda"))
    try:
        sums = export(cush, tmp_path / "s.cu")
    finally:
        cush.shell.close()
    subprocess.run([NVCC, "-O2", "-o", str(tmp_path / "s"), str(tmp_path / "s.cu")], check=True, timeout=300)
    out = subprocess.run([str(tmp_path / "s")], capture_output=True, text=True, timeout=120, check=True).stdout
    printed = {m[0]: int(m[1]) for m in re.findall(r"^checksum (\S+) (\d+)$", out, re.M)}
    assert printed == sums and "callback: done" in out and "all done" in out


def test_a_percent_sign_in_printed_text_is_printed_as_typed(sim, tmp_path):
    """echo, say and callback text reach C through printf("%s", …): a % in it is not a conversion there, and the
    exported program must print what the shell printed (it printed 50%% once)."""
    sim.ok('echo "50% done"')
    sim.ok("stream create")
    sim.ok('callback 1 "at 100%"')
    sim.ok(f"export c {tmp_path / 'p.cu'}")
    text = (tmp_path / "p.cu").read_text()
    assert 'printf("%s\\n", "50% done");' in text and '(void *)"at 100%"' in text and "%%" not in text


def test_stream_ordered_allocation_is_exported_and_explained(sim, tmp_path):
    sim.ok("stream create; alloc pinned 64KB as p; alloc device 64KB async stream 1 as x; memset x 5 async stream 1; "
           "memcpy x p async stream 1; free x async stream 1; sync")
    sim.ok(f"export c {tmp_path / 's.cu'}")
    text = (tmp_path / "s.cu").read_text()
    assert "CHECK(cudaMallocAsync((void **)&b_x, 65536, s_1));" in text
    assert "CHECK(cudaFreeAsync(b_x, s_1));" in text
    assert text.index("cudaMallocAsync") < text.index("cudaMemsetAsync(b_x, 5") < text.index("cudaFreeAsync")
    sim.ok("explain on")
    explained = sim.run("alloc device 4KB async stream 1 as y; free y async stream 1")
    shown = "\n".join(o["explain"]["c"] for o in explained if o.get("explain"))
    assert "cudaMallocAsync((void **)&b_y, 4096, s_1)" in shown and "cudaFreeAsync(b_y, s_1)" in shown
    if NVCC:
        r = subprocess.run([NVCC, "-O2", "-o", str(tmp_path / "s"), str(tmp_path / "s.cu")], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr

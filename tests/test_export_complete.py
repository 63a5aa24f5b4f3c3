"""export c writes every exported command (issue 24, item 3): a session that uses each command the registry marks
`exported` becomes a program with no command left out, that nvcc builds and that, on a GPU, prints the session's
checksums; a command that cannot be written faithfully is refused by name, and no file is written."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import replace

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.errors import ShellError
from cudashell.export.cemit import Writer
from cudashell.language import registry
from cudashell.language.grammar import split_commands
from cudashell.language.registry import parse_segment, specs
from tests.conftest import Cush, gpu_missing, make_backend

NVCC = shutil.which("nvcc")
KERNEL_FILE = """// loaded `as mine`: its `twice` is not the one `kernel define` made (each source has a namespace in C)
__device__ float plus(float x, float k) { return x + k; }
__global__ void addk(float *a, float k, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = plus(a[i], k); }
__global__ void twice(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = a[i] * 3.0f; }
"""
SESSION = [  # every exported command, each where it does CUDA work a program can do the same way
    "alloc pinned 1MB mapped as p0", "alloc device 1MB as d0", "alloc pageable 256KB as h0", "alloc managed 64KB as m0",
    "fill p0 random seed 5 dtype float32", "fill h0 iota dtype int32", "fill m0 7 dtype float16",
    "alloc pageable 1003B as odd", "fill odd random seed 7 dtype uint16",  # words' bytes; the odd byte stays
    "register h0 portable", "stream create as 1", "stream create nonblocking priority high as 2", "device use 0",
    "kernel define twice <<< __global__ void twice(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; "
    "if (i < n) a[i] *= 2; } >>>",
    "kernel load {dir}/mine.cu as mine",
    "event record a", "memcpy p0 d0 async stream 1", "launch scale d0 2.5 stream 1", "launch twice d0 262144 stream 1",
    "launch mine.addk d0 1.5 262144 stream 1", "launch mine.twice d0[4KB:] 1024 stream 1", "event record b stream 1",
    "wait 2 b", "memcpy d2h d0 p0 async stream 2", "callback 2 done", "event sync b", "sync", "elapsed a b",
    "show p0 count 4", "memcpy batch <<< memcpy p0[0:4KB] d0[768KB:+4KB]; memcpy d0[4KB:+4KB] p0[8KB:+4KB] >>> "
    "stream 1 order during-call",
    # held work on three streams at once touches three separate parts of d0: the checksums do not race
    "hold", "memcpy p0[0:64KB] d0[64KB:] async stream 1", "launch increment d0[256KB:+4KB] stream 2", "stream create as 3",
    "memset d0[0:4KB] 3 async stream 3", "event record c stream 2", "release", "sleep 5", "sync",
    "event destroy a", "event destroy c",
    "memcpy h0 d0[512KB:] 256KB", "alloc pitched 1000x64 as img", "alloc pitched 100x8x4 as vol",
    "memcpy2d p0 img[1024:] 1000x63", "memcpy2d img p0[64KB:] 1000x64 dpitch 2000 async stream 1",
    "memcpy3d h0 vol 100x8x4", "memcpy3d vol h0[4KB:] 100x8x4 async stream 1", "unregister h0", "prefetch m0 device stream 1", "advise m0 readmostly",
    "launch fill m0 3", "repeat 3 <<< launch increment d0; memset d0[0:16] 1 16 >>>", "sync",
    "pool create as mp1", "pool set mp1 threshold max", "pool set default reuse opportunistic off",
    "alloc device 64KB async stream 1 pool mp1 as pa", "memset pa 2 async stream 1", "memcpy pa d0[0:64KB] async stream 1",
    "free pa async stream 1", "sync", "pool trim mp1 1MB", "pool destroy mp1", "pool set default reuse opportunistic on",
    "context create as c1", "alloc pinned 64KB portable as cp", "stream create as 4", "fill cp 9",
    "launch increment cp stream 4", "sync stream 4", "stream destroy 4", "context use gpu0", "memcpy cp d0[0:64KB]",
    "free cp", "context destroy c1",
    # virtual memory: one handle at two addresses of a reservation, so d0 gets p0's bytes through the alias
    "vmm granularity", "vmm reserve 4MB as va", "vmm create 2MB as mem", "vmm map mem va", "vmm map mem va[2MB:]",
    "vmm access va rw", "memcpy p0 va[0:+1MB]", "memcpy va[2MB:+1MB] d0", "vmm unmap va[2MB:+2MB]", "vmm release mem",
    "vmm unmap va", "vmm free va",
    "if gpus 2 <<< device use 1; alloc device 64KB as far; peer enable 0 1; device use 0 >>>",
    "say en narrated", "sync", "reset",
    "memcpy p0 d0", "launch twice d0 262144 stream 1", "event record b stream 1", "event sync b", "stream destroy 2",
    "free h0", "sync", "echo all done",
]


def exported_names() -> set[str]:
    return {s.name for s in specs() if s.exported}


def used(texts) -> set[str]:
    """The commands a session's lines use, those inside `repeat` and `if gpus` blocks too."""
    names = set()
    for text in texts:
        for seg in split_commands(text):
            cmd = parse_segment(seg)
            names.add(cmd.spec.name)
            if cmd.spec.name in ("repeat", "if gpus"):
                names |= used([cmd.args.get("COMMANDS").replace("\n", ";")])
    return names


def run_session(cush, tmp_path) -> dict:
    """Run SESSION (all of it must succeed) and return the checksums of the buffers alive at its end."""
    (tmp_path / "mine.cu").write_text(KERNEL_FILE)
    for line in SESSION:
        objs = cush.run(line.replace("{dir}", str(tmp_path)))
        assert objs and all(o["ok"] for o in objs), (line, [o for o in objs if not o["ok"]])
    names = [b["name"] for b in cush.ok("ls")["buffers"]]
    return cush.ok("checksum " + " ".join(names))["checksums"]


def export(cush, tmp_path) -> tuple[dict, str]:
    sums = run_session(cush, tmp_path)
    path = tmp_path / "session.cu"
    cush.ok(f"export c {path}")
    return sums, path.read_text()


def build(tmp_path, text: str):
    """nvcc with the command the file's own header gives."""
    (tmp_path / "session.cu").write_text(text)
    line = next(x for x in text.splitlines() if x.startswith("// Build and run"))
    cmd = shlex.split(line.split(": ", 1)[1].split("&&")[0])
    r = subprocess.run([NVCC, *cmd[1:]], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]
    return tmp_path / "session"


@pytest.fixture(params=["one-gpu", "two-h200"])
def session_c(request, tmp_path):
    """The exported program of SESSION on the simulator: one GPU (`if gpus 2` skipped) and two (it ran)."""
    cush = Cush(SimBackend() if request.param == "one-gpu" else SimBackend(Profile.load("two-h200")))
    try:
        yield export(cush, tmp_path)
    finally:
        cush.shell.close()


def test_the_session_uses_every_exported_command():
    assert exported_names() - used(SESSION) == set(), "add the new exported command to SESSION"


def test_every_exported_command_has_a_writer():
    missing = {s.name for s in specs() if s.exported and not callable(s.c_writer)}
    assert missing == set(), f"exported commands without a C writer (@c_writer beside the handler): {sorted(missing)}"


def test_an_exported_command_without_a_writer_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(registry, "_PARSED", {})  # no parse made with the real spec
    monkeypatch.setitem(registry.REGISTRY, "sleep", replace(registry.lookup("sleep"), c_writer=None))
    with pytest.raises(ShellError) as e:
        Writer().command("sleep 5")
    assert e.value.code == "NOT_EXPORTABLE" and "`sleep` has no C writer" in e.value.message


def test_explain_writes_every_exported_command_through_its_writer(tmp_path):
    """`explain on` and `export c` share the writers: each exported command of SESSION shows its C, except `show`
    (the host reads memory: no CUDA) and `reset` (explain sees the buffers alive, not how they were made)."""
    (tmp_path / "mine.cu").write_text(KERNEL_FILE)
    cush = Cush(SimBackend(Profile.load("two-h200")))
    try:
        cush.ok("explain on")
        explained = {parse_segment(split_commands(o["cmd"])[0]).spec.name
                     for line in SESSION for o in cush.run(line.replace("{dir}", str(tmp_path))) if o.get("explain")}
    finally:
        cush.shell.close()
    assert exported_names() - explained == {"show", "reset"}


def test_the_export_leaves_no_command_out(session_c):
    _, text = session_c
    assert "not exported" not in text
    for wanted in ("CHECK(cudaEventDestroy(e_a));", "k_hold<<<1, 1, 0, s_3>>>(hold_flag, hold_gen);",
                   "*(volatile unsigned int *)hold_flag = hold_gen;", "std::chrono::milliseconds(5)",
                   "namespace user1 {", "namespace user2 {", "user1::twice<<<1024, 256, 0, s_1>>>",
                   "user2::twice<<<1020, 256, 0, s_1>>>(any_ptr{b_d0 + 4096}, (int32_t)1024);",
                   "user2::addk<<<1024, 256, 0, s_1>>>(any_ptr{b_d0}, (float)1.5, (int32_t)262144);",
                   "ctx_c1 = ctx_create(0);", "ctx_destroy(ctx_c1);", "CHECK(cudaGetDeviceCount(&gpus)); if (gpus >= 2)",
                   "CHECK(cudaDeviceReset());", "fill_value<f16>(b_m0, 65536, 7);", 'printf("%s\\n", "narrated");',
                   "CHECK(cudaSetDevice(0));", "use_primary(1);"):
        assert wanted in text, wanted
    main = text[text.index("int main() {"):]
    assert main.index('setenv("CUDA_MODULE_LOADING", "EAGER", 1);') < main.index("cuda")  # before CUDA starts


def test_a_block_that_ran_is_written_from_what_it_ran(tmp_path):
    cush = Cush(SimBackend(Profile.load("two-h200")))
    try:
        cush.ok("if gpus 2 <<< device use 1; alloc device 64KB; device use 0 >>>; alloc pinned 4KB as p")
        cush.ok(f"export c {tmp_path / 's.cu'}")
    finally:
        cush.shell.close()
    text = (tmp_path / "s.cu").read_text()
    start = text.index("if (gpus >= 2)")
    block = text[start:text.index("} }", start)]
    assert "cudaMalloc((void **)&b_d0, 65536)" in block and "cudaSetDevice(1)" in block
    assert 'if (b_d0) {' in text and 'printf("checksum p ' in text  # made in the block: read only where it ran


@pytest.mark.parametrize("lines, command, why", [
    (["repeat 2 <<< alloc pinned 4KB >>>"], "repeat 2", "each round makes another"),
    (["alloc pinned 4KB as p", "hold", "reset"], "reset", "never runs in the session"),
    (["context create as mine", "alloc device 4KB as d", "reset"], "reset", "context mine"),
])
def test_what_cannot_be_written_is_refused_by_name(sim, tmp_path, lines, command, why):
    for line in lines:
        sim.ok(line)
    err = sim.fails(f"export c {tmp_path / 's.cu'}")
    assert err["code"] == "NOT_EXPORTABLE" and f"`{command}" in err["message"] and why in err["message"], err
    assert not (tmp_path / "s.cu").exists()


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_the_export_compiles_with_nvcc(session_c, tmp_path):
    build(tmp_path, session_c[1])


@pytest.mark.gpu
def test_the_export_prints_the_sessions_checksums_on_the_gpu(tmp_path):
    if gpu_missing():
        pytest.skip(f"no GPU: {gpu_missing()}")
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    cush = Cush(make_backend("cuda"))
    try:
        sums, text = export(cush, tmp_path)
    finally:
        cush.shell.close()
    program = build(tmp_path, text)
    out = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-4000:]
    printed = {m[0]: int(m[1]) for m in re.findall(r"^checksum (\S+) (\d+)$", out.stdout, re.M)}
    assert printed == sums, (printed, sums)
    assert "callback: done" in out.stdout and "all done" in out.stdout and "narrated" in out.stdout

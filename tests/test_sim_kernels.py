"""Users' kernels on the simulator as a person meets them: what memcheck and racecheck say, what is counted,
when printf appears, when bytes land, what is refused — and, where a GPU is present, that it agrees."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

COPY = ("kernel define strided <<< __global__ void strided(const float *in, float *out, int n, int stride) "
        "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = in[(i * stride) % n]; } >>>")


def floats(c, name, count):
    return c.ok(f"show {name} dtype float32 count {count}")["values"]


def test_an_out_of_bounds_write_faults_at_the_next_sync_naming_thread_address_buffer_and_line(sim):
    sim.ok("kernel define over <<< __global__ void over(int *a) {\n a[threadIdx.x + 1000] = 7;\n} >>>")
    sim.ok("alloc device 4000B as d; alloc pinned 4KB as h; fill h 5 dtype uint8")
    sim.ok("launch over d grid 1 block 32")  # asynchronous: the fault is not known to the host yet
    err = sim.fails("sync")
    assert err["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    msg = err["message"]
    assert "Invalid __global__ write of size 4" in msg and "over (kernel define):2:" in msg
    assert "thread (0,0,0) in block (0,0,0)" in msg and "0 bytes after the nearest allocation d" in msg
    assert sim.fails("alloc device 4KB as e")["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"  # sticky
    sim.ok("reset")
    assert set(sim.ok("show h count 16")["values"]) == {5}  # host memory kept


def test_a_write_to_readonly_registered_memory_faults(sim):
    sim.ok("kernel define put <<< __global__ void put(int *a) { a[threadIdx.x] = 1; } >>>")
    sim.ok("alloc pageable 4KB as r; register r readonly; launch put r grid 1 block 32 unchecked")
    err = sim.fails("sync")
    assert err["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS" and "registered read-only" in err["message"]


def test_a_misaligned_access_faults_with_the_drivers_name(sim):
    sim.ok("kernel define mis <<< __global__ void mis(char *a) { *(int *)(a + 1) = 3; } >>>")
    sim.ok("alloc device 64B as d; launch mis d grid 1 block 1")
    assert sim.fails("sync")["code"] == "CUDA_ERROR_MISALIGNED_ADDRESS"


def test_a_shared_memory_race_is_a_warning_and_the_kernel_still_runs(sim):
    sim.ok("kernel define racy <<< __global__ void racy(int *out) { __shared__ int s[64]; s[threadIdx.x] = "
           "threadIdx.x; out[threadIdx.x] = s[(threadIdx.x + 1) % 64]; } >>>")
    sim.ok("alloc managed 256B as o; launch racy o grid 1 block 64")
    objs = sim.run("sync")
    warnings = [o for o in objs if o["cmd"] == "(kernel output)"]
    assert warnings and "read-after-write" in warnings[0]["result"]["warnings"][0]
    assert "byte 4 of the block's shared memory" in warnings[0]["result"]["warnings"][0]
    assert sim.ok("show o dtype int32 count 4")["values"] == [1, 2, 3, 4]


def test_a_barrier_some_threads_skip_is_refused_naming_the_line(sim):
    sim.ok("kernel define half <<< __global__ void half(int *a) { if (threadIdx.x < 16) { __syncthreads(); } "
           "a[threadIdx.x] = 1; } >>>")
    sim.ok("alloc device 256B as d")
    err = sim.fails("launch half d grid 1 block 64")
    assert err["code"] == "DIVERGENT_BARRIER" and "half (kernel define):1:" in err["message"]
    sim.ok("sync")  # refused before anything was queued: the context lives


def test_printf_lines_appear_when_the_kernel_completes(sim):
    sim.ok('kernel define hello <<< __global__ void hello() { if (threadIdx.x < 2) printf("hi from %d\\n", '
           'threadIdx.x); } >>>')
    launched = sim.run("launch hello grid 1 block 32")
    assert all(o["cmd"] != "(kernel output)" for o in launched)
    flushed = [o for o in sim.run("sync") if o["cmd"] == "(kernel output)"]
    assert flushed[0]["result"]["lines"] == ["hi from 0", "hi from 1"]


def test_unit_and_large_strides_count_4_and_32_sectors_a_request_and_take_longer(sim):
    sim.ok(COPY)
    sim.ok("alloc device 4MB as a; alloc device 4MB as b")
    unit = sim.ok("launch strided a b 1048576 1i grid 4096 block 256")
    far = sim.ok("launch strided a b 1048576 32i grid 4096 block 256")
    assert unit["counts"]["global"]["device"]["sectors_per_request"] == 4.0
    assert unit["counts"]["global"]["device"]["pattern"] == "coalesced"
    warps = 1048576 // 32
    far_device = far["counts"]["global"]["device"]
    assert far_device["requests"] == 2 * warps  # a load and a store a warp
    assert far_device["sectors"] == warps * 32 + warps * 4  # each thread's load a sector of its own; stores 4
    sim.ok("sync")
    (kernel,) = [r for r in sim.ok("profile")["gpu"] if r["name"].startswith("strided")]
    assert kernel["max"] > 1.5 * kernel["min"]  # 9× the sectors, after the same launch latency and floor


def test_bytes_land_in_stream_order_after_an_async_copy(sim):
    """The launch runs once at issue (to count) and again at its end when an earlier copy changed its input."""
    sim.ok("kernel define twice <<< __global__ void twice(float *a) { a[threadIdx.x] *= 2; } >>>")
    sim.ok("alloc pinned 128B as h; alloc device 128B as d; fill h 3 dtype float32; launch fill d 1; sync")
    sim.ok("launch spin 2000")  # the modeled GPU is busy for 2 ms: what follows waits in the stream
    sim.ok("memcpy h2d h d async; launch twice d grid 1 block 32; memcpy d2h d h async")
    assert floats(sim, "h", 2) == [3.0, 3.0]  # nothing has finished on the modeled GPU yet
    sim.ok("sync")
    assert floats(sim, "h", 32) == [6.0] * 32


def test_the_same_kernel_on_mapped_host_memory_is_slower_by_the_h100s_ratio(sim):
    sim.ok("kernel define add <<< __global__ void add(const float *a, const float *b, float *c, int n) "
           "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; } >>>")
    sim.ok("alloc pinned 4MB mapped as za; alloc pinned 4MB mapped as zb; alloc device 4MB as a; "
           "alloc device 4MB as b; alloc device 4MB as c")
    sim.ok("launch add a b c 1048576i grid 4096 block 256; launch add za zb c 1048576i grid 4096 block 256; sync")
    dev, zc = (r for r in sim.ok("profile")["metrics"] if r["kernel"] == "add")
    assert {dev["memory"], zc["memory"]} == {"device", "zero-copy"}
    times = sorted(e.end - e.start for e in sim.shell.session.trace if e.op == "kernel add")
    assert 15 < times[1] / times[0] < 25  # the H100, events around back-to-back launches: 170 vs 8 µs for 2^20 floats


def test_float_kernels_give_the_fused_multiply_adds_bits(sim):
    sim.ok("kernel define ax <<< __global__ void ax(float a, const float *x, float *y) "
           "{ int i = threadIdx.x; y[i] = a * x[i] + y[i]; } >>>")
    sim.ok("alloc managed 4KB as x; alloc managed 4KB as y; fill x random dtype float32 seed 3; "
           "fill y random dtype float32 seed 4")
    x = np.frombuffer(bytes(sim.ok("show x dtype uint8 count 4096")["values"]), np.float32)
    y = np.frombuffer(bytes(sim.ok("show y dtype uint8 count 4096")["values"]), np.float32)
    sim.ok("launch ax 1.1f x y grid 1 block 1024; sync")
    got = np.frombuffer(bytes(sim.ok("show y dtype uint8 count 4096")["values"]), np.float32)
    fused = (np.float64(np.float32(1.1)) * x.astype(np.float64) + y).astype(np.float32)
    assert (got == fused).all()
    assert (got != (np.float32(1.1) * x + y)).any()  # separate multiply and add differ: the test can fail


def test_show_access_draws_which_thread_touched_which_element(sim):
    sim.ok("kernel define shift <<< __global__ void shift(const float *a, float *b, int n) { int i = blockIdx.x "
           "* blockDim.x + threadIdx.x; if (i + 1 < n) b[i] = a[i] + a[i + 1]; } >>>")
    sim.ok("alloc device 64B as a; alloc device 64B as b")
    access = sim.ok("launch shift a b 16i grid 2 block 8 show-access")["access"]
    assert access["a"]["elements"]["8"] == {"read": ["b1:0", "b0:7"], "write": []}
    assert access["b"]["elements"]["14"] == {"read": [], "write": ["b1:6"]}
    assert "15" not in access["b"]["elements"]
    assert sim.fails("launch shift a b 16i grid 64 block 32 show-access")["code"] == "USAGE"
    sim.ok("kernel define upper <<< __global__ void upper(int *b) { b[threadIdx.x + 32] = 1; } >>>")
    sim.ok("alloc device 256B as c")  # whole warps on consecutive elements, from element 32: a run of them
    access = sim.ok("launch upper c grid 1 block 32 show-access")["access"]
    assert access["c"]["elements"]["32"] == {"read": [], "write": ["0"]} and "0" not in access["c"]["elements"]
    assert access["c"]["elements"]["63"] == {"read": [], "write": ["31"]}


def test_constructs_outside_the_subset_are_refused_with_their_line(sim):
    err = sim.fails('kernel define k <<< __global__ void k(int *a) {\n  asm("mov.u32 %0, 1;" : "=r"(a[0]));\n} >>>')
    assert err["code"] == "NOT_SUPPORTED_ON_SIM" and "k (kernel define):2:3" in err["message"] and "asm" in err["message"]
    err = sim.fails("kernel define k <<< __global__ void k(int *a) { int x = a[0] a[1] = x; } >>>")
    assert err["code"] == "USAGE" and "expected ';'" in err["message"]
    assert "k" not in [k["name"] for k in sim.ok("kernels")["kernels"]]


def test_the_front_end_is_imported_only_when_a_kernel_is_defined():
    code = ("import sys, io; from cudashell.frontends.shell import Shell; from cudashell.backends.sim import SimBackend; "
            "s = Shell(SimBackend(), 't', out=io.StringIO(), err=io.StringIO()); s.execute('alloc device 1MB'); "
            "print('clang.cindex' in sys.modules, 'cudashell.simt.frontend' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_show_access_is_a_picture_in_a_notebook(sim):
    pytest.importorskip("matplotlib")
    from cudashell.output import figures
    from cudashell.output.results import Result

    sim.ok("kernel define copy2 <<< __global__ void copy2(const int *a, int *b) { b[threadIdx.x] = a[threadIdx.x]; } >>>")
    sim.ok("alloc device 32B as a; alloc device 32B as b")
    result = sim.ok("launch copy2 a b grid 1 block 8 show-access")
    fig = Result.KINDS["launch"](result).figure()
    try:
        assert [ax.get_title(loc="left") for ax in fig.axes] == ["a", "b"]
        assert len(fig.axes[1].patches) == 8  # one cell an element written
    finally:
        figures.close(fig)
    assert Result.KINDS["launch"](sim.ok("launch copy2 a b grid 1 block 8")).figure() is None


def test_shared_atomics_are_each_blocks_own(sim):
    sim.ok("kernel define count <<< __global__ void count(int *olds, int *out) { __shared__ int c; "
           "int g = blockIdx.x * blockDim.x + threadIdx.x; if (threadIdx.x == 0) c = 100 * blockIdx.x; "
           "__syncthreads(); olds[g] = atomicAdd(&c, 1); __syncthreads(); if (threadIdx.x == 0) out[blockIdx.x] = c; } >>>")
    sim.ok("alloc managed 512B as olds; alloc managed 16B as out; launch count olds out grid 4 block 32; sync")
    assert sim.ok("show out dtype int32 count 4")["values"] == [32, 132, 232, 332]
    olds = sim.ok("show olds dtype int32 count 128")["values"]
    assert sorted(olds[32:64]) == list(range(100, 132))


def test_compare_and_swaps_on_one_address_are_serialised_in_thread_order(sim):
    """Each thread's atomicCAS sees the value its turn finds: a chain (thread i swaps i for i + 1) all swap in one
    call; a crowd expecting 0 has one winner, and the rest see its value; a CAS add loop sums every thread."""
    sim.ok("kernel define chain <<< __global__ void chain(int *olds, int *p, int *q, int *sum) { "
           "int i = blockIdx.x * blockDim.x + threadIdx.x; olds[i] = atomicCAS(p, i, i + 1); "
           "olds[i + 512] = atomicCAS(q, 0, i + 7); int old = *sum, assumed; "
           "do { assumed = old; old = atomicCAS(sum, assumed, assumed + i); } while (assumed != old); } >>>")
    sim.ok("alloc managed 4KB as olds; alloc managed 4B as p; alloc managed 4B as q; alloc managed 4B as sum; "
           "fill p 0; fill q 0; fill sum 0; launch chain olds p q sum grid 2 block 256; sync")
    olds = sim.ok("show olds dtype int32 count 1024")["values"]
    assert olds[:512] == list(range(512)) and sim.ok("show p dtype int32 count 1")["values"] == [512]
    assert olds[512] == 0 and set(olds[513:]) == {7}
    assert sim.ok("show sum dtype int32 count 1")["values"] == [sum(range(512))]


def test_each_function_has_its_own_shared_variables_and_file_scope_ones_are_every_kernels(sim):
    sim.ok("kernel define two <<< __device__ int f(int i) { __shared__ int s[32]; s[threadIdx.x] = 100; "
           "__syncthreads(); return s[threadIdx.x] + i; }\n__global__ void two(int *o) { __shared__ int s[32]; "
           "s[threadIdx.x] = threadIdx.x * 1000; __syncthreads(); o[threadIdx.x] = f(s[threadIdx.x]); } >>>")
    sim.ok("alloc managed 128B as o; launch two o grid 1 block 32; sync")
    assert sim.ok("show o dtype int32 count 3")["values"] == [100, 1100, 2100]
    sim.ok("kernel define rev <<< extern __shared__ float dyn[];\n__global__ void rev(float *o) { "
           "dyn[threadIdx.x] = threadIdx.x; __syncthreads(); o[threadIdx.x] = dyn[31 - threadIdx.x]; } >>>")
    sim.ok("launch rev o grid 1 block 32 shared 128; sync")
    assert sim.ok("show o dtype float32 count 2")["values"] == [31.0, 30.0]


def test_a_kernel_after_an_include_is_found(sim, tmp_path):
    (tmp_path / "k.cu").write_text("#include <cuda_runtime.h>\n__global__ void k(int *o) { o[threadIdx.x] = 7; }\n")
    assert sim.ok(f"kernel load {tmp_path / 'k.cu'}")["loaded"] == ["k(o)"]


def test_an_error_directive_stops_the_load_only_where_the_preprocessor_reaches_it(sim, tmp_path):
    """cuda-samples guard their constants with `#if N % M` / `#error`: nvcc skips an #error an #if left out."""
    guarded = "#define N 2048\n#define M (2 * 16)\n#if N % M\n#error Bad constants\n#endif\n#warning kept going\n"
    (tmp_path / "ok.cu").write_text(guarded + "__global__ void k(int *o) { o[0] = N % M; }\n")
    assert sim.ok(f"kernel load {tmp_path / 'ok.cu'}")["loaded"] == ["k(o)"]
    (tmp_path / "bad.cu").write_text(guarded.replace("2048", "2047") + "__global__ void k(int *o) { }\n")
    error = sim.fails(f"kernel load {tmp_path / 'bad.cu'}")
    assert error["code"] == "USAGE" and "#error Bad constants" in error["message"], error


def test_24_bit_multiplies_keep_the_low_32_bits_of_the_24_bit_operands_product(sim):
    sim.ok("kernel define m24 <<< __global__ void m24(int a0, int a1, int b, int *s, unsigned *u) { "
           "int a = threadIdx.x ? a1 : a0; s[threadIdx.x] = __mul24(a, b); u[threadIdx.x] = __umul24(a, b); } >>>")
    sim.ok(f"alloc managed 8 as s; alloc managed 8 as u; launch m24 {0x7FFFFF} {0x12800003} -1 s u grid 1 block 2; sync")
    assert sim.ok("show s dtype int32")["values"] == [-0x7FFFFF, 0x7FFFFD]  # 0x800003 is -0x7FFFFD in 24 bits
    assert sim.ok("show u dtype uint32")["values"] == [(0x7FFFFF * 0xFFFFFF) % 2**32, (0x800003 * 0xFFFFFF) % 2**32]


@pytest.mark.parametrize("source, construct", [
    ("struct B { int a:3; }; __global__ void k(int *o) { B b; b.a = 5; o[0] = b.a; }", "bit-field"),
    ("__global__ void k(int *o) { int x = 1; int &r = x; r = 5; o[0] = x; }", "reference variable"),
    ('__global__ void k(char *o) { const char *s = "abc"; o[0] = s[1]; }', "string outside printf"),
    ("__global__ void k(int *o) { uint3 t = threadIdx; o[0] = t.x; }", "threadIdx as a whole"),
    ("__global__ void k(float *o) { o[0] = copysignf(1.0f, o[1]); }", "copysignf"),
])
def test_what_the_interpreter_cannot_run_is_refused_at_define(sim, source, construct):
    err = sim.fails(f"kernel define k <<< {source} >>>")
    assert err["code"] == "NOT_SUPPORTED_ON_SIM" and construct in err["message"]


def test_a_kernel_that_never_ends_is_refused_and_the_context_lives(sim, monkeypatch):
    from cudashell.simt import interp

    monkeypatch.setattr(interp, "RUNAWAY_ROUNDS", 1000)
    monkeypatch.setattr(interp, "RUNAWAY_SECONDS", 0.0)
    sim.ok("kernel define forever <<< __global__ void forever(int *o) { while (o[0] == 0) { } } >>>")
    sim.ok("alloc device 4B as o")
    assert sim.fails("launch forever o grid 1 block 1")["code"] == "RUNAWAY_KERNEL"
    sim.ok("launch fill o 1; sync")


TILED = r'''
__global__ void tiled(const float *a, float *out, int tiles, int sync_twice) {
  __shared__ float s[16][17];
  float acc = 0.0f;
  for (int t = 0; t < tiles; ++t) {
    s[threadIdx.y][threadIdx.x] = a[(blockIdx.x * tiles + t) * 256 + threadIdx.y * 16 + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < 16; ++k)
      acc += s[threadIdx.y][k] * s[k][threadIdx.x];
    if (sync_twice) __syncthreads();
  }
  out[blockIdx.x * 256 + threadIdx.y * 16 + threadIdx.x] = acc;
}
'''


def _run_tiled(blocks: int, sync_twice: int):
    from cudashell.simt import compile_source
    from cudashell.simt.launch import run
    from cudashell.simt.memory import Region

    (kernel,) = compile_source(TILED)
    a = np.arange(blocks * 4 * 256, dtype=np.float32) % 7
    regions = [Region("a", 0x10000000, a.nbytes, "device", read=lambda: a.view(np.uint8).copy()),
               Region("out", 0x20000000, blocks * 1024, "device", read=lambda: np.zeros(blocks * 1024, np.uint8))]
    program, fn = kernel.handle
    return run(program, fn, [0x10000000, 0x20000000, np.int32(4), np.int32(sync_twice)], (blocks, 1, 1),
               (16, 16, 1), 0, regions)


def test_blocks_that_access_shared_memory_alike_are_counted_and_checked_as_each_would_be():
    """Many blocks of a tile loop are checked and counted through one block's accesses: the counts are the
    blocks' times one block's, and a missing second barrier is still a hazard (on the second tile)."""
    one, many = _run_tiled(1, 1), _run_tiled(80, 1)  # 80 blocks of 256: three chunks, the last one short
    assert one.traffic.shared_requests * 80 == many.traffic.shared_requests
    assert one.traffic.shared_wavefronts * 80 == many.traffic.shared_wavefronts
    assert not one.warnings and not many.warnings
    racy = _run_tiled(80, 0)
    assert racy.warnings and "write-after-read" in racy.warnings[0] and "in block (0,0,0)" in racy.warnings[0]


def test_a_value_loaded_before_a_store_to_its_element_keeps_what_was_loaded(sim):
    sim.ok("kernel define swap <<< __global__ void swap(int *a, int *b) { int i = blockIdx.x * blockDim.x + "
           "threadIdx.x; int x = a[i]; a[i] = 5; b[i] = x; } >>>")
    sim.ok("alloc managed 256B as a; alloc managed 256B as b; fill a iota dtype int32")
    sim.ok("launch swap a b grid 2 block 32; sync")
    assert sim.ok("show b dtype int32 count 4")["values"] == [0, 1, 2, 3]
    assert sim.ok("show a dtype int32 count 4")["values"] == [5, 5, 5, 5]


def test_a_warps_rows_of_a_tile_count_the_sectors_the_general_count_gives():
    """Global accesses in runs of lanes (a 2-D block's rows: blockDim.x under 32) are counted from the runs' ends;
    on random rows, steps, sizes and pitches, what the lanes sorted one by one would give."""
    from cudashell.simt.memory import _rows, _sectors

    rng = np.random.default_rng(38)
    counted = 0
    for _ in range(1500):
        run, size = int(rng.choice([2, 4, 8, 16])), int(rng.choice([1, 2, 4, 8, 16]))
        step = size * int(rng.choice([1, 1, 2, 3, -1, 5, 9, 17]))
        n = 32 * int(rng.integers(1, 5))
        if rng.random() < 0.7:  # rows a pitch apart, as a tile's
            pitch = size * int(rng.integers(run * abs(step) // size + 1, 400))
            starts = np.arange(n // run) * pitch + int(rng.integers(0, 64)) * size
        else:  # rows anywhere: some share a sector, some go back
            starts = rng.integers(0, 1 << 14, size=n // run) * size
        addr = (starts[:, None] + np.arange(run)[None, :] * step).reshape(-1).astype(np.int64) + (1 << 24)
        lanes = np.arange(n, dtype=np.int64) + 32 * int(rng.integers(0, 4))
        got = _rows(addr, lanes, size)
        if got is not None:
            counted += 1
            assert got == (int(addr.min()), int(addr.max()), _sectors(addr, lanes, size))
    assert counted > 500  # the rows' path was taken, not only declined

"""A module's variables (`__constant__`, `__device__`, `__managed__`) on both backends: buffers named MODULE.NAME made
when the module is loaded, initialised from the source, fresh each load; copies to and from them are the symbol
calls, past their end the driver's CUDA_ERROR_INVALID_VALUE (measured on the H100: design/memory-model-facts.md).
On the simulator: what kernels read and write of them, the constant-memory counts and their modeled time."""

from __future__ import annotations

import struct

import pytest

from tests.conftest import Cush, first

COUNTER = ("kernel define bump <<< __device__ int counter = 5; "
           "__global__ void bump() { atomicAdd(&counter, 1); } >>>")
CONSTANT = ("kernel define cst <<< __constant__ float c[1024]; "
            "__global__ void cst(float *out) { out[threadIdx.x] = c[threadIdx.x] * 2.0f; } >>>")


def ints(cush, name: str, n: int) -> list:
    return cush.ok(f"show {name} dtype int32 count {n}")["values"]


# ------------------------------------------------------------------ both backends
def test_an_initialised_device_variable_reads_its_value_before_any_launch_and_counts_atomics(cush):
    loaded = cush.ok(COUNTER)
    assert loaded["symbols"][0]["name"] == "bump.counter" and loaded["symbols"][0]["kind"] == "global"
    cush.ok("alloc pageable 4 as h; memcpy d2h bump.counter h")
    assert first(cush, "h", "int32") == 5
    cush.ok("launch bump grid 4 block 256; memcpy d2h bump.counter h")
    assert first(cush, "h", "int32") == 1029


def test_a_constant_array_has_its_size_and_address_and_refuses_a_copy_past_its_end(cush):
    cush.ok(CONSTANT)
    row = cush.buffer("cst.c")
    assert (row["kind"], row["size"]) == ("constant", 4096) and int(row["device_ptr"], 16) > 0
    cush.ok("alloc pageable 4100 as h; fill h 1.5 dtype float32")
    assert cush.fails("memcpy h2d h cst.c")["code"] == "CUDA_ERROR_INVALID_VALUE"  # 4 bytes too many
    assert cush.fails("memcpy h2d h[0:+8] cst.c[4092:]")["code"] == "CUDA_ERROR_INVALID_VALUE"
    copied = cush.ok("memcpy h2d h[0:+4096] cst.c")
    assert copied["call"] == "cudaMemcpyToSymbol"
    cush.ok("alloc device 128 as out; alloc pageable 128 as back; launch cst out block 32; memcpy d2h out back")
    assert cush.ok("show back dtype float32 count 4")["values"] == [3.0] * 4


def test_a_part_of_a_symbol_is_copied_at_its_offset_and_on_a_stream(cush):
    cush.ok(CONSTANT)
    cush.ok("alloc pinned 16 as h; fill h 7 dtype int32; stream create")
    cush.ok("memcpy h2d h[0:+8] cst.c[16:] async stream 1; sync")
    cush.ok("alloc pageable 32 as back; memcpy d2h cst.c[8:+32] back")
    assert ints(cush, "back", 8) == [0, 0, 7, 7, 0, 0, 0, 0]


def test_loading_a_module_again_gives_fresh_variables_and_its_name_stays_taken(cush):
    cush.ok(COUNTER)
    cush.ok("launch bump grid 1 block 32")
    assert cush.fails(COUNTER)["code"] == "NAME_TAKEN"
    cush.ok(COUNTER.replace("bump", "bump2"))
    cush.ok("alloc pageable 8 as h; memcpy d2h bump.counter h[0:+4]; memcpy d2h bump2.counter h[4:+4]")
    assert ints(cush, "h", 2) == [37, 5]
    assert cush.buffer("bump.counter")["device_ptr"] != cush.buffer("bump2.counter")["device_ptr"]


def test_a_symbol_is_not_freed_but_lives_with_its_module(cush):
    cush.ok(COUNTER)
    assert cush.fails("free bump.counter")["code"] == "USAGE"
    cush.ok("alloc pageable 4 as h; free all")
    assert cush.buffer("bump.counter")["kind"] == "global"


def test_structs_statics_externs_and_managed_variables_start_with_the_sources_bytes(cush, tmp_path):
    (tmp_path / "vars.cu").write_text(
        "struct P { int a; float b; };\n"
        "__device__ P p = {3, 2.5f};\n"
        "static __device__ int s[2] = {8};\n"
        "extern __device__ int e;\n"
        "__device__ int e = -4;\n"
        "__managed__ int m = 11;\n"
        "__global__ void copy(int *out) { out[0] = p.a; out[1] = s[0] + s[1]; out[2] = e; out[3] = m; }\n")
    cush.ok(f"kernel load {tmp_path / 'vars.cu'} as v")
    kinds = {b["name"]: b["kind"] for b in cush.ok("ls")["buffers"]}
    assert kinds == {"v.p": "global", "v.s": "global", "v.e": "global", "v.m": "managed"}
    cush.ok("alloc pageable 8 as h; memcpy d2h v.p h")
    assert struct.unpack("<if", bytes(cush.ok("show h count 8")["values"])) == (3, 2.5)
    assert first(cush, "v.m", "int32") == 11
    cush.ok("alloc device 16 as out; alloc pageable 16 as back; launch v.copy out block 1; memcpy d2h out back")
    assert ints(cush, "back", 4) == [3, 8, -4, 11]


def test_a_symbol_is_a_kernel_argument_at_its_address(cush):
    cush.ok(COUNTER)
    cush.ok("kernel define add <<< __global__ void add(int *p) { atomicAdd(p, 10); } >>>")
    cush.ok("launch add bump.counter block 4; alloc pageable 4 as h; memcpy d2h bump.counter h")
    assert first(cush, "h", "int32") == 45


# ------------------------------------------------------------------ the simulator's front end and interpreter
def test_a_kernel_that_writes_constant_memory_is_refused_where_it_does(sim):
    for body in ("k[1] = 3;", "k[0]++;", "atomicAdd(&k[1], 1);"):
        err = sim.fails(f"kernel define w <<< __constant__ int k[2]; __global__ void w(int *o) {{ {body} }} >>>")
        assert err["code"] == "USAGE" and "__constant__ variable 'k' is written" in err["message"]
        assert "(kernel define):1:" in err["message"]
    assert "w" not in [k["name"] for k in sim.ok("kernels")["kernels"]]


def test_a_write_through_a_pointer_into_constant_memory_faults_and_names_it(sim):
    sim.ok(CONSTANT)
    sim.ok("kernel define poke <<< __global__ void poke(float *p) { p[1] = 1.0f; } >>>")
    sim.ok("launch poke cst.c block 1")
    err = sim.fails("sync")
    assert err["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS" and "in cst.c, __constant__ memory" in err["message"]


def test_an_extern_variable_without_its_definition_is_refused_as_nvcc_refuses_it(sim):
    err = sim.fails("kernel define x <<< extern __device__ int q; __global__ void x(int *o) { o[0] = q; } >>>")
    assert err["code"] == "USAGE" and "extern q" in err["message"]


def test_reset_loads_the_module_again_with_its_initial_bytes(sim):
    sim.ok(COUNTER)
    sim.ok("launch bump block 8; sync; reset; alloc pageable 4 as h; memcpy d2h bump.counter h")
    assert first(sim, "h", "int32") == 5


STENCIL = ("kernel define rd <<< __constant__ float c[1024]; "
           "__global__ void rd(float *out, int spread) { float acc = 0.0f; "
           "for (int k = 0; k < 256; k++) acc += c[(k + threadIdx.x * spread) % 1024]; "
           "out[blockIdx.x * blockDim.x + threadIdx.x] = acc; } >>>")


def test_constant_reads_count_distinct_addresses_and_cost_what_the_h100_measured(sim):
    """Every lane at one address (a broadcast) against 32 distinct addresses a warp: each further address is a
    pass of the constant cache, at the rate the H100 gave a stencil; a broadcast costs only its instruction."""
    sim.ok(STENCIL)
    sim.ok("alloc device 8KB as out")
    broadcast = sim.ok("launch rd out 0 grid 8 block 256")
    distinct = sim.ok("launch rd out 1 grid 8 block 256")
    warps = 8 * 256 // 32
    assert broadcast["counts"]["constant"] == {"requests": warps * 256, "addresses": warps * 256,
                                               "addresses_per_request": 1.0}
    assert distinct["counts"]["constant"]["addresses"] == 32 * warps * 256
    p = sim.backend.profile
    passes = 31 * warps * 256
    assert distinct["seconds"] - broadcast["seconds"] == pytest.approx(passes / p.kernel_constant_replays, rel=0.05)
    assert broadcast["seconds"] - p.launch_latency < 0.1 * passes / p.kernel_constant_replays
    assert "constant" not in broadcast["counts"]["global"]  # not 32-byte sectors of device memory


def test_the_launch_says_whether_constant_reads_were_broadcasts():
    from tests.conftest import text_run

    out = text_run([STENCIL, "alloc device 8KB as out", "launch rd out 0 grid 1 block 32",
                    "launch rd out 1 grid 1 block 32"], width=200)
    assert "constant memory: 256 requests, 256 distinct addresses (every request a broadcast)" in out
    assert "constant memory: 256 requests, 8192 distinct addresses (32.0 a request" in out


# ------------------------------------------------------------------ what the shell shows and writes
def test_ls_shows_a_symbols_kind_size_and_address():
    from tests.conftest import text_run

    out = text_run([CONSTANT, "ls"])
    row = next(line for line in out.splitlines() if line.startswith("cst.c "))
    assert row.split()[:4] == ["cst.c", "constant", "4", "KiB"]


def test_export_c_writes_the_symbol_calls(tmp_path):
    from tests.conftest import text_run

    target = tmp_path / "s.cu"
    text_run([COUNTER, CONSTANT, "alloc pageable 16 as h", "memcpy h2d h cst.c[32:]", "stream create",
              "memcpy h2d h[0:+8] cst.c async stream 1", "memcpy d2h bump.counter h[0:+4]",
              "launch bump block 4", f"export c {target}"])
    c = target.read_text()
    assert "CHECK(cudaGetSymbolAddress((void **)&b_cst_c, user2::c));" in c
    assert "CHECK(cudaMemcpyToSymbol(user2::c, b_h, 16, 32, cudaMemcpyHostToDevice));" in c
    assert "CHECK(cudaMemcpyToSymbolAsync(user2::c, b_h, 8, 0, cudaMemcpyHostToDevice, s_1));" in c
    assert "CHECK(cudaMemcpyFromSymbol(b_h, user1::counter, 4, 0, cudaMemcpyDeviceToHost));" in c


def test_explain_names_the_symbol_as_the_source_does():
    from tests.conftest import text_run

    out = text_run([CONSTANT, "alloc pageable 8 as h", "explain on", "memcpy h2d h cst.c[8:]"], width=200)
    assert "cudaMemcpyToSymbol(c, b_h, 8, 8, cudaMemcpyHostToDevice)" in out


@pytest.mark.gpu
def test_the_gpu_lists_a_files_variables_under_its_module_name(tmp_path):
    from tests.conftest import make_backend

    (tmp_path / "conv.cu").write_text("__constant__ float mask[9];\n__device__ unsigned hits;\n"
                                      "__global__ void conv(float *o) { o[threadIdx.x] = mask[threadIdx.x % 9]; "
                                      "atomicAdd(&hits, 1u); }\n")
    cush = Cush(make_backend("cuda"))
    try:
        symbols = cush.ok(f"kernel load {tmp_path / 'conv.cu'}")["symbols"]
        assert [(s["name"], s["kind"], s["size"]) for s in symbols] == [("conv.mask", "constant", 36),
                                                                        ("conv.hits", "global", 4)]
    finally:
        cush.shell.close()


def test_ldg_and_const_restrict_loads_are_counted_as_the_read_only_path(sim):
    sim.ok("kernel define r <<< __global__ void r(const float * __restrict__ a, float *b, const float *c) "
           "{ int i = threadIdx.x; b[i] = a[i] + __ldg(&c[i]) + c[i]; } >>>")
    sim.ok("alloc device 256 as a; alloc device 256 as b")
    counts = sim.ok("launch r a b a block 64")["counts"]
    assert (counts["loads"], counts["readonly_loads"]) == (6, 4)  # a[i] and __ldg: 2 warps each; c[i] is not


def test_the_worker_numbers_a_modules_variables_as_it_numbers_allocations():
    from cudashell.backends.worker import Worker

    worker = Worker(None, None, "sim", 0)
    kernels, symbols = worker.handle("load_kernels", ("__device__ int n = 2; __global__ void k() { n++; }",))
    assert [k.name for k in kernels] == ["k"] and len(symbols) == 1
    assert isinstance(symbols[0].handle, int) and worker.allocs[symbols[0].handle].space == "global"


def test_a_write_to_constant_memory_is_refused_though_the_definition_comes_after_the_function(sim):
    err = sim.fails("kernel define f <<< extern __constant__ int k[2]; __device__ void set() { k[0] = 1; } "
                    "__constant__ int k[2] = {1}; __global__ void f() { set(); } >>>")
    assert err["code"] == "USAGE" and "__constant__ variable 'k' is written" in err["message"]


def test_reset_keeps_two_loads_of_one_source_apart(sim, tmp_path):
    (tmp_path / "c.cu").write_text("__device__ int n = 1;\n__global__ void inc() { n += 1; }\n")
    sim.ok(f"kernel load {tmp_path / 'c.cu'} as a; kernel load {tmp_path / 'c.cu'} as b")
    sim.ok("reset; launch a.inc block 1; launch a.inc block 1; launch b.inc block 1")
    sim.ok("alloc pageable 8 as h; memcpy d2h a.n h[0:+4]; memcpy d2h b.n h[4:+4]")
    assert ints(sim, "h", 2) == [3, 2]


def test_a_kernel_overrunning_a_device_array_is_told_the_variables_name(sim):
    sim.ok("kernel define k <<< __device__ int t[4]; __global__ void k() { t[threadIdx.x] = 1; } >>>")
    sim.ok("launch k block 5")
    err = sim.fails("sync")
    assert err["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS" and "0 bytes after the nearest allocation t (" in err["message"]


def test_destroying_a_context_unloads_its_modules_variables(cush):
    cush.ok("context create as c1")
    cush.ok(COUNTER)
    assert cush.buffer("bump.counter")["context"] == "c1"
    cush.ok("context use gpu0; context destroy c1")
    err = cush.fails("alloc pageable 4 as h; memcpy d2h bump.counter h")
    assert err["code"] == "NO_SUCH_BUFFER" and "c1" in err["message"]


# ------------------------------------------------------------------ the GPU side's reading of a module's variables
VARIABLES = '''
__constant__ float c[1024];  // __device__ int commented;
static __device__ double s[3] = {1, 2};
__device__ float f(float x) { return x; }
extern "C" { __device__ unsigned counter = 5; }
namespace q { __device__ int z; }
struct P { int a; };
__managed__ P pp;
__global__ void k(float *o) { o[0] = c[1]; }
'''


def test_the_gpu_side_reads_a_modules_variables_with_the_front_end():
    from cudashell.simt.variables import module_variables

    found = {v.name: (v.space, v.dtype, v.size, v.module_names, v.namespaced) for v in module_variables(VARIABLES)}
    assert found == {"c": ("constant", "float32", 4096, ("c",), False),
                     "s": ("global", "float64", 24, ("s", "_ZL1s"), False),
                     "counter": ("global", "uint32", 4, ("counter",), False),
                     "z": ("global", "int32", 4, ("z",), True),
                     "pp": ("managed", "uint8", 4, ("pp",), False)}


def test_a_source_the_front_end_cannot_read_has_its_variables_found_by_their_shape():
    from cudashell.simt.variables import module_variables

    found = module_variables('#include "not-here.h"\n' + VARIABLES)
    assert [(v.name, v.space) for v in found] == [("c", "constant"), ("s", "global"), ("counter", "global"),
                                                  ("pp", "managed")]  # not `z`: in a namespace, not at a line's start


def test_more_constant_memory_than_the_bank_holds_is_refused_as_ptxas_refuses_it(sim):
    sim.ok("kernel define fits <<< __constant__ float a[8192]; __constant__ float b[8192]; "
           "__global__ void fits(float *o) { o[0] = a[0] + b[0]; } >>>")
    err = sim.fails("kernel define over <<< __constant__ float a[8192]; __constant__ float b[8193]; "
                    "__global__ void over(float *o) { o[0] = a[0] + b[0]; } >>>")
    assert err["code"] == "USAGE" and "65540 bytes" in err["message"]


def test_initialisers_of_every_shape_give_the_bytes_nvcc_would():
    from cudashell.simt.frontend import parse

    source = ('struct Q { int a[2]; float b; };\n'
              '__device__ Q q = {{1, 2}, 3};\n__device__ int grid2[2][2] = {{1, 2}, {3}};\n'
              '__constant__ char s[] = "hi";\n__device__ unsigned long long u = -1;\n__device__ float *p = nullptr;\n'
              '__device__ int braced{7};\n__device__ double third = 1.0 / 3;\n'
              '__global__ void k(int *o) { o[0] = 0; }\n')
    symbols = parse(source).symbols
    assert symbols["q"].initial == struct.pack("<iif", 1, 2, 3.0) and symbols["q"].dtype == "uint8"
    assert symbols["grid2"].initial == struct.pack("<4i", 1, 2, 3, 0) and symbols["grid2"].dtype == "int32"
    assert symbols["s"].initial == b"hi\0" and symbols["u"].initial == b"\xff" * 8
    assert symbols["p"].initial == bytes(8) and symbols["braced"].initial == struct.pack("<i", 7)
    assert symbols["third"].initial == struct.pack("<d", 1.0 / 3)


def test_an_initialiser_the_simulator_cannot_know_is_refused_by_name(sim):
    err = sim.fails("kernel define k <<< __device__ int x; __device__ int *px = &x; "
                    "__global__ void k(int *o) { o[0] = *px; } >>>")
    assert err["code"] == "NOT_SUPPORTED_ON_SIM" and "(kernel define):1:" in err["message"]


def test_a_constant_read_by_its_name_goes_by_the_constant_cache_and_through_a_pointer_by_the_generic_path(sim):
    sim.ok("kernel define sc <<< __constant__ float factor = 2.0f; __constant__ float tab[32]; "
           "struct S { float a, b; }; __constant__ S s = {1.0f, 3.0f}; "
           "__global__ void sc(float *a, const float *p) { int i = threadIdx.x; "
           "a[i] = a[i] * factor + tab[i] + s.b + p[i]; } >>>")
    sim.ok("alloc device 128 as a")
    counts = sim.ok("launch sc a sc.tab block 32")["counts"]
    assert counts["constant"] == {"requests": 3, "addresses": 34, "addresses_per_request": 11.33}  # rounded to 4 digits
    assert counts["global"]["device"]["requests"] == 3  # a[i] read and written, and p[i]: tab through a pointer
    sim.ok("alloc pageable 128 as h; memcpy d2h a h")
    assert sim.ok("show h dtype float32 count 2")["values"] == [3.0, 3.0]

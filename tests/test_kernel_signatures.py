"""What a kernel takes, read once by the front end's typed declarations (simt/signatures.py) for both backends:
the signatures the old regex misread or refused, the ones the shell cannot pass (one USAGE line naming the
parameter, its type and file:line:col), and — on a GPU — the same parameter lists there as on the simulator."""

from __future__ import annotations

import pytest

from cudashell.errors import ShellError
from cudashell.simt.signatures import read_kernels

# name → (source, its kernels' parameters as (name, kind, dtype)); every source here runs on the simulator
SOURCES = {
    "void": ("__global__ void hello(void) { }", {"hello": []}),
    "typedef": ("typedef unsigned int uint;\ntypedef float real;\n"
                "__global__ void td(real *a, uint n) { uint i = threadIdx.x; if (i < n) a[i] = i; }",
                {"td": [("a", "inout", "float32"), ("n", "scalar", "uint32")]}),
    "commented": ("// __global__ void cm(int *old, double x)\n/* __global__ void cm(char c) { } */\n"
                  "__global__ void cm(float *a, int n) { if (threadIdx.x < n) a[threadIdx.x] = 1; }",
                  {"cm": [("a", "inout", "float32"), ("n", "scalar", "int32")]}),
    "array": ("__global__ void arr(const float in[], float out[], int n) "
              "{ int i = threadIdx.x; if (i < n) out[i] = 2 * in[i]; }",
              {"arr": [("in", "in", "float32"), ("out", "inout", "float32"), ("n", "scalar", "int32")]}),
    "macro": ("#define REAL double\n#define ARGS(T) T *x, int n\n"
              "__global__ void mac(ARGS(REAL)) { if (threadIdx.x < n) x[threadIdx.x] += 1; }",
              {"mac": [("x", "inout", "float64"), ("n", "scalar", "int32")]}),
    "extern_c": ('extern "C" {\n__global__ void ec1(int *a) { a[0] = 1; }\n}\n'
                 'extern "C" __global__ void ec2(const int *a, int *b) { b[0] = a[0]; }',
                 {"ec1": [("a", "inout", "int32")], "ec2": [("a", "in", "int32"), ("b", "inout", "int32")]}),
    "restrict": ("__global__ void rs(const float* __restrict__ a, float * __restrict__ b) { b[0] = a[0]; }",
                 {"rs": [("a", "in", "float32"), ("b", "inout", "float32")]}),
    "scalars": ("enum Mode { ADD, SUB };\nenum class Wide : long long { X };\n"
                "__global__ void sc(size_t n, bool flag, Mode m, Wide w, unsigned char c, short s, double d, "
                "int k = 4) { }",
                {"sc": [("n", "scalar", "uint64"), ("flag", "scalar", "uint8"), ("m", "scalar", "uint32"),
                        ("w", "scalar", "int64"), ("c", "scalar", "uint8"), ("s", "scalar", "int16"),
                        ("d", "scalar", "float64"), ("k", "scalar", "int32")]}),
    "pointers": ("struct P { float x, y; };\n"
                 "__global__ void pt(float **rows, void *v, const void *cv, const P *p, P *q) { }",
                 {"pt": [("rows", "inout", "uint64"), ("v", "inout", "uint8"), ("cv", "in", "uint8"),
                         ("p", "in", "uint8"), ("q", "inout", "uint8")]}),
    "template": ("template <typename T> __global__ void tk(T *a) { a[threadIdx.x] = 1; }\n"
                 "template __global__ void tk<float>(float *);\n"
                 "__global__ void plain(int *a) { a[0] = 2; }",
                 {"plain": [("a", "inout", "int32")]}),
    "prototype": ("__global__ void pr(int *);\n__global__ void pr(int *dst) { dst[0] = 3; }",
                  {"pr": [("dst", "inout", "int32")]}),
}

# sources nvcc compiles but the simulator's interpreter refuses today: their signatures are still read
GPU_ONLY = {
    "launch_bounds": ("__global__ void __launch_bounds__(256, 2) lb(float *a, unsigned n) "
                      "{ if (threadIdx.x < n) a[threadIdx.x] = 0; }",
                      {"lb": [("a", "inout", "float32"), ("n", "scalar", "uint32")]}),
    "curand": ("#include <curand_kernel.h>\n__global__ void rng(curandState *s, float *out) "
               "{ curand_init(7, threadIdx.x, 0, &s[threadIdx.x]); out[threadIdx.x] = curand_uniform(&s[threadIdx.x]); }",
               {"rng": [("s", "inout", "uint8"), ("out", "inout", "float32")]}),
}


def params(kernel) -> list:
    return [(p.name, p.kind, p.dtype) for p in kernel.params]


def read(source: str) -> dict:
    return {k.name: params(k) for k in read_kernels(source)}


@pytest.mark.parametrize("case", sorted(SOURCES))
def test_the_reader_reads_each_signature(case):
    source, expected = SOURCES[case]
    assert read(source) == expected


@pytest.mark.parametrize("case", sorted(SOURCES))
def test_the_simulator_registers_what_the_reader_reads(sim, tmp_path, case):
    source, expected = SOURCES[case]
    (tmp_path / "k.cu").write_text(source)
    loaded = sim.ok(f"kernel load {tmp_path / 'k.cu'} as m")["loaded"]
    assert len(loaded) == len(expected)
    assert {n[2:]: params(sim.shell.session.kernels[n]) for n in (f"m.{k}" for k in expected)} == expected
    listed = {k["name"]: k["signature"] for k in sim.ok("kernels")["kernels"] if not k["builtin"]}
    assert set(listed) == {f"m.{k}" for k in expected}


def test_launch_bounds_and_nvcc_only_bodies_are_read_though_the_simulator_runs_neither():
    assert read(GPU_ONLY["launch_bounds"][0]) == GPU_ONLY["launch_bounds"][1]
    assert read("__global__ void tx(float *out) { asm volatile(\"membar.gl;\"); out[0] = fancy(1); }") == \
        {"tx": [("out", "inout", "float32")]}  # clang's errors in a body are the compiler's to report
    assert read("__global__ void gc(const __grid_constant__ int n, float *a) { }") == \
        {"gc": [("n", "scalar", "int32"), ("a", "inout", "float32")]}


def test_a_pointer_to_a_type_from_a_header_only_nvcc_reads_is_a_buffer_of_bytes():
    assert read(GPU_ONLY["curand"][0]) == GPU_ONLY["curand"][1]


def test_a_reference_parameter_is_a_buffer():
    assert read("__global__ void rf(int &total, const float &scale) { total = 1; }") == \
        {"rf": [("total", "inout", "int32"), ("scale", "in", "float32")]}


def test_an_unnamed_parameter_is_named_by_its_place():
    assert read("__global__ void un(int *, int n) { }") == {"un": [("arg0", "inout", "int32"), ("n", "scalar", "int32")]}


def test_the_reader_does_not_convert_bodies_the_interpreter_would_refuse(sim):
    source = "__global__ void g(int *a) { goto end; end: a[0] = 1; }"
    assert read(source) == {"g": [("a", "inout", "int32")]}
    assert sim.fails(f"kernel define g <<< {source} >>>")["code"] == "NOT_SUPPORTED_ON_SIM"


def test_an_array_parameter_runs_as_the_pointer_c_passes(sim):
    sim.ok("kernel define arr <<< " + SOURCES["array"][0] + " >>>")
    sim.ok("alloc managed 16B as a; alloc managed 16B as b; fill a 1.5 dtype float32")
    sim.ok("launch arr a b 4 grid 1 block 4; sync")
    assert sim.ok("show b dtype float32 count 4")["values"] == [3.0, 3.0, 3.0, 3.0]


def test_a_typedef_scalar_and_a_void_kernel_launch(sim):
    sim.ok("kernel define td <<< " + SOURCES["typedef"][0] + " >>>")
    sim.ok("kernel define hello <<< " + SOURCES["void"][0] + " >>>")
    sim.ok("alloc managed 16B as a; fill a 9 dtype float32")
    sim.ok("launch td a 3 grid 1 block 4; launch hello grid 1 block 1; sync")
    assert sim.ok("show a dtype float32 count 4")["values"] == [0.0, 1.0, 2.0, 9.0]
    assert sim.fails("launch td a 1.5 grid 1 block 4")["code"] == "USAGE"  # a uint32, as its typedef says


STRUCT = "struct Pair { int a; float b; };\n__global__ void st(int *out, Pair p) { out[0] = p.a; }"


def test_a_struct_by_value_is_one_usage_line_naming_it_at_load(sim, tmp_path):
    (tmp_path / "st.cu").write_text(STRUCT)
    err = sim.fails(f"kernel load {tmp_path / 'st.cu'}")
    assert err["code"] == "USAGE"
    assert err["message"].startswith("st.cu:2:35: kernel st: parameter 'p' (Pair) is a struct passed by value")
    assert [k["name"] for k in sim.ok("kernels")["kernels"] if not k["builtin"]] == []


def test_a_signature_clang_cannot_read_is_usage_with_its_place():
    with pytest.raises(ShellError) as e:
        read_kernels("__global__ void bad(Missing m, float *a) { }", "/tmp/x/bad.cu")
    assert (e.value.code, e.value.message) == ("USAGE", "bad.cu:1:21: kernel bad: its signature cannot be read: "
                                               "unknown type name 'Missing'")
    with pytest.raises(ShellError) as e:
        read_kernels("__global__ void cut(float *a", "/tmp/x/cut.cu")
    assert e.value.code == "USAGE" and e.value.message.startswith("cut.cu:1:")


def test_an_overloaded_kernel_is_usage_at_its_second_definition():
    with pytest.raises(ShellError) as e:
        read_kernels("__global__ void ov(int *a) { }\n__global__ void ov(float *a) { }", "/tmp/x/ov.cu")
    assert e.value.code == "USAGE" and e.value.message.startswith("ov.cu:2:17: kernel ov is defined twice")


def test_a_source_of_only_template_kernels_says_how_to_launch_one():
    with pytest.raises(ShellError) as e:
        read_kernels("template <int N> __global__ void t(float *a) { a[0] = N; }\n"
                     "template __global__ void t<4>(float *);")
    assert e.value.message == "no __global__ function found" and "__device__ template" in e.value.hint


def test_a_load_reads_a_source_once(sim, monkeypatch):
    from cudashell.simt import signatures

    calls = []
    real = signatures._kernels
    monkeypatch.setattr(signatures, "_kernels", lambda *a: calls.append(a) or real(*a))
    sim.ok("kernel define once <<< __global__ void once(int *a, long n) { } >>>")
    assert len(calls) == 1


@pytest.mark.gpu
def test_the_gpu_registers_the_same_parameters_as_the_simulator(tmp_path):
    """Every definition above on the cuda backend (nvcc compiles it): the parameters the GPU registers are the
    ones the simulator registers (the GPU-only sources: the ones the reader reads), and a struct by value is
    the same USAGE line."""
    from .conftest import Cush, make_backend

    gpu = Cush(make_backend("cuda"))
    try:
        for n, (case, (source, expected)) in enumerate(sorted({**SOURCES, **GPU_ONLY}.items())):
            (tmp_path / f"{case}.cu").write_text(source)
            gpu.ok(f"kernel load {tmp_path / case}.cu as m{n}")
            on_gpu = {k: params(gpu.shell.session.kernels[f"m{n}.{k}"]) for k in expected}
            assert on_gpu == expected == read(source), case
        (tmp_path / "st.cu").write_text(STRUCT)
        err = gpu.fails(f"kernel load {tmp_path / 'st.cu'}")
        assert err["code"] == "USAGE" and err["message"].startswith("st.cu:2:35: kernel st: parameter 'p' (Pair)")
        gpu.ok("kernel define arr <<< " + SOURCES["array"][0] + " >>>")
        gpu.ok("alloc managed 16B as a; alloc managed 16B as b; fill a 1.5 dtype float32")
        gpu.ok("launch arr a b 4 grid 1 block 4; sync")
        assert gpu.ok("show b dtype float32 count 4")["values"] == [3.0, 3.0, 3.0, 3.0]  # a pointer, not a float
    finally:
        gpu.shell.close()


LINKAGE = {**{k: v[0] for k, v in {**SOURCES, **GPU_ONLY}.items()},
           "bounds_first": "__launch_bounds__(128) __global__ void b1(int *a) { }\n"
                           "__global__ __launch_bounds__(128, 4) void b2(int *a) { }"}


@pytest.mark.parametrize("case", sorted(LINKAGE))
def test_every_kernel_the_reader_lists_gets_the_c_name_the_gpu_looks_up(case):
    """The GPU worker gets each listed kernel from nvcc's module by its own name (cuModuleGetFunction): c_linkage
    must give each one C linkage — clang's mangled name for it is then its name."""
    from cudashell.model.kernels import c_linkage
    from cudashell.simt import signatures
    from cudashell.simt.frontend import _tu, preprocess
    from cudashell.simt.prelude import DECL_LINES

    source = c_linkage(LINKAGE[case])
    text, _ = preprocess(source, "k.cu", [], missing_headers_ok=True)
    tu = _tu(signatures._blank_nvcc_only(text))
    names = {c.spelling: c.mangled_name for c in signatures._top(tu.cursor, DECL_LINES)
             if c.kind.name == "FUNCTION_DECL" and c.is_definition()}
    listed = [k.name for k in read_kernels(LINKAGE[case])]
    assert listed and all(names[n] == n for n in listed), (source, names)

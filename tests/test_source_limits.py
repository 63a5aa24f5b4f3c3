"""What a script or a CUDA source may cost the shell (issue 36, items 6 and 7): a file read whole is a regular file of
bounded size, clang never sees an expression nested deep enough to crash it, macros cannot expand without end, and
a kernel's local arrays are counted before the simulator allocates them. Each refusal is one line with its code."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.model.inputs import SCRIPT_LIMIT, SOURCE_LIMIT
from cudashell.simt.bounds import MAX_NESTING
from tests.conftest import Cush

CLI = [sys.executable, "-m", "cudashell", "--backend", "sim"]


def deep_kernel(terms: int) -> str:
    return "__global__ void deep(int *a) { a[0] = " + "+".join(["1"] * terms) + "; }\n"


def cli(line: str, cwd, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "-c", line], cwd=cwd, capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------ item 7: what libclang and Python could not take
def test_an_expression_deep_enough_to_crash_clang_is_one_line_and_the_shell_lives(tmp_path):
    (tmp_path / "deep.cu").write_text(deep_kernel(20_000))  # clang's parser overflowed its stack here: rc 139
    r = subprocess.run([*CLI, "--keep-going", "-c", "kernel load deep.cu; echo still here"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r
    said = [line for line in r.stderr.splitlines() if "deep.cu" in line]
    assert len(said) == 1 and "SOURCE_TOO_COMPLEX: deep.cu:1:" in said[0], r.stderr
    assert "expression nesting too deep" in said[0] and "Traceback" not in r.stderr
    assert "still here" in r.stdout


def test_an_expression_too_deep_for_python_is_refused_by_name_on_both_backends(tmp_path, cush):
    (tmp_path / "deep.cu").write_text(deep_kernel(2_000))  # was INTERNAL_ERROR RecursionError
    e = cush.fails(f"kernel load {tmp_path / 'deep.cu'}")
    assert e["code"] == "SOURCE_TOO_COMPLEX" and f"more than {MAX_NESTING} levels" in e["message"]
    assert e["message"].startswith("deep.cu:1:")


@pytest.mark.parametrize("run", ["!" * 3000, "~" * 3000, "-" * 3000, "*" * 3000])
def test_a_run_of_unary_operators_without_spaces_counts_each_one(tmp_path, run):
    """`!!!…x` is one token to a pattern of operator characters, but as many levels to clang: 3,000 of them
    segfaulted the shell (rc 139) past the check, and 3,000 `-` were a RecursionError."""
    body = f"a[0] = {run}a[1];" if run[0] != "*" else f"int **p = 0; a[0] = {run}p;"
    (tmp_path / "run.cu").write_text(f"__global__ void k(int *a) {{ {body} }}\n")
    r = cli("kernel load run.cu", tmp_path)
    assert r.returncode == 1 and "SOURCE_TOO_COMPLEX: run.cu:1:" in r.stderr and "Traceback" not in r.stderr, r


def test_an_expression_just_within_the_limit_loads_and_computes(tmp_path, sim):
    (tmp_path / "sum.cu").write_text(deep_kernel(MAX_NESTING - 6))  # the interpreter follows it too
    sim.ok(f"kernel load {tmp_path / 'sum.cu'}")
    sim.ok("alloc device 4B as d; alloc pinned 4B as h; launch deep d grid 1 block 1; memcpy d h")
    assert sim.ok("show h dtype int32")["values"] == [MAX_NESTING - 6]


def test_else_if_chains_and_nested_brackets_count_as_levels(tmp_path, sim):
    chain = " else ".join(f"if (a[0] == {i}) a[1] = {i};" for i in range(MAX_NESTING + 10))
    brackets = "(" * (MAX_NESTING + 1) + "1" + ")" * (MAX_NESTING + 1)
    for body in (chain, f"a[0] = {brackets};"):
        e = sim.fails(f"kernel define k <<< __global__ void k(int *a) {{ {body} }} >>>")
        assert e["code"] == "SOURCE_TOO_COMPLEX"


def test_a_macro_bomb_stops_quickly_with_a_named_error(tmp_path, sim):
    lines = ["#define A0 x+x+x+x+x+x+x+x"] + [f"#define A{i} A{i-1} A{i-1} A{i-1} A{i-1}" for i in range(1, 12)]
    (tmp_path / "bomb.cu").write_text("\n".join(lines) + "\n__global__ void k(int *x) { int y = A11; }\n")
    assert (tmp_path / "bomb.cu").stat().st_size < 520  # 4^11 × 16 tokens: it took minutes and gigabytes
    started = time.monotonic()
    e = sim.fails(f"kernel load {tmp_path / 'bomb.cu'}")
    assert e["code"] == "SOURCE_TOO_COMPLEX" and e["message"].startswith("bomb.cu:13:")
    assert "macros expand to more than" in e["message"]
    assert time.monotonic() - started < 10


# ------------------------------------------------------------------ inputs read whole: regular files, bounded
@pytest.mark.parametrize("line", ["run /dev/zero", "kernel load /dev/zero", "run pipe.cush", "kernel load pipe.cush",
                                  'kernel define k <<< #include "/dev/zero"\n__global__ void k(int *a) {} >>>'])
def test_a_device_or_a_fifo_is_refused_at_once(tmp_path, line):
    """Each read without end before (a FIFO's open waited for a writer): a process of its own, so that a regression
    is a timeout, not a hung suite."""
    os.mkfifo(tmp_path / "pipe.cush")
    r = cli(line, tmp_path, timeout=30)
    assert r.returncode == 1 and "NOT_A_FILE: " in r.stderr and "is not a regular file" in r.stderr, r.stderr


def test_a_script_or_source_over_its_cap_is_refused_before_it_is_read(tmp_path, sim):
    (tmp_path / "long.cush").write_bytes(b"ls\n" * (SCRIPT_LIMIT // 3 + 1))
    e = sim.fails(f"run {tmp_path / 'long.cush'}")
    assert e["code"] == "INPUT_TOO_LARGE" and "larger than a script may be: 1 MiB" in e["message"]
    with open(tmp_path / "huge.cu", "wb") as f:
        f.truncate(SOURCE_LIMIT + 1)  # sparse: nothing is written
    e = sim.fails(f"kernel load {tmp_path / 'huge.cu'}")
    assert e["code"] == "INPUT_TOO_LARGE" and "larger than a source may be: 4 MiB" in e["message"]


def test_includes_count_towards_the_source_cap(tmp_path, sim):
    (tmp_path / "half.cuh").write_bytes(b"//" + b"x" * (SOURCE_LIMIT // 2) + b"\n")
    (tmp_path / "both.cu").write_text('#include "half.cuh"\n#include "half.cuh"\n__global__ void k(int *a) {}\n')
    e = sim.fails(f"kernel load {tmp_path / 'both.cu'}")
    assert e["code"] == "INPUT_TOO_LARGE" and "the files it includes" in e["message"]


# ------------------------------------------------------------------ item 6: a kernel's local arrays
def test_local_arrays_past_cudas_512_kib_a_thread_are_refused_at_load(sim):
    e = sim.fails("kernel define big <<< __global__ void big(int *a) { int big[1 << 20]; big[threadIdx.x] = 1; "
                  "a[threadIdx.x] = big[threadIdx.x]; } >>>")  # took 2.17 GB of RAM for 512 threads
    assert e["code"] == "USAGE" and "needs 4 MiB of local memory a thread" in e["message"]
    assert "CUDA allows 512 KiB" in e["message"]


LOCAL_KERNEL = ("kernel define mid <<< __global__ void mid(int *a) { int big[1 << 16]; "
                "for (int i = 0; i < 4; i++) big[threadIdx.x + i] = i; "
                "a[blockIdx.x * blockDim.x + threadIdx.x] = big[threadIdx.x + 3]; } >>>")


def small_budget(tmp_path, mib: int) -> Profile:
    (tmp_path / "small.json").write_text(f'{{"storage_budget": {mib << 20}}}')
    return Profile.load(str(tmp_path / "small.json"))


def test_a_block_whose_local_arrays_the_budget_cannot_hold_is_refused_before_it_runs(tmp_path):
    c = Cush(SimBackend(small_budget(tmp_path, 256)))
    try:
        c.ok(LOCAL_KERNEL)
        c.ok("alloc device 4KB as a")
        e = c.fails("launch mid a grid 1 block 1024")  # 256 KiB × 1024 threads
        assert e["code"] == "SIM_BUDGET" and "256 KiB of local memory a thread" in e["message"]
        c.ok("launch mid a grid 1 block 128; sync")  # a smaller block fits: nothing was queued, the session lives
    finally:
        c.shell.close()


def test_local_arrays_run_in_as_many_blocks_as_the_budget_holds(tmp_path):
    """16 blocks × 128 threads × 256 KiB is 512 MiB of local memory: with a 64 MiB budget the simulator runs them a
    block at a time, and the bytes are the same."""
    script = tmp_path / "local.cush"
    script.write_text(f"{LOCAL_KERNEL}\nalloc device 8KB as a\nlaunch mid a grid 16 block 128\nalloc pinned 8KB as h\n"
                      "memcpy a h\nalloc pinned 8KB as want\nfill want 3 dtype int32\nexpect equal h want\n")
    small_budget(tmp_path, 64)
    # the peak as /proc says it of this process's own memory (getrusage's counts the forking test process's too)
    probe = ("import re, sys, runpy; sys.argv = ['cudashell', '--backend', 'sim', '--sim-profile', "
             f"{str(tmp_path / 'small.json')!r}, {str(script)!r}]\n"
             "try:\n    runpy.run_module('cudashell', run_name='__main__')\n"
             "except SystemExit as e:\n    code = e.code\n"
             "peak = re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1)\n"
             "print('rss', peak, 'rc', code)")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    words = r.stdout.split()
    assert words[-2:] == ["rc", "0"], (r.stdout, r.stderr)
    assert int(words[words.index("rss") + 1]) < 400_000, r.stdout  # KiB: it held 512 MiB at once before


@pytest.mark.parametrize("blocks", [1, 3])
def test_chunking_by_the_budget_changes_no_count(tmp_path, blocks):
    results = []
    for budget in (4096, 64):
        c = Cush(SimBackend(small_budget(tmp_path, budget)))
        try:
            c.ok(LOCAL_KERNEL)
            c.ok("alloc device 8KB as a")
            results.append(c.ok(f"launch mid a grid {blocks} block 128")["counts"])
        finally:
            c.shell.close()
    assert results[0] == results[1]

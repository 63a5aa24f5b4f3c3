"""Grading's confinement holds where files are opened: a kernel's source cannot read a file outside the submission
by any preprocessor route (the simulator's pcpp and clang, nvcc on the GPU), nor learn whether one exists, and the
file's text never reaches the grade; `compare ref` and `lesson` files are confined as the commands resolve them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cudashell.backends.sim import SimBackend
from cudashell.frontends.environment import ExitStatus
from tests.conftest import confined_shell, make_backend
from tests.test_grade import grade

SECRET = "SECRET_TOKEN_42"
KERNEL = "__global__ void k(int *a) { a[0] = 1; }\n"
BYPASSES = {  # each read the secret, or told whether it exists, before the fix
    "macro.cu": '#define P "{secret}"\n#include P\n',
    "comment.cu": '#/**/include "{secret}"\n',
    "continued.cu": '#\\\ninclude "{secret}"\n',
    "next.cu": '#include_next "{secret}"\n',
    "import.cu": '#import "{secret}"\n',
    "has.cu": '#if __has_include("{secret}")\n#error it exists\n#endif\n',
    "has_not.cu": '#if __has_include("{missing}")\n#error it exists\n#endif\n',
    "nested.cu": '#include "inner.cuh"\n',  # inner.cuh includes the secret through a macro
}


@pytest.fixture
def submission(tmp_path):
    secret = tmp_path / "secret.h"
    secret.write_text(f"{SECRET} x;\n")
    sub = tmp_path / "student"
    sub.mkdir()
    for name, text in BYPASSES.items():
        (sub / name).write_text(text.format(secret=secret, missing=tmp_path / "missing.h") + KERNEL)
    (sub / "inner.cuh").write_text('#define Q "../secret.h"\n#include Q\n')
    (sub / "in.h").write_text("#define V 7\n")
    (sub / "fine.cu").write_text('#include "in.h"\n#if __has_include("in.h") && !__has_include("no.h")\n'
                                 "__global__ void k(int *a) { a[0] = V; }\n#endif\n")
    (sub / "plain.cu").write_text('#include "in.h"\n__global__ void k(int *a) { a[0] = V; }\n')
    cwd = Path.cwd()
    os.chdir(sub)
    yield sub
    os.chdir(cwd)


def _refused(backend, sub: Path, runs: bool = True, fine: str = "fine.cu") -> None:
    shell = confined_shell(backend, sub)
    try:
        for name in BYPASSES:
            assert shell.execute(f"kernel load {name}") is False, name
            assert shell.last_error.code == "OUTSIDE_SUBMISSION", (name, shell.last_error)
        said = shell.out.getvalue() + shell.err.getvalue()
        assert SECRET not in said and "it exists" not in said
        assert not runs or shell.execute(f"kernel load {fine}; alloc device 4B as d; launch k d grid 1 block 1; sync; "
                             "alloc pinned 4B as want; fill want 7 dtype int32; expect equal d want"), \
            shell.err.getvalue()  # what lies inside is read, and __has_include answers there
    finally:
        shell.close()


def test_no_preprocessor_route_reads_a_file_outside_the_submission_on_the_simulator(submission):
    _refused(SimBackend(), submission)


def test_the_root_travels_to_the_worker_that_compiles(submission):
    _refused(make_backend("sim-worker"), submission, runs=False)  # (the simulator's kernels stay in its process)


@pytest.mark.gpu
def test_no_preprocessor_route_reads_a_file_outside_the_submission_on_the_gpu(submission):
    # nvcc answers __has_include itself, so a graded source may not use it on a GPU at all: a kernel inside the
    # folder with plain includes runs
    _refused(make_backend("cuda"), submission, fine="plain.cu")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc here")
def test_nvcc_dependencies_outside_the_root_are_refused_before_the_compile(submission):
    from cudashell.backends.gpu.work import confine_dependencies
    from cudashell.errors import ShellError

    for name in BYPASSES:
        with pytest.raises(ShellError) as e:
            confine_dependencies((submission / name).read_text(), [str(submission)], "sm_90", submission, [])
        assert e.value.code == "OUTSIDE_SUBMISSION" and SECRET not in e.value.message, name
    text = '#include "in.h"\n#include <cstdio>\n#include <cuda_runtime.h>\n' + KERNEL
    confine_dependencies(text, [str(submission)], "sm_90", submission, [])  # CUDA's and the system's headers


def test_the_grade_refuses_each_route_and_never_shows_the_file(submission, tmp_path):
    checks = tmp_path / "checks.cush"
    checks.write_text("".join(f'section "{name}" points 1\nkernel load {name}\nexpect ok\n' for name in BYPASSES))
    junit = tmp_path / "grade.xml"
    code, out, err = grade("--backend", "sim", "--junit", str(junit), str(checks), str(submission), tmp_path=tmp_path)
    assert code == ExitStatus.ERROR
    assert out.count("failed with OUTSIDE_SUBMISSION") == len(BYPASSES), out
    for said in (out, err, junit.read_text()):
        assert SECRET not in said and "it exists" not in said


def test_compare_ref_and_lesson_files_are_confined_as_the_commands_resolve_them(submission, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "p.json").write_text('{"name": "mine"}')
    (tmp_path / "x.toml").write_text(f'title = "{SECRET}"\n')
    shell = confined_shell(SimBackend(), submission)
    try:
        for line in ("compare ref ~/p.json", f"compare ref {tmp_path / 'p.json'}", f"lesson {tmp_path / 'x.toml'}",
                     "lesson ../x.toml", "lesson ~/x.toml"):
            assert shell.execute(line) is False, line
            assert shell.last_error.code == "OUTSIDE_SUBMISSION", (line, shell.last_error)
        assert SECRET not in shell.err.getvalue()
        assert shell.execute("compare ref h100") is False and shell.last_error.code == "NOTHING_MEASURED"
    finally:
        shell.close()

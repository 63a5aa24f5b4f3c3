"""Code nobody here wrote (tests/public_kernels.py: NVIDIA's cuda-samples at pinned commits), read from a local git
mirror named by CUDASHELL_CUDA_SAMPLES when the tests run, written into a temporary folder beside a generated
wrapper `.cu`, and run through the kernel corpus's runner: on the simulator against the reference, and where a GPU
is present on both backends with identical bytes. Without a mirror (CI has none) each case is a collected test that
skips with one line saying why."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
from pathlib import Path

import pytest

from tests.public_kernels import (
    MIRROR_VARIABLE,
    PUBLIC,
    REFUSED,
    REPOSITORY,
    RUNNABLE,
    Public,
    Taken,
)
from tests.test_kernel_corpus import (
    on_both_backends,
    on_the_simulator,
    refused_by_the_simulator,
    well_formed,
)


def ids(publics):
    return [p.case.name for p in publics]


@functools.cache
def unavailable(commit: str, mirror: str | None) -> str | None:
    """Why `commit` cannot be read from the mirror at `mirror` (the variable's value), in one line; None if it can."""
    if not mirror:
        return (f"{MIRROR_VARIABLE} is not set: give it the path of a git mirror of {REPOSITORY} (bare or not) "
                "to run its kernels")
    try:
        found = subprocess.run(["git", "-C", mirror, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True,
                               check=False)
    except FileNotFoundError:
        return f"{MIRROR_VARIABLE} is set, but there is no git to read {mirror} with"
    if found.returncode != 0:
        return f"{MIRROR_VARIABLE}={mirror} has no commit {commit} of {REPOSITORY} (not a mirror of it, or not fetched)"
    return None


def shown(mirror: str, commit: str, path: str) -> str:
    """`git show COMMIT:PATH`: the file as it was at that commit."""
    return subprocess.run(["git", "-C", mirror, "show", f"{commit}:{path}"], capture_output=True, text=True,
                          check=True).stdout


def git(mirror: str, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", mirror, *args], input=data, capture_output=True, check=True).stdout


def small_mirror(source: str, target: str) -> None:
    """A bare repository at `target` holding only what the table reads from `source` — each commit object, the
    trees down to each file, the files — under the same ids, so that it stands for the mirror where a whole one
    cannot go (a GPU machine takes 64 MiB; NVIDIA/cuda-samples is more): `python -m tests.test_public_kernels
    SOURCE TARGET`."""
    git(".", "init", "-q", "--bare", target)
    wanted = {p.taken.commit for p in PUBLIC}
    for public in PUBLIC:
        taken = public.taken
        for name in (taken.kernel, *taken.beside):
            parts = taken.path(name).split("/")
            wanted |= {git(source, "rev-parse", f"{taken.commit}:{'/'.join(parts[:k])}").decode().strip()
                       for k in range(len(parts) + 1)}
    for oid in sorted(wanted):
        kind = git(source, "cat-file", "-t", oid).decode().strip()
        copied = git(target, "hash-object", "--literally", "-t", kind, "-w", "--stdin",
                     data=git(source, "cat-file", kind, oid)).decode().strip()
        assert copied == oid, (oid, copied)
    (Path(target) / "shallow").write_text("".join(f"{c}\n" for c in sorted({p.taken.commit for p in PUBLIC})))


def kernel_text(mirror: str, taken: Taken) -> str:
    """The kernel file, or only its `lines` ranges, each unchanged after a `#line` saying where it starts (so that
    messages name the sample's own lines)."""
    text = shown(mirror, taken.commit, taken.path(taken.kernel))
    if not taken.lines:
        return text
    rows = text.splitlines(keepends=True)
    return "".join(f'#line {a} "{taken.kernel}"\n' + "".join(rows[a - 1:b]) for a, b in taken.lines)


def placed(public: Public, folder: Path) -> tuple:
    """The sample's files written into `folder` with a wrapper that #includes the kernel file; the case loading
    the wrapper, and the text of all of it (for the corpus's well-formedness check). Skips without the mirror."""
    mirror = os.environ.get(MIRROR_VARIABLE)
    why = unavailable(public.taken.commit, mirror)
    if why:
        pytest.skip(why)
    taken = public.taken
    texts = {taken.kernel: kernel_text(mirror, taken)}
    texts.update({name: shown(mirror, taken.commit, taken.path(name)) for name in taken.beside})
    for name, text in texts.items():
        (folder / name).write_text(text)
    wrapper = folder / f"{public.case.name}_wrapper.cu"
    wrapper.write_text(f'/* made by tests/test_public_kernels.py: {REPOSITORY} {taken.commit[:8]} '
                       f'{taken.folder} */\n#include "{taken.kernel}"\n')
    case = dataclasses.replace(public.case, file=wrapper)
    well_formed(case, "".join(texts.values()))
    return case


@pytest.mark.parametrize("public", RUNNABLE, ids=ids(RUNNABLE))
def test_the_simulator_gives_the_reference_bytes(sim, public, tmp_path):
    on_the_simulator(sim, placed(public, tmp_path))


@pytest.mark.parametrize("public", REFUSED, ids=ids(REFUSED))
def test_the_simulator_refuses_what_is_outside_its_subset(sim, public, tmp_path):
    refused_by_the_simulator(sim, placed(public, tmp_path))


@pytest.mark.gpu
@pytest.mark.parametrize("public", RUNNABLE, ids=ids(RUNNABLE))
def test_the_gpu_and_the_simulator_give_the_same_bytes(sim, public, tmp_path, capfd):
    on_both_backends(sim, placed(public, tmp_path), capfd)


def test_without_a_mirror_a_case_skips_with_one_line_naming_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(MIRROR_VARIABLE, raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        placed(PUBLIC[0], tmp_path)
    assert str(skipped.value).startswith(f"{MIRROR_VARIABLE} is not set: ") and "\n" not in str(skipped.value)
    assert not list(tmp_path.iterdir())
    elsewhere = unavailable(PUBLIC[0].taken.commit, str(tmp_path))  # a folder that is no git directory
    assert elsewhere.startswith(f"{MIRROR_VARIABLE}={tmp_path} has no commit") and "\n" not in elsewhere


def test_a_small_mirror_holds_every_file_the_table_reads(tmp_path):
    source = os.environ.get(MIRROR_VARIABLE)
    why = next(filter(None, (unavailable(p.taken.commit, source) for p in PUBLIC)), None)
    if why:
        pytest.skip(why)
    small_mirror(source, str(tmp_path / "small.git"))
    for public in PUBLIC:
        assert unavailable(public.taken.commit, str(tmp_path / "small.git")) is None
        for name in (public.taken.kernel, *public.taken.beside):
            path = public.taken.path(name)
            assert shown(str(tmp_path / "small.git"), public.taken.commit, path) == \
                shown(source, public.taken.commit, path), path


def test_the_table_names_every_case_once_and_each_sample_in_the_docstring():
    import tests.public_kernels as table

    names = ids(PUBLIC)
    assert len(names) == len(set(names))
    for public in PUBLIC:
        assert public.case.file is None and public.case.source is None, public.case.name
        assert public.taken.folder in table.__doc__ and public.taken.commit in table.__doc__, public.case.name
        for name in (public.taken.kernel, *public.taken.beside):
            assert name in table.__doc__, name


if __name__ == "__main__":
    import sys

    small_mirror(*sys.argv[1:3])

"""The installed command as a user runs it: exit codes, --json, stdin, banner."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "cudashell", "--backend", "sim", *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_c_runs_commands_and_says_the_backend():
    r = cli("-c", "alloc pinned 1MB mapped; ls")
    assert r.returncode == 0
    assert "p0" in r.stdout and "same (UVA)" in r.stdout
    assert "sim (asked for)" in r.stderr and "modeled" in r.stderr


def test_json_lines_are_stable():
    r = cli("--json", "-c", "alloc pinned 1MB; alloc device 1MB; memcpy p0 d0; ls; free x")
    objs = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.returncode == 1 and len(objs) == 5
    assert all(set(o) == {"cmd", "ok", "kind", "error", "result"} for o in objs)
    assert [o["kind"] for o in objs] == ["alloc", "alloc", "copy", "ls", None]
    copy = objs[2]["result"]
    assert {"bytes", "seconds", "gbps", "blocking", "timing"} <= set(copy) and copy["timing"] == "modeled"
    row = objs[3]["result"]["buffers"][0]
    assert {"name", "kind", "size", "flags", "host_ptr", "device_ptr", "state"} <= set(row)
    assert objs[4]["error"]["code"] == "NO_SUCH_BUFFER" and objs[4]["cmd"] == "free x"


def test_commands_on_stdin():
    r = cli(stdin="alloc device 4KB\nls\n")
    assert r.returncode == 0 and "d0" in r.stdout


def test_usage_error_of_the_cli_exits_2():
    assert cli("--nope").returncode == 2
    r = cli("/no/such/file.cush")
    assert r.returncode == 2 and "NO_SUCH_FILE" in r.stderr


def test_cuda_backend_without_gpu_is_refused_clearly():
    r = subprocess.run([sys.executable, "-m", "cudashell", "--backend", "cuda", "-c", "ls"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode == 0:  # a GPU machine
        return
    assert r.returncode == 2 and "NO_GPU" in r.stderr and "Traceback" not in r.stderr


def test_script_files_echo_commands_and_stop_on_failure(tmp_path):
    (tmp_path / "a.cush").write_text("alloc pinned 4KB\nmemcpy p0 nowhere\nls\n")
    r = cli(str(tmp_path / "a.cush"))
    assert r.returncode == 1
    assert "cush> alloc pinned 4KB" in r.stdout and "cush> ls" not in r.stdout
    assert "a.cush:2:11: NO_SUCH_BUFFER" in r.stderr


def test_keep_going_exit_1_at_the_end(tmp_path):
    r = cli("--keep-going", "-c", "free x; alloc pinned 4KB; ls")
    assert r.returncode == 1 and "p0" in r.stdout


def test_a_gpu_worker_that_cannot_start_falls_back_to_the_simulator_under_auto(monkeypatch):
    """The checks before the worker passed (as where PyCUDA imports), but the worker itself failed to start: auto
    says why and goes on with the simulator; `--backend cuda` is refused with that reason."""
    from cudashell.backends import cuda
    from cudashell.backends.choice import open_backend
    from cudashell.errors import ShellError

    def failing(self):
        raise RuntimeError("the GPU worker failed in starting the GPU worker:\nTraceback …\n"
                           "ImportError: cuda-bindings 14 needs a CUDA 14 driver")

    monkeypatch.setattr(cuda, "cuda_unavailable_reason", lambda: None)
    monkeypatch.setattr(cuda.CudaBackend, "_start", failing)
    backend, why = open_backend("auto")
    assert backend.name == "sim"
    assert "the GPU worker could not start: ImportError: cuda-bindings 14 needs a CUDA 14 driver" in why
    with pytest.raises(ShellError) as refused:
        open_backend("cuda")
    assert refused.value.code == "NO_GPU" and "could not start" in refused.value.message
    backend.close()


@pytest.mark.parametrize("command", [[], ["grade"]])
def test_every_commands_help_exits_0(command):
    """`cudashell --help` tells teachers to run `cudashell grade --help`: a `%` in its help text once crashed it."""
    r = subprocess.run([sys.executable, "-m", "cudashell", *command, "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and r.stdout.startswith(f"usage: {' '.join(['cudashell', *command])}")
    if command == ["grade"]:
        assert "(default 60%)" in r.stdout

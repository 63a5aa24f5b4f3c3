"""The backend contract is honest: commands ask a backend what it can do (its Capabilities), never its name; a launch
takes one options object and reports a typed KernelReport; `reach` answers one type; the repeat planner stands in for
the backend with a method for each call of the contract, keyword arguments and all."""

from __future__ import annotations

import ast
from pathlib import Path

import cudashell
from cudashell.backends.base import (
    CONTRACT,
    PLAIN_LAUNCH,
    Capabilities,
    LaunchOptions,
    Reach,
)
from cudashell.backends.plan import Recorder
from cudashell.model.kernels import BUILTINS

PACKAGE = Path(cudashell.__file__).parent
TWICE = ("kernel define twice <<< __global__ void twice(float *a, int n) { int i = blockIdx.x * blockDim.x + "
         "threadIdx.x; if (i < n) a[i] *= 2; } >>>")


def _about_the_backend(node) -> bool:
    """`backend`, `self.backend`, `shell.backend`…: an expression naming the backend."""
    return isinstance(node, ast.Name) and node.id == "backend" or isinstance(node, ast.Attribute) and \
        node.attr == "backend"


def _asks_who_not_what(node) -> bool:
    """A test of which backend this is: `backend.name == …`, `backend.timing_label != …`, `isinstance(backend, …)`,
    or `getattr(backend, …)` / `hasattr(backend, …)` (an attribute one backend has and another lacks)."""
    if isinstance(node, ast.Compare):
        return any(isinstance(side, ast.Attribute) and side.attr in ("name", "timing_label")
                   and _about_the_backend(side.value) for side in [node.left, *node.comparators])
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and bool(node.args) \
        and node.func.id in ("getattr", "hasattr", "isinstance") and _about_the_backend(node.args[0])


def test_everything_outside_the_backends_asks_a_backend_what_it_can_do_not_which_it_is():
    """Commands, advice and the front ends (the banner, grading) alike."""
    files = sorted(p for p in PACKAGE.rglob("*.py") if "backends" not in p.relative_to(PACKAGE).parts)
    found = [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in files
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if _asks_who_not_what(node)]
    assert found == [], "ask backend.capabilities instead"


def test_the_scan_finds_what_it_looks_for():
    code = ("backend.name == 'sim'\n'cuda' != self.backend.name\nbackend.timing_label == 'modeled'\n"
            "getattr(backend, 'profile', None)\nisinstance(act.backend, SimBackend)\nbackend.name\n"
            "getattr(kernel, 'sim')\n")
    assert [_asks_who_not_what(n) for n in ast.walk(ast.parse(code)) if isinstance(n, (ast.Compare, ast.Call))] == \
        [True, True, True, True, True, False]


def test_the_simulator_declares_what_it_is_and_the_worker_passes_the_sides_declaration_on(sim, piped):
    caps = sim.backend.capabilities
    assert caps == Capabilities(models_time=True, draws_accesses=True, profile=sim.backend.profile)
    assert piped.backend.name == "cuda" and piped.backend.capabilities == caps  # the simulator, behind the pipe
    assert "(simulated)" in piped.ok("doctor")["findings"][0]["meaning"]


def test_reach_answers_an_address_or_a_refusal(no_uva):
    no_uva.ok("alloc device 4KB as d; alloc pinned 4KB mapped as p; context create as other")
    session, backend = no_uva.shell.session, no_uva.backend
    d, p, other = session.buffers["d"], session.buffers["p"], session.contexts["other"].handle
    assert backend.reach(d, None) == Reach(d.device_ptr) and backend.reach(p, None) == Reach(p.device_ptr)
    assert backend.reach(d, other) == Reach.refused("OTHER_CONTEXT")
    assert backend.reach(p, other) == Reach.refused("CUDA_ERROR_INVALID_VALUE")


# ------------------------------------------------------------------ the repeat planner's recorder
def test_the_recorder_has_a_method_for_each_call_of_the_contract():
    assert all(callable(vars(Recorder).get(name)) for name in CONTRACT)


def test_the_recorder_keeps_a_call_passed_by_keyword_in_the_contracts_order(sim):
    sim.ok("alloc device 4KB as d")
    recorder = Recorder(sim.backend, sim.shell.session)
    whole = sim.shell.session.buffers["d"].whole()
    recorder.launch(BUILTINS["increment"], [whole], count=1024, grid=(4, 1, 1), block=(256, 1, 1), shared=0,
                    stream=None)
    recorder.launch(BUILTINS["increment"], [whole], 1024, (4, 1, 1), (256, 1, 1), 0, None,
                    options=LaunchOptions())
    assert [args for _, args in recorder.calls] == [(BUILTINS["increment"], [whole], 1024, (4, 1, 1), (256, 1, 1), 0,
                                                     None, PLAIN_LAUNCH)] * 2
    assert recorder.why_not(sim.shell.session) is None


def test_a_repeated_launch_with_show_access_runs_its_rounds_on_the_gpu_side(sim):
    sim.ok(f"alloc pinned 128 as d; {TWICE}; fill d 1 dtype float32")
    ran = sim.ok("repeat 3 <<< launch twice d 32 grid 1 block 32 show-access >>>")
    assert ran["ran"] == 3 and ran["plan"]["rounds"] == 2  # round 1 through the shell, the others from its record
    sim.ok("sync")
    assert sim.ok("show d dtype float32 count 2")["values"] == [8.0, 8.0]

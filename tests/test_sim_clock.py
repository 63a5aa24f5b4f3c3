"""The simulator's virtual clock keeps whole nanoseconds: however long a session has run (a spin of centuries), a
4-byte copy and a microsecond kernel still take their exact modeled time — a float clock of seconds lost its step
(2 ms by 9e12 s: a bench divided by zero)."""

from __future__ import annotations

import pytest

import cudashell.commands.kernels as kernels
from cudashell.backends.sim.common import ns


@pytest.fixture
def unlimited_spin(monkeypatch):
    """`spin` past its hour: the limit is the shell's, not the clock's."""
    monkeypatch.setattr(kernels, "SPIN_LIMIT_US", 1 << 80)


def test_a_copy_after_2_to_the_62_ns_of_spin_takes_its_exact_modeled_time(sim, unlimited_spin):
    backend, p = sim.backend, sim.backend.profile
    sim.ok("alloc pinned 4 as p; alloc device 4 as d")
    sim.ok(f"launch spin {(1 << 62) // 1000}; sync")
    assert backend.clock() > (1 << 62) / 1e9
    copy = ns(p.copy_seconds("pinned h2d", 4))
    t = sim.ok("memcpy p d 4 async")
    assert (t["seconds"], t["host_seconds"]) == (copy / 1e9, ns(p.async_call) / 1e9)
    bufs = sim.shell.session.buffers
    run = backend.run_plan([["memcpy", (bufs["p"], 0, bufs["d"], 0, 4, None, True)]], 64, gate=True)
    assert run["gpu_seconds"] == run["busy_seconds"] == 64 * copy / 1e9  # back to back, to the nanosecond


def test_bench_after_the_longest_spin_gives_the_copys_time_not_a_division_by_zero(sim, unlimited_spin):
    sim.ok("launch spin 9223372036854775807; sync")  # 2^63 µs: the reproduction
    row = sim.ok("bench memcpy h2d pinned sizes 4 reps 3")["rows"][0]
    assert row["us_per_copy"] == pytest.approx(sim.backend.profile.copy_seconds("pinned h2d", 4) * 1e6, rel=1e-3)
    assert row["cv"] == 0


def test_event_elapsed_of_a_microsecond_kernel_after_1e7_seconds_is_exact_to_the_ns(sim, unlimited_spin):
    sim.ok("launch spin 10000000000000; sync")  # 10^7 s
    sim.ok("hold; event record a; launch spin 1; event record b; release; sync")  # back to back at the release
    events = sim.shell.session.events
    elapsed = sim.backend.event_elapsed(events["a"].handle, events["b"].handle)
    assert elapsed == ns(sim.backend.profile.launch_latency + 1e-6) / 1e9

"""Several GPUs: `devices` (every GPU, each pair's peer access and link) and `bench peer` (copies between GPUs,
peer access off and on) — on the simulator's one- and two-GPU profiles, and on whatever GPUs the machine has."""

from __future__ import annotations

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from tests.conftest import Cush

KEYS = {"ordinal", "name", "pci_bus_id", "numa_node", "total_mem", "compute_capability"}


@pytest.fixture
def pair():
    c = Cush(SimBackend(Profile.load("two-h200")))
    yield c
    c.shell.close()


def test_one_gpu_lists_itself_and_refuses_copies_between_gpus(cush):
    topo = cush.ok("devices")
    assert topo["devices"] and set(topo["devices"][0]) == KEYS and topo["current"] == 0
    if len(topo["devices"]) == 1:
        assert topo["peers"] == []
        error = cush.fails("bench peer 1MB")
        assert error["code"] == "ONE_GPU" and "two-h200" in error["hint"]


def test_a_pair_of_simulated_gpus_is_joined_by_nvlink_both_ways(pair):
    topo = pair.ok("devices")
    assert [d["ordinal"] for d in topo["devices"]] == [0, 1]
    assert len({d["pci_bus_id"] for d in topo["devices"]}) == 2
    assert [(p["src"], p["dst"], p["access"], p["link"]) for p in topo["peers"]] == \
        [(0, 1, True, "NVLink (NV18)"), (1, 0, True, "NVLink (NV18)")]


def test_peer_access_makes_the_modeled_copy_ten_times_faster(pair):
    bench = pair.ok("bench peer 256MB reps 2")
    assert bench["timing"] == "modeled"
    rates = {(r["src"], r["dst"], r["peer"]): r["gbps"] for r in bench["rows"]}
    assert set(rates) == {(0, 1, False), (0, 1, True), (1, 0, False), (1, 0, True)}
    assert rates[(0, 1, True)] == pytest.approx(390, rel=0.05)  # measured on the H200 pair, issue 14
    assert rates[(0, 1, False)] == pytest.approx(37.7, rel=0.05)


def test_bench_peer_is_refused_while_held(pair):
    pair.ok("hold")
    assert pair.fails("bench peer 1MB")["code"] == "STREAMS_HELD"
    pair.ok("release")


@pytest.mark.gpu
def test_the_gpus_the_driver_sees(tmp_path):
    from tests.conftest import make_backend

    cush = Cush(make_backend("cuda"))
    try:
        import pycuda.driver as cuda

        cuda.init()
        topo = cush.ok("devices")
        assert len(topo["devices"]) == cuda.Device.count()
        assert [d["pci_bus_id"].lower() for d in topo["devices"]] == \
            [cuda.Device(i).pci_bus_id().lower() for i in range(cuda.Device.count())]
        assert [(p["src"], p["dst"], p["access"]) for p in topo["peers"]] == \
            [(a, b, bool(cuda.Device(a).can_access_peer(cuda.Device(b))))
             for a in range(cuda.Device.count()) for b in range(cuda.Device.count()) if a != b]
        if len(topo["devices"]) > 1:
            rows = cush.ok("bench peer 64MB reps 3")["rows"]
            rates = {(r["src"], r["dst"], r["peer"]): r["gbps"] for r in rows}
            for p in topo["peers"]:
                if p["access"]:  # over the link, not through the host
                    assert rates[(p["src"], p["dst"], True)] > 1.5 * rates[(p["src"], p["dst"], False)]
            cush.ok("alloc device 1MB; memset d0 1; memcpy d0 d0")  # the session's context is current again
    finally:
        cush.shell.close()


def test_calibrate_on_a_pair_writes_the_peer_figures_back(pair, tmp_path):
    p = pair.ok(f"calibrate out {tmp_path / 'pair.json'}")["profile"]
    assert p["gpus"] == 2 and p["peer_access"] is True and p["peer_link"] == "NVLink (NV18)"
    assert p["peer_rate"] == pytest.approx(390e9, rel=0.01) and p["peer_staged_rate"] == pytest.approx(37.7e9, rel=0.01)
    assert p["peer_latency"] == pytest.approx(10e-6, rel=0.05)
    again = Cush(SimBackend(Profile.load(str(tmp_path / "pair.json"))))
    try:
        assert len(again.ok("devices")["devices"]) == 2
    finally:
        again.shell.close()

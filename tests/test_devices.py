"""Several GPUs: `devices` (every GPU, each pair's peer access and link) and `bench peer` (copies between GPUs,
peer access off and on) — on the simulator's one- and two-GPU profiles, and on whatever GPUs the machine has."""

from __future__ import annotations

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from tests.conftest import Cush

KEYS = {"ordinal", "name", "pci_bus_id", "numa_node", "total_mem", "compute_capability", "async_engine_count",
        "pageable_memory_access"}


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
    seen = []
    pair.shell.session.progress = lambda label, done, total: seen.append((label, done, total))
    p = pair.ok(f"calibrate out {tmp_path / 'pair.json'}")["profile"]
    total = seen[0][2]  # a step per figure measured: never a long silence
    assert seen == [("calibrate", k, total) for k in range(1, total + 1)] + [("calibrate", None, total)]
    assert p["gpus"] == 2 and p["peer_access"] is True and p["peer_link"] == "NVLink (NV18)"
    assert p["peer_rate"] == pytest.approx(390e9, rel=0.01) and p["peer_staged_rate"] == pytest.approx(37.7e9, rel=0.01)
    assert p["peer_latency"] == pytest.approx(10e-6, rel=0.05)
    again = Cush(SimBackend(Profile.load(str(tmp_path / "pair.json"))))
    try:
        assert len(again.ok("devices")["devices"]) == 2
    finally:
        again.shell.close()


def test_a_measurement_on_the_second_gpu_makes_its_buffers_there(two):
    """calibrate and the benches run in the current context, their buffers too: after `device use 1` a bench's
    device buffer is GPU 1's (it was GPU 0's, so every copy crossed GPUs and calibrate's held copies were refused
    as STREAMS_HELD), and the figures are that GPU's own."""
    line = "bench memcpy h2d pinned sizes 16MB reps 3"
    first = two.ok(line)["rows"][0]["gbps"]
    two.ok("device use 1")
    assert two.ok(line)["rows"][0]["gbps"] == pytest.approx(first, rel=0.25)
    assert two.ok("calibrate")["profile"]["pinned_h2d"] == pytest.approx(first * 1e9, rel=0.25)


def test_memory_on_the_other_gpu_round_trips_and_needs_peer_access_for_a_kernel(two):
    two.ok("alloc pinned 4MB as h; alloc pinned 4MB as back; alloc device 4MB as d0; alloc device 4MB on 1 as d1")
    assert {b["name"]: b["device"] for b in two.ok("ls")["buffers"]} == {"h": 0, "back": 0, "d0": 0, "d1": 1}
    assert two.ok("info d1")["driver"]["device"] == 1
    two.ok("fill h iota dtype float32; memcpy h d0; memcpy d0 d1; memcpy d1 back; sync")
    assert two.ok("compare h back")["equal"]
    error = two.fails("launch increment d1")
    assert error["code"] == "NO_PEER_ACCESS" and error["hint"].startswith("`peer enable 0 1`")
    assert two.fails("memset d1 0")["code"] == "OTHER_GPU"
    two.ok("peer enable 0 1")
    assert two.fails("peer enable 0 1")["code"] == "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"
    assert [tuple(p) for p in two.ok("devices")["enabled"]] == [(0, 1)]
    two.ok("launch increment d1; memcpy d1 back; sync")  # a kernel on GPU 0 writes GPU 1's memory
    assert two.ok("show back count 4 dtype float32")["values"] == [1.0, 2.0, 3.0, 4.0]
    two.ok("peer disable 0 1")
    assert two.fails("peer disable 0 1")["code"] == "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"
    assert two.fails("alloc device 1MB on 7")["code"] == "CUDA_ERROR_INVALID_DEVICE"
    assert two.fails("alloc pinned 1MB on 1")["code"] == "USAGE"
    two.ok("free all")
    assert two.ok("ls")["buffers"] == []


def _copy_seconds(two, line: str) -> float:
    """GPU seconds of one copy: from its result, or (an async d2d copy on a GPU) from the sync that finished it."""
    copy, synced = (o["result"] for o in two.run(f"{line}; sync"))
    return copy["seconds"] if copy["seconds"] is not None else \
        next(e["seconds"] for e in synced["completed"] if e["op"].startswith("memcpy"))


def test_a_copy_between_gpus_runs_over_the_link_once_peer_access_is_on(two):
    two.ok("alloc device 256MB as a; alloc device 256MB on 1 as b; memcpy a b; sync")  # the first pays for mappings
    off = _copy_seconds(two, "memcpy a b")
    two.ok("peer enable 0 1; peer enable 1 0; memcpy a b; sync")
    on = _copy_seconds(two, "memcpy a b")
    assert off > 3 * on, (off, on)  # staged through the host (~38 GB/s) vs over NVLink (~390 GB/s)
    gbps = {k: (256 << 20) / s / 1e9 for k, s in (("off", off), ("on", on))}
    assert gbps["off"] < 100 and gbps["on"] < 1000, gbps  # no link is faster: a time of one GPU's part is not the copy's


def test_the_links_are_read_from_nvidia_smi_topo():
    from cudashell.backends.topology import parse_topo

    h200_pair = ("\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
                 "GPU0\t X \tNV18\t0-31\t0\t\tN/A\nGPU1\tNV18\t X \t0-31\t0\t\tN/A\n\nLegend:\n")
    assert parse_topo(h200_pair) == {(0, 0): "X", (0, 1): "NV18", (1, 0): "NV18", (1, 1): "X"}
    pcie_four = ("\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\n"
                 "GPU0\t X \tPIX\tSYS\tSYS\tNODE\t0-15\nGPU1\tPIX\t X \tSYS\tSYS\tNODE\t0-15\n"
                 "GPU2\tSYS\tSYS\t X \tPIX\tSYS\t16-31\nGPU3\tSYS\tSYS\tPIX\t X \tSYS\t16-31\nNIC0\tNODE\tNODE\n")
    links = parse_topo(pcie_four)
    assert links[(0, 1)] == "PIX" and links[(1, 2)] == "SYS" and len(links) == 16  # the NIC column is not a GPU


def test_default_and_portable_pinned_memory_copy_to_the_other_gpu(two):
    """Seed 004: pinned memory is page-locked for the GPU current when it was made, `portable` for all — and under
    UVA every pinned allocation is portable: both copy to GPU 1 at the pinned rate, and the bytes arrive."""
    two.ok("alloc pinned 64MB as plain; alloc pinned 64MB portable as shared; alloc device 64MB on 1 as far; "
           "alloc pinned 64MB as back; fill plain 1 dtype float32; fill shared 2 dtype float32")
    rates = {}
    for name in ("plain", "shared"):
        two.ok(f"memcpy {name} far")  # warm
        rates[name] = two.ok(f"memcpy {name} far")["gbps"]
        two.ok("memcpy far back")
        assert two.ok("compare back " + name)["equal"]
    assert rates["plain"] > 0.8 * rates["shared"] and rates["plain"] > 20, rates


def test_without_uva_default_pinned_memory_is_pageable_to_the_other_gpu():
    """The pre-UVA rule the simulator teaches (profile two-gpus-no-uva): only `portable` pinned memory is pinned for
    GPU 1 too; the default one is copied as pageable memory is, staged."""
    c = Cush(SimBackend(Profile.load("two-gpus-no-uva")))
    try:
        c.ok("alloc pinned 64MB as plain; alloc pinned 64MB portable as shared; alloc device 64MB on 1 as far; "
             "alloc device 64MB as near")
        plain, shared = c.ok("memcpy plain far")["gbps"], c.ok("memcpy shared far")["gbps"]
        assert shared > 4 * plain
        assert c.ok("memcpy plain near")["gbps"] == pytest.approx(shared, rel=0.01)  # on its own GPU: pinned
    finally:
        c.shell.close()


def test_bench_peer_adds_host_rows_for_every_gpu_and_numa_node(two, tmp_path):
    import csv

    bench = two.ok(f"bench peer 64MB reps 3 --csv {tmp_path / 'peer.csv'}")
    with open(tmp_path / "peer.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(bench["rows"]) + len(bench["host_rows"]) and {"src", "gpu", "node"} <= set(table[0])
    devices = two.ok("devices")
    nodes = devices["memory_nodes"] or [None]
    rows = {(r["gpu"], r["node"], r["to_device"]): r for r in bench["host_rows"]}
    gpus = range(len(devices["devices"]))  # every GPU of the machine: two, or four on the 4-GPU kind
    assert set(rows) == {(g, n, d) for g in gpus for n in nodes for d in (True, False)}
    for r in rows.values():  # pinned host memory over PCIe: between a pageable copy's rate and the link's peak
        assert 15 < r["gbps"] < 70, r


def test_memory_nodes_reads_the_kernels_list(monkeypatch):
    from cudashell.model import machine

    for text, nodes in (("0\n", [0]), ("0-1\n", [0, 1]), ("0,2-3\n", [0, 2, 3]), (None, [])):
        monkeypatch.setattr(machine, "_read", lambda path, text=text: text)
        assert machine.memory_nodes() == nodes


def test_binding_pages_to_a_node_the_machine_lacks_is_refused():
    import ctypes
    import mmap

    from cudashell.model.machine import bind_to_node, memory_nodes

    if not memory_nodes():
        pytest.skip("no NUMA information here")
    host = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    view = ctypes.c_char.from_buffer(host)
    try:
        bind_to_node(ctypes.addressof(view), 1 << 20, memory_nodes()[0])  # a node it has: accepted
        with pytest.raises(OSError):
            bind_to_node(ctypes.addressof(view), 1 << 20, max(memory_nodes()) + 1)
    finally:
        del view
        host.close()

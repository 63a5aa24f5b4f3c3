"""After a kernel fault or a hung GPU the session comes back with `reset`: host contents kept, device
contents lost, everything else made again. The same scenarios on both backends."""

from __future__ import annotations

import pytest

SETUP = ("alloc pinned 64KB as p; fill p iota; alloc pageable 64KB as h; register h mapped; fill h 7; "
         "alloc pageable 64KB as g; fill g random seed 3; alloc device 64KB as d; memcpy p d; "
         "alloc managed 64KB as m; fill m 9; stream create nonblocking priority -1; stream create; "
         "event record e stream 2")
HOST = ("p", "h", "g", "m")


def checksums(cush, names) -> dict:
    return cush.ok("checksum " + " ".join(names))["checksums"]


def fault(cush) -> None:
    """A kernel given pageable memory: the launch is accepted, the fault surfaces at the sync."""
    cush.ok("alloc pageable 4KB as q; fill q 1; launch sum p p q unchecked")
    assert cush.fails("sync")["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"


def test_the_shell_refuses_what_unchecked_lets_through(cush):
    cush.ok("alloc pageable 4KB as q; alloc pinned 4KB as p")
    assert cush.fails("launch sum p p q")["code"] == "NOT_DEVICE_ACCESSIBLE"
    cush.ok("launch sum p p q unchecked")
    assert cush.fails("sync")["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"


def test_after_a_fault_every_gpu_call_fails_and_says_reset(cush):
    cush.ok(SETUP)
    fault(cush)
    err = cush.fails("alloc device 4KB")
    assert err["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS" and "`reset`" in err["hint"]
    assert checksums(cush, ["p", "h", "g"])  # host memory is still the host's


def test_free_after_a_fault_changes_nothing(cush):
    cush.ok(SETUP)
    fault(cush)
    before = [b["name"] for b in cush.ok("ls")["buffers"]]
    err = cush.fails("free all")
    assert err["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS" and "reset" in err["hint"]
    assert [b["name"] for b in cush.ok("ls")["buffers"]] == before


def test_reset_after_a_fault_brings_the_session_back_with_its_host_contents(cush):
    cush.ok(SETUP)
    before = checksums(cush, HOST)
    fault(cush)
    r = cush.ok("reset")
    assert r["cause"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    contents = {b["name"]: b["contents"] for b in r["buffers"]}
    assert {n: contents[n] for n in ("p", "h", "g", "q")} == dict.fromkeys(("p", "h", "g", "q"), "kept")
    assert contents["d"] == "lost: device memory"
    kept = [n for n in HOST if contents[n] == "kept"]
    assert {n: before[n] for n in kept} == checksums(cush, kept)
    rows = {b["name"]: b for b in cush.ok("ls")["buffers"]}
    assert rows["h"]["registered"] == ["mapped"] and rows["h"]["device_ptr"] is not None
    streams = {s["name"]: s for s in cush.ok("streams")["streams"]}
    assert streams["1"]["nonblocking"] and streams["1"]["priority"] == -1 and not streams["2"]["nonblocking"]
    # and the GPU works again: allocate, copy, launch, compare
    cush.ok("alloc device 64KB as d2; memcpy p d2; alloc pinned 64KB as back; memcpy d2 back async stream 1; "
            "sync stream 1; event record e stream 2; event sync e")
    assert cush.ok("compare p back")["equal"]
    cush.ok("launch sum p p d; memcpy d back; sync")
    assert cush.ok("show back dtype float32 count 2")["values"] != cush.ok("show p dtype float32 count 2")["values"]


def test_reset_on_request_keeps_host_contents_and_loses_device_contents(cush):
    cush.ok(SETUP)
    before = checksums(cush, HOST + ("d",))
    r = cush.ok("reset")
    assert r["cause"] == "asked" and r["unfinished"] == []
    assert checksums(cush, HOST) == {n: before[n] for n in HOST}
    assert {b["name"]: b["contents"] for b in r["buffers"]}["d"] == "lost: device memory"
    cush.ok("free all")


def test_a_gpu_timeout_gives_a_hung_gpu_up_and_reset_says_what_never_finished(cush):
    cush.ok("alloc pinned 4KB as p; fill p 5; set gpu-timeout 1")
    cush.ok("launch spin 3000000")
    err = cush.fails("sync")
    assert err["code"] == "GPU_ABANDONED" and "reset" in err["hint"]
    r = cush.ok("reset")
    assert r["cause"] == "GPU_ABANDONED"
    assert r["unfinished"] == [{"op": "kernel spin", "stream": "0"}]
    assert cush.ok("show p count 1")["values"] == [5]
    cush.ok("launch spin 10; sync")


def test_a_failed_reset_rebuild_drops_only_what_could_not_be_made(sim):
    sim.ok("alloc pinned 4KB as p; fill p 3")
    sim.backend.profile = type(sim.backend.profile)(**{**sim.backend.profile.__dict__, "host_memory": 1024})
    r = sim.ok("reset")
    assert r["dropped"] == {"p": "CUDA_ERROR_OUT_OF_MEMORY"} and sim.ok("ls")["buffers"] == []


# ------------------------------------------------------------------ the GPU only: a kernel that never ends
SPIN_FOREVER = "kernel define forever <<< __global__ void forever(int *flag) { while (*flag == 0) { } } >>>"


@pytest.mark.gpu
def test_ctrl_c_gives_a_kernel_that_never_ends_up(request):
    from tests.conftest import Cush, ctrl_c_once, make_backend, waiting_for

    c = Cush(make_backend("cuda"))
    request.addfinalizer(c.shell.close)
    c.ok("alloc pinned 4KB as p; fill p iota; alloc device 4KB as zero; memset zero 0; " + SPIN_FOREVER)
    before = checksums(c, ["p"])
    c.ok("launch forever zero grid 1 block 1")
    ctrl_c = ctrl_c_once(lambda: waiting_for("device_sync"), "the sync never waited for the GPU")
    err = c.fails("sync")
    ctrl_c.join()
    assert ctrl_c.problems == []
    assert err["code"] == "GPU_ABANDONED" and "Ctrl-C" in err["message"]
    old = c.backend.proc
    r = c.ok("reset")
    assert old.poll() is not None  # the hung worker is gone
    assert r["kernels"] == ["forever"] and r["unfinished"] == [{"op": "kernel forever", "stream": "0"}]
    assert checksums(c, ["p"]) == before
    c.ok("memset zero 1; launch forever zero grid 1 block 1; sync")  # the flag is set: it ends at once


@pytest.mark.gpu
def test_exit_after_a_fault_or_a_hang_leaves_no_process_and_frees_the_device(request):
    from tests.conftest import Cush, make_backend

    probe = make_backend("cuda")
    free_before = probe.mem_info()[0]
    for trouble in ("fault", "hang"):
        c = Cush(make_backend("cuda"))
        c.ok("alloc device 512MB; alloc pinned 64MB as p; alloc managed 64MB")
        if trouble == "fault":
            fault(c)
        else:
            c.ok("set gpu-timeout 0.5; launch spin 5000000")
            assert c.fails("sync")["code"] == "GPU_ABANDONED"
        proc = c.backend.proc
        c.shell.close()
        assert proc.poll() is not None
    assert abs(probe.mem_info()[0] - free_before) <= (64 << 20)
    probe.close()

"""Contexts (issue 14): several on one GPU, what each reaches, and GPU N's primary context through `device use N`.
The same scenarios run on the simulator and on the GPU; the no-UVA rules run on the simulator's teaching profile."""

from __future__ import annotations

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend


def _floats(cush, name, n=4):
    return cush.ok(f"show {name} dtype float32 count {n}")["values"]


def test_a_second_context_reaches_default_and_portable_pinned_memory_under_uva(cush):
    cush.ok("alloc pinned 4MB as plain; alloc pinned 4MB portable as port; alloc device 4MB as d0")
    cush.ok("fill plain iota dtype float32; fill port iota dtype float32")
    made = cush.ok("context create as other")
    assert (made["name"], made["kind"], made["current"]) == ("other", "created", True)
    listed = {c["name"]: c for c in cush.ok("contexts")["contexts"]}
    assert listed["gpu0"]["buffers"] == ["plain", "port", "d0"] and listed["other"]["buffers"] == []
    assert listed["other"]["current"] and not listed["gpu0"]["current"]
    for name in ("plain", "port"):  # the same address in both contexts, as the driver says it
        info = cush.ok(f"info {name}")
        reach = {r["context"]: r["reaches"] for r in info["reach"]}
        assert reach == {"gpu0": info["host_ptr"], "other": info["host_ptr"]}
    cush.ok("launch increment plain; launch increment port; sync")  # kernels in `other` use them
    assert _floats(cush, "plain") == [1.0, 2.0, 3.0, 4.0] and _floats(cush, "port") == [1.0, 2.0, 3.0, 4.0]
    d1 = cush.ok("alloc device 4MB as d1")["buffer"]
    assert d1["context"] == "other"
    cush.ok("memcpy h2d plain d1; launch increment d0; memcpy d2h d1 port")  # d0 is gpu0's: reached under UVA
    assert cush.ok("compare plain port")["equal"]


def test_events_belong_to_their_context_and_a_context_is_destroyed_once_empty(cush):
    cush.ok("context create as other; stream create as s1; event record e1 stream s1")
    assert cush.ok("streams")["streams"][-1]["context"] == "other"
    cush.ok("context use gpu0")
    error = cush.fails("event record e1")  # gpu0's default stream, other's event: the driver's refusal
    assert error["code"] == "CUDA_ERROR_INVALID_HANDLE"
    assert cush.ok("event record e1 stream s1")["stream"] == "s1"  # its own context's stream, from anywhere
    error = cush.fails("context destroy other")
    assert error["code"] == "CONTEXT_IN_USE" and "s1" in error["message"] and "e1" in error["message"]
    assert cush.fails("context destroy gpu0")["code"] == "USAGE"
    cush.ok("stream destroy s1; event destroy e1")
    assert cush.ok("context destroy other")["action"] == "destroyed"
    assert [c["name"] for c in cush.ok("contexts")["contexts"]] == ["gpu0"]
    assert cush.fails("context use other")["code"] == "NO_SUCH_CONTEXT"


def test_each_context_has_its_own_default_stream(cush):
    cush.ok("alloc pinned 1MB as h; alloc device 1MB as d; context create as other")
    t = cush.ok("memcpy h2d h d async")
    assert t["stream"] == "other:0"
    assert {s["name"] for s in cush.ok("streams")["streams"]} >= {"0", "other:0"}


def test_without_uva_default_pinned_memory_is_mapped_only_in_its_own_context(no_uva):
    c = no_uva
    c.ok("alloc pinned 64MB mapped as plain; alloc pinned 64MB mapped portable as port; alloc device 4MB as d0")
    c.ok("context create as other")
    reach = {r["context"]: r["reaches"] for r in c.ok("info plain")["reach"]}
    assert reach["gpu0"].startswith("0x") and reach["other"] == "CUDA_ERROR_INVALID_VALUE"
    assert all(r["reaches"].startswith("0x") for r in c.ok("info port")["reach"])
    error = c.fails("launch increment plain")
    assert error["code"] == "CUDA_ERROR_INVALID_VALUE" and "portable" in error["hint"]
    c.ok("launch increment port")
    assert c.fails("launch increment d0")["code"] == "OTHER_CONTEXT"  # gpu0's device memory
    c.ok("alloc device 64MB as d1")
    staged, pinned = c.ok("memcpy h2d plain d1")["gbps"], c.ok("memcpy h2d port d1")["gbps"]
    assert pinned > 3 * staged  # the default buffer is pageable to `other`: staged through the host
    c.ok("context use gpu0")
    assert c.ok("memcpy h2d plain d0[0:4MB]")["gbps"] > 3 * staged  # pinned for the context that made it


def test_device_use_moves_new_work_to_the_other_gpu(two):
    first = two.ok("device use 1")
    assert (first["name"], first["kind"], first["device"]) == ("gpu1", "primary", 1)
    two.ok("alloc pinned 4MB as h; fill h iota dtype float32; alloc device 4MB as d1; stream create as s1")
    assert two.buffer("d1")["device"] == 1 and two.ok("streams")["streams"][-1]["context"] == "gpu1"
    two.ok("memcpy h2d h d1 async stream s1; launch increment d1 stream s1; memcpy d2h d1 h async stream s1; "
           "sync stream s1")
    assert _floats(two, "h") == [1.0, 2.0, 3.0, 4.0]
    two.ok("device use 0; alloc device 4MB as d0")
    assert two.buffer("d0")["device"] == 0
    assert two.fails("launch increment d0 stream s1")["code"] == "NO_PEER_ACCESS"  # s1 is GPU 1's
    two.ok("peer enable 1 0; launch increment d0 stream s1; sync stream s1")
    two.ok("context create device 1 as c1")  # not GPU 1's primary: peer access is not its
    error = two.fails("launch increment d0")
    assert error["code"] == "NO_PEER_ACCESS" and "device use 1" in error["hint"]
    two.ok("context use gpu0; stream destroy s1")


def test_reset_makes_every_context_again_with_what_lives_in_it(cush):
    cush.ok("alloc pinned 1MB as h; fill h iota dtype float32; context create as other; alloc pinned 1MB as mine; "
            "fill mine 2.0 dtype float32; stream create as s1")
    done = cush.ok("reset")
    assert {b["name"]: b["contents"] for b in done["buffers"]} == {"h": "kept", "mine": "kept"}
    assert cush.ok("contexts")["current"] == "other" and cush.buffer("mine")["context"] == "other"
    cush.ok("launch increment mine stream s1; sync stream s1")
    assert _floats(cush, "mine", 2) == [3.0, 3.0]


def test_a_demo_leaves_the_contexts_as_they_were(cush):
    cush.ok("context create as mine; alloc pinned 1MB as p")
    assert all(o["ok"] for o in cush.run("demo portable"))
    listed = cush.ok("contexts")
    assert [c["name"] for c in listed["contexts"]] == ["gpu0", "mine"] and listed["current"] == "mine"
    assert cush.buffer("p")["context"] == "mine"


def test_the_portable_demo_shows_the_pre_uva_rule_on_the_teaching_profile():
    import io

    from cudashell.frontends.shell import Shell

    out, err = io.StringIO(), io.StringIO()
    sh = Shell(SimBackend(Profile.load("two-gpus-no-uva")), out=out, err=err)
    assert sh.execute("demo portable") is True, err.getvalue()
    text = out.getvalue()
    assert "kernel in second  CUDA_ERROR_INVALID_VALUE" in text  # the default buffer, in the second context
    sh.close()


def test_repeat_runs_its_plan_only_on_the_current_contexts_streams(cush):
    cush.ok("alloc pinned 1MB as d; context create as other; stream create as s1")
    planned = cush.ok("repeat 5 <<< launch increment d stream s1 >>>")
    assert planned["through_shell"] is None and planned["plan"]["rounds"] == 4
    cush.ok("context use gpu0")
    shell = cush.ok("repeat 5 <<< launch increment d stream s1 >>>")
    assert "another context" in shell["through_shell"]
    cush.ok("sync stream s1")
    assert cush.ok("show d dtype float32 count 1")["values"] == [10.0]


def test_if_gpus_runs_its_block_only_where_there_are_enough(cush, pair):
    have = len(cush.ok("devices")["devices"])
    skipped = cush.ok(f"if gpus {have + 1} <<< alloc pinned 1MB as never >>>")
    assert not skipped["runs"] and "skipped" in skipped["text"]
    assert "never" not in {b["name"] for b in cush.ok("ls")["buffers"]}
    ran = pair.ok("if gpus 2 <<< device use 1; alloc device 1MB as d1; device use 0 >>>")
    assert ran["runs"] and pair.buffer("d1")["device"] == 1
    error = pair.fails("if gpus 2 <<< device use 1; alloc device 1MB as d1 >>>")  # d1 exists: NAME_TAKEN
    assert error["code"] == "SCRIPT_FAILED" and "alloc device 1MB as d1" in error["message"]


def test_completion_offers_the_contexts_by_name(cush):
    from cudashell.language.suggest import suggest

    cush.ok("context create as mine")
    offered = [s.text for s in suggest("context use ", cush.shell.session)]
    assert offered == ["gpu0", "mine"]
    assert {"context create", "context use", "contexts"} <= {s.text for s in suggest("cont", cush.shell.session)}
    assert [s.text for s in suggest("device ", cush.shell.session)] == ["use"]  # `device` alone is a command too


def test_streams_asks_each_contexts_default_stream_in_its_own_context(cush):
    cush.ok("alloc pinned 1MB as h; context create as other; launch spin 20000")  # other's default stream: busy
    cush.ok("context use gpu0")
    rows = {r["name"]: r["idle"] for r in cush.ok("streams")["streams"]}
    assert rows == {"0": True, "other:0": False}
    assert cush.ok("contexts")["current"] == "gpu0"
    cush.ok("context use other; sync")

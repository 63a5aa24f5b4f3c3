"""calibrate: measure the figures a simulator profile holds, so a teacher can calibrate on the lab GPU
and teach on laptops (`--sim-profile FILE`)."""

from __future__ import annotations

import json
import statistics
from dataclasses import fields
from typing import NotRequired, TypedDict

from ..backends.base import UNLIMITED
from ..backends.profile import Profile
from ..language.grammar import Arg, Opt
from ..language.registry import command
from ..model.kernels import BUILTINS
from ..model.launchdims import dim3
from ..model.scratch import Progress, Scratch, refuse_held
from ..output.files import replace_file
from ..output.render import fmt_seconds
from ..output.results import Result

SIZE = 64 << 20
REPS = 5
MIB = 1 << 20


def gpu_seconds(backend, t) -> float:
    if t.seconds is not None:
        return t.seconds
    backend.device_sync()
    return backend.resolve(t.token)[0]


def gate(backend, us: int = 3000) -> None:
    """Hold the default stream with a spin kernel, so what is queued next runs back to back on the GPU and
    its events time the GPU's work, not the host's pace of issuing it."""
    import numpy as np

    backend.launch(BUILTINS["spin"], [np.int64(us)], 1, dim3(1), dim3(1), 0, None)


def queued_seconds(backend, issue, reps: int) -> float:
    """Per operation, GPU time of `reps` operations queued back to back while the stream is held (`hold`: a spin
    kernel as the gate ran out before 50 issues through the worker had gone by, and the copies then ran at the
    host's pace — 23 µs a 4-byte copy where the engine takes 5): the engine time the simulator's queue model needs
    (a lone synchronous call adds its own round trip on top)."""
    backend.hold([None])
    try:
        times = [issue() for _ in range(reps)]
    finally:
        backend.release()
    backend.device_sync()
    spans = [(t.start, t.end) if t.seconds is not None and t.start is not None else backend.resolve(t.token)[1:]
             for t in times]
    return (spans[-1][1] - spans[0][0]) / reps


def copy_rate(backend, src, dst, latency: float, nbytes: int = SIZE) -> float:
    """Bytes per second once the fixed cost of a copy is paid, as the default profile models a copy:
    latency + bytes / rate."""
    gpu_seconds(backend, backend.memcpy(src, 0, dst, 0, nbytes, None, False))  # warm-up
    t = statistics.median(gpu_seconds(backend, backend.memcpy(src, 0, dst, 0, nbytes, None, False))
                          for _ in range(REPS))
    return nbytes / max(t - latency, 1e-9)


def launch_sum(backend, a, b, c, n: int, grid: int, block: int):
    return backend.launch(BUILTINS["sum"], [a.whole(), b.whole(), c.whole()], n, dim3(grid), dim3(block), 0, None)


def kernel_seconds(backend, a, b, c, n: int) -> float:
    grid = -(-n // 256)
    return statistics.median(queued_seconds(backend, lambda: launch_sum(backend, a, b, c, n, grid, 256), 4)
                             for _ in range(3))


def kernel_read_rate(backend, a, b, c, n: int, latency: float, write_rate: float | None = None) -> float:
    """Bytes per second a streaming kernel reads from a and b (n floats each) while writing n floats to c,
    the write's own time (at write_rate, when known) taken out."""
    t = kernel_seconds(backend, a, b, c, n) - latency - (n * 4 / write_rate if write_rate else 0)
    return (2 if write_rate else 3) * n * 4 / max(t, 1e-9)


def kernel_floor(backend, a, b, latency: float, rate: float) -> float:
    """What a small streaming kernel (2^20 floats) takes beyond its launch and its bytes at the streaming rate:
    the ramp of a grid that never fills the GPU for long. The simulator adds it to users' kernels."""
    n = 1 << 20
    return max(kernel_seconds(backend, a, b, a, n) - latency - 3 * n * 4 / rate, 0.0)


CURVE_SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20)


def narrow_row(backend, pinned, dev, rows: int = 4096) -> float:
    """What a row narrower than a sector adds to a 2-D copy (profile.copy_narrow_row): `rows` rows of 4 B from packed
    pinned memory to rows 512 B apart on the device (cudaMemcpy2DAsync, as the H100 was measured: 16.9 µs), less a
    contiguous copy of the same bytes, per row; both queued back to back behind a hold."""
    shaped = queued_seconds(backend, lambda: backend.memcpy_shaped(pinned, 0, 4, rows, dev, 0, 512, rows, 4, rows, 1,
                                                                   None, True), REPS)
    whole = queued_seconds(backend, lambda: backend.memcpy(pinned, 0, dev, 0, 4 * rows, None, True), REPS)
    return max(0.0, (shaped - whole) / rows)


def copy_curve(backend, src, dst, queued: bool) -> list[list[float]]:
    """[[bytes, seconds], …] from 4 KiB to 256 MiB: small copies are latency-bound (a small pageable copy
    costs far more per byte than a large one), large ones bandwidth-bound. Copies the GPU queues (pinned,
    device) are timed back to back behind a gate; pageable ones, which the host stages, one call at a time,
    each from a part of the buffer not copied before (as a script's copies mostly are)."""
    points = []
    for nbytes in CURVE_SIZES:
        reps = REPS if nbytes < SIZE else 3
        if queued:
            t = queued_seconds(backend, lambda: backend.memcpy(src, 0, dst, 0, nbytes, None, True), reps)
        else:
            spots = max(1, min(src.size, dst.size) // nbytes)
            t = statistics.median(
                gpu_seconds(backend, backend.memcpy(src, i % spots * nbytes, dst, i % spots * nbytes, nbytes,
                                                    None, False)) for i in range(reps))
        points.append([nbytes, t])
    return points


def engine_switch(backend, pinned, dev, h2d: float, d2h: float) -> float:
    """What a stream adds when its next operation runs on another engine (H2D then D2H)."""
    pair = queued_seconds(backend, lambda: (backend.memcpy(pinned, 0, dev, 0, 4, None, True),
                                            backend.memcpy(dev, 0, pinned, 0, 4, None, True))[1], 50)
    return max((pair - h2d - d2h) / 2, 0.0)


def shell_overhead(backend, src, dst) -> tuple[float, float]:
    """(the host cost of queueing one async call, the shell's own time around each command): measured by a
    shell running a `repeat` of async 4-byte copies. The simulator adds them to its clock, so the gaps between
    commands in a script are as long as on this GPU."""
    import io

    from ..frontends.shell import Shell

    shell = Shell(backend, out=io.StringIO(), err=io.StringIO())
    for b in (src, dst):
        shell.session.buffers[b.name] = b
    per = {}
    try:
        raw = statistics.median(backend.memcpy(src, 0, dst, 0, 4, None, True).host_seconds for _ in range(200))
        gate(backend, 20000)  # the copies queue behind it
        t0 = backend.clock()
        shell.execute(f"repeat 200 shell <<< memcpy {src.name} {dst.name} 4 async >>>")
        per = (backend.clock() - t0) / 200
        backend.device_sync()
    finally:
        shell.session.buffers.clear()
    return raw, max(per - raw, 0.0)


def sync_latency(backend, launch: float) -> float:
    """What a blocking wait costs beyond the work: an empty kernel's launch + cudaStreamSynchronize, less the launch
    call alone and the kernel's GPU time (`launch`) — the round trip from the kernel's end to the host going on,
    which the simulator adds to every wait. Rounds run on the GPU side (as `bench latency`'s), few enough that
    launches alone never fill the GPU's queue."""
    import numpy as np

    spin = ["launch", (BUILTINS["spin"], [np.int64(0)], 1, dim3(1), dim3(1), 0, None)]

    def per_round(calls) -> float:
        backend.run_plan(calls, 20, trace=False)  # warm-up
        return backend.run_plan(calls, 200, trace=False)["per_round"]["median"]

    return max(per_round([spin, ["stream_sync", (None,)]]) - per_round([spin]) - launch, 0.0)


def alloc_figures(backend, ctx, size: int = SIZE) -> dict:
    """What allocating and freeing cost the host: cudaMalloc of `size` as `alloc` reports it (timed beside the
    driver); cudaFree (a fixed cost), cudaFreeHost, cudaHostRegister and cudaHostUnregister (per MiB), which report
    no time of their own, as `bench alloc` times them: the host's clock around the call (on a GPU the worker's
    pipe, some 20 µs, is in it)."""
    def timed(call) -> float:
        t0 = backend.clock()
        call()
        return backend.clock() - t0

    with Scratch(backend, ctx) as s:
        dev, device_alloc = s.alloc("device", size)
        pinned, _ = s.alloc("pinned", size)
        pageable, _ = s.alloc("pageable", size)
        register = timed(lambda: s.register(pageable))
        unregister = timed(lambda: s.unregister(pageable))
        device_free = timed(lambda: s.free(dev))
        pinned_free = timed(lambda: s.free(pinned))
    mib = size / MIB
    return {"device_alloc": device_alloc, "device_free": device_free, "pinned_free_per_mib": pinned_free / mib,
            "register_per_mib": register / mib, "unregister_per_mib": unregister / mib}


POOL_SMALL, POOL_BIG, POOL_BLOCK, POOL_GRANULE = 64 << 20, 256 << 20, 4 << 10, 2 << 20
LEAST = 1e-7  # a fitted cost never under 0.1 µs: two noisy times can fit a part below zero, which no profile takes


def pool_figures(backend, device: int) -> dict:
    """The stream-ordered allocator's host times, on a pool of calibrate's own (threshold 0, as a default pool is):
    its first mapping of 64 MiB; mapping 2 MiB (one granule) and 256 MiB again after a synchronize gave them back
    (the fixed part, and the part per MiB); a 4 KiB block freed on the stream and taken again (reuse); 64 MiB a pool
    kept idle at threshold max (warm). Each is the whole call's host time, as `alloc … async` reports it, the median
    of three where a single time is a few µs (one took 154 µs on the H100)."""
    with Scratch(backend, None) as s:
        pool = s.pool(device)

        def alloc(size: int):
            return s.alloc_async(size, pool, device)

        def given_back(buf) -> None:
            s.free_async(buf)
            backend.device_sync()

        def median_of_three(size: int, taken) -> float:
            """The median host time of three allocations of `size`, each made by `taken`."""
            times = []
            for _ in range(3):
                buf, t = taken(size)
                given_back(buf)
                times.append(t)
            return statistics.median(times)

        def reused(size: int):  # a block freed on the stream, taken again at once
            buf, _ = alloc(size)
            s.free_async(buf)
            return alloc(size)

        buf, first = alloc(POOL_SMALL)
        given_back(buf)
        small, big = median_of_three(POOL_GRANULE, alloc), median_of_three(POOL_BIG, alloc)
        reuse = median_of_three(POOL_BLOCK, reused)
        backend.pool_set(pool, "threshold", UNLIMITED)
        given_back(alloc(POOL_SMALL)[0])
        warm = median_of_three(POOL_SMALL, alloc)  # the pool keeps what each gives back
    per_mib = max(LEAST, (big - small) / ((POOL_BIG - POOL_GRANULE) / MIB))
    return {"pool_reuse": reuse, "pool_warm": warm,
            "pool_first_map": max(LEAST, first - reuse - per_mib * POOL_SMALL / MIB),
            "pool_map_again": max(LEAST, small - reuse - per_mib * POOL_GRANULE / MIB), "pool_map_per_mib": per_mib}


def host_figures(backend, pageable, other, pinned, wc) -> dict:
    """The host's own data work per host-memory kind (profile.host_*), through the same calls `fill`, `compare` and
    `checksum` make, on buffers of equal bytes (so a compare reads them whole): writes as a constant `fill`; reads
    as `compare` against a second pageable buffer, that buffer's share taken out (pageable against pageable first);
    what `checksum`'s arithmetic and `fill random`'s generator add beyond their reads and writes."""
    n = pageable.size

    def host(call) -> float:
        call()  # warm-up: first touches
        return statistics.median(call().host_seconds for _ in range(3))

    def timing(result):
        return result[1] if isinstance(result, tuple) else result

    figures = {}
    for name, buf in (("pageable", pageable), ("pinned", pinned), ("writecombined", wc)):
        figures[f"host_write_{name}"] = n / host(lambda buf=buf: backend.host_fill(buf, 1, "uint8", 0))
    per_byte = host(lambda: timing(backend.host_compare(pageable, 0, other, 0, n))) / n
    figures["host_read_pageable"] = 2 / per_byte
    for name, buf in (("pinned", pinned), ("writecombined", wc)):
        alone = host(lambda buf=buf: timing(backend.host_compare(buf, 0, other, 0, n))) / n - per_byte / 2
        figures[f"host_read_{name}"] = 1 / max(alone, 1e-12)
    summing = host(lambda: timing(backend.host_checksum(pageable))) / n - per_byte / 2
    figures["host_checksum"] = 1 / max(summing, 1e-12)
    generating = host(lambda: backend.host_fill(pageable, "random", "uint64", 1)) - n / figures["host_write_pageable"]
    figures["host_random"] = n / max(generating, 1e-9)
    return figures


PEER_SMALL, PEER_BIG = 64 << 10, 256 << 20


def peer_figures(backend) -> dict:
    """How many GPUs, and on two or more how the first pair is joined: peer access, the link's name, and
    cudaMemcpyPeer's rate with peer access on (fitted between a 64 KiB and a 256 MiB copy, with its latency) and
    off (staged through the host: the large copy's rate). Every pair is modeled alike."""
    topo = backend.devices()
    figures = {"gpus": len(topo["devices"])}
    if len(topo["devices"]) < 2:
        return figures
    pair = topo["peers"][0]
    src, dst, access = pair["src"], pair["dst"], pair["access"]
    small, big = (backend.peer_copy(src, dst, n, 10, access) for n in (PEER_SMALL, PEER_BIG))
    rate = (PEER_BIG - PEER_SMALL) / max(big - small, 1e-12)
    staged = backend.peer_copy(src, dst, PEER_BIG, 5, False)
    return {**figures, "peer_access": access, "peer_link": pair["link"], "peer_latency": max(small - PEER_SMALL / rate, 0.0),
            "peer_rate": rate if access else PEER_BIG / staged, "peer_staged_rate": PEER_BIG / staged}


def zero_copy_reachable(backend) -> bool:
    """Whether a kernel can read pinned memory allocated without `mapped`: only under unified addressing (without
    it the memory has no device address, and a kernel given one would fault and take the context with it)."""
    return bool(backend.info.unified_addressing)


SKIPPED_ZERO_COPY = ("kernel_zero_copy_read", "not measured: without unified addressing pinned memory is not "
                     "mapped for kernels; a profile made from this keeps the default figure")

STEPS = 15  # the progress line's steps in `measure`: one per figure or curve measured


def measure(backend, ctx, device: int, progress: Progress) -> dict:
    with Scratch(backend, ctx) as s:
        pinned, t_pin = s.alloc("pinned", SIZE)
        big = 256 << 20
        pin_big, _ = s.alloc("pinned", big)
        wc, _ = s.alloc("pinned", big, {"writecombined"})
        pageable, _ = s.alloc("pageable", big)
        pageable2, _ = s.alloc("pageable", big)
        dev, _ = s.alloc("device", big)
        dev2, _ = s.alloc("device", big)
        for buf in (pinned, wc, pageable, pin_big, pageable2):
            s.fill_ones(buf)
        small = statistics.median(backend.memcpy(pinned, 0, dev, 0, 4, None, False).seconds for _ in range(200))
        queued_small = queued_seconds(backend, lambda: backend.memcpy(pinned, 0, dev, 0, 4, None, True), 50)
        queued_d2h = queued_seconds(backend, lambda: backend.memcpy(dev, 0, pinned, 0, 4, None, True), 50)
        progress.step()
        latency = kernel_seconds(backend, dev, dev, dev2, 1)
        sync = sync_latency(backend, latency)
        progress.step()
        api, overhead = shell_overhead(backend, pin_big, dev)
        progress.step()
        n = SIZE // 4
        curves = {}
        for path, src, dst, queued in (("pinned h2d", pin_big, dev, True), ("pinned d2h", dev, pin_big, True),
                                       ("writecombined h2d", wc, dev, True), ("pageable h2d", pageable, dev, False),
                                       ("pageable d2h", dev, pageable, False), ("d2d", dev, dev2, True),
                                       ("h2h", pageable, pageable2, False)):
            curves[path] = copy_curve(backend, src, dst, queued)
            progress.step()
        figures = {
            "pinned_h2d": copy_rate(backend, pinned, dev, small),
            "pinned_d2h": copy_rate(backend, dev, pinned, small),
            "writecombined_h2d": copy_rate(backend, wc, dev, small),
            "pageable_h2d": copy_rate(backend, pageable, dev, small),
            "pageable_d2h": copy_rate(backend, dev, pageable, small),
            "d2d": 2 * copy_rate(backend, dev, dev2, small),
            "copy_latency": queued_small, "copy_narrow_row": narrow_row(backend, pin_big, dev), "sync_latency": sync,
            "engine_switch": engine_switch(backend, pinned, dev, queued_small, queued_d2h),
            "launch_latency": latency, "async_call": api, "shell_overhead": overhead,
            "pinned_alloc_per_mib": t_pin / (SIZE / MIB),
        }
        progress.step()
        figures["kernel_device_read"] = device_read = kernel_read_rate(backend, dev, dev2, dev, n, latency)
        if zero_copy_reachable(backend):
            figures["kernel_zero_copy_read"] = kernel_read_rate(backend, pinned, wc, dev2, n, latency, device_read)
        figures.update(kernel_floor=kernel_floor(backend, dev, dev2, latency, device_read), copy_curves=curves)
        progress.step()
        figures.update(host_figures(backend, pageable, pageable2, pin_big, wc))
        progress.step()
    figures.update(alloc_figures(backend, ctx))
    figures.update(pool_figures(backend, device))
    progress.step()
    figures.update(peer_figures(backend))
    progress.step()
    return figures


@command("calibrate", "session", "measure this device's figures and write them as a simulator profile",
         "calibrate out lab-gpu.json", "cudaMemcpy / cudaHostAlloc / kernel launches, timed with events",
         opts=(Opt("out", Arg("FILE", "written-file")),),
         details="Measures a size curve (4 KiB … 256 MiB) for pinned, write-combined and pageable copies each "
                 "way, device-to-device and host-to-host; the latency of a 4-byte copy and of a launch; what each "
                 "narrow row adds to a 2-D copy (4096 rows of 4 B against 16 KiB in one piece); what a "
                 "synchronize costs beyond the work (an empty kernel's launch + sync, less the call and the kernel); "
                 "the host cost of an async call and the shell's own time per command; what cudaMalloc, cudaFree, "
                 "pinning, registering and their undoing cost (per MiB where it grows with size); "
                 "what the stream-ordered allocator's calls cost (a block reused on its stream, a warm pool, a pool "
                 "mapping memory the first time and again, per MiB); "
                 "what a kernel reads per second from device and from zero-copy memory (without unified "
                 "addressing pinned memory is not mapped for kernels: that figure is left out, and said); how fast "
                 "the host's own `fill`, `compare`, `checksum` and `fill random` go on pageable, pinned and "
                 "write-combined memory; with two or more GPUs, "
                 "cudaMemcpyPeer's rates with peer access on and off between the first pair. `cudashell "
                 "--sim-profile FILE` then models timings with them.", exported=False)
def calibrate(session, backend, args):
    refuse_held(session, "calibrate, which frees what it made and waits for its work,")
    info = backend.info
    progress = Progress(session, STEPS, "calibrate")
    try:
        figures = measure(backend, session.context.handle, session.context.device, progress)
    finally:
        progress.close()
    known = {f.name for f in fields(Profile)}
    profile = {"name": f"{info.name} (calibrated)", "compute_capability": info.compute_capability,
               "pci_bus_id": info.pci_bus_id, "device_memory": info.total_mem,
               "unified_addressing": info.unified_addressing, "can_map_host_memory": info.can_map_host_memory,
               "pageable_memory_access": info.pageable_memory_access, "managed_memory": info.managed_memory,
               "concurrent_managed_access": info.concurrent_managed_access,
               "async_engine_count": info.async_engine_count, "concurrent_kernels": info.concurrent_kernels,
               **figures}
    least, greatest = backend.priority_range()
    profile.update(priority_least=least, priority_greatest=greatest)
    assert set(profile) <= known
    path = args.get("FILE")
    if path:
        replace_file(path, json.dumps(profile, indent=2) + "\n", args.col("FILE"))  # whole, or as it was
    skipped = dict([SKIPPED_ZERO_COPY]) if "kernel_zero_copy_read" not in figures else {}
    return Calibration({"profile": profile, "path": path, "timing": backend.timing_label, "skipped": skipped})


# ------------------------------------------------------------------ the results of these commands
class CalibrateDataProfile(TypedDict):
    name: str
    compute_capability: str
    pci_bus_id: str
    device_memory: int
    unified_addressing: bool
    can_map_host_memory: bool
    pageable_memory_access: bool
    managed_memory: bool
    concurrent_managed_access: bool
    async_engine_count: int
    concurrent_kernels: bool
    pinned_h2d: float
    pinned_d2h: float
    writecombined_h2d: float
    pageable_h2d: float
    pageable_d2h: float
    d2d: float
    copy_latency: float
    copy_narrow_row: float
    sync_latency: float
    engine_switch: float
    launch_latency: float
    async_call: float
    shell_overhead: float
    pinned_alloc_per_mib: float
    device_alloc: float
    device_free: float
    pinned_free_per_mib: float
    register_per_mib: float
    unregister_per_mib: float
    pool_reuse: float
    pool_warm: float
    pool_first_map: float
    pool_map_again: float
    pool_map_per_mib: float
    kernel_device_read: float
    kernel_zero_copy_read: NotRequired[float]  # left out where it was not measured (CalibrateData.skipped)
    kernel_floor: float
    host_read_pageable: float
    host_read_pinned: float
    host_read_writecombined: float
    host_write_pageable: float
    host_write_pinned: float
    host_write_writecombined: float
    host_checksum: float
    host_random: float
    copy_curves: dict[str, list[list[float]]]
    gpus: int
    peer_access: NotRequired[bool]  # with two GPUs or more: the first pair's copies (peer_figures)
    peer_link: NotRequired[str]
    peer_latency: NotRequired[float]
    peer_rate: NotRequired[float]
    peer_staged_rate: NotRequired[float]
    priority_least: int
    priority_greatest: int


class CalibrateData(TypedDict):
    profile: CalibrateDataProfile
    path: str | None  # the file written (`out FILE`), or None
    timing: str
    skipped: dict[str, str]  # a figure not measured on this device → why (the profile leaves it out)


class Calibration(Result, kind="calibrate"):
    Data = CalibrateData

    def text(self):
        d = self.data
        p = d["profile"]
        out = [f"{p['name']} — figures {d['timing']}" + (f", written to {d['path']}" if d["path"] else "")]
        for key, value in p.items():
            if key.endswith(("_h2d", "_d2h", "d2d", "_read")) or key.startswith("host_"):
                out.append(f"  {key:<24} {value / 1e9:10.2f} GB/s")
            elif key.endswith("_row"):  # nanoseconds: a few a row
                out.append(f"  {key:<24} {value * 1e9:10.2f} ns")
            elif key.endswith(("latency", "per_mib", "_alloc", "_free")) or key.startswith("pool_"):
                out.append(f"  {key:<24} {fmt_seconds(value):>13}")
        out += [f"  {key:<24} {why}" for key, why in d.get("skipped", {}).items()]
        if d["path"]:
            out.append(f"use it with: cudashell --sim-profile {d['path']}")
        return out

"""bench memcpy | latency | alloc | zerocopy | overlap: measured on a GPU, modeled on the simulator, and said
so. Method as bandwidth tools (nvbandwidth) do it: a warm-up; the operations issued as one plan on the GPU side
(`Backend.run_plan`: a loop of driver calls, no shell between them) while the streams are held, so the GPU runs
them back to back; timed from the first start to the last end (CUPTI's records, or events around them);
buffers rotated so caches do not flatter."""

from __future__ import annotations

import statistics
from contextlib import closing
from typing import NotRequired, TypedDict

from ..backends.base import UNLIMITED
from ..errors import ShellError, usage
from ..language.grammar import Arg, Flag, Opt
from ..language.registry import command
from ..model.kernels import BUILTINS
from ..model.launchdims import dim3
from ..model.machine import pcie_peak
from ..model.scratch import Progress, Scratch, refuse_held
from ..output.figures import bench_figure, close, save
from ..output.files import replace_file
from ..output.render import csv_records, fit, fmt_seconds, host_table
from ..output.results import Result
from ..sizes import format_size, parse_size

MEMCPY_KINDS = ("pageable", "pinned", "writecombined", "registered", "mapped", "managed")
ALLOC_KINDS = ("pageable", "pinned", "portable", "mapped", "writecombined", "registered", "device", "managed", "async",
               "async-warm")
DIRECTIONS = ("h2d", "d2h", "d2d", "bidir")


def parse_sizes(text: str, col: int, default: list[int]) -> list[int]:
    """`4KB..64MB` (powers of two in between) or `4KB,1MB,64MB`."""
    if text is None:
        return default
    if ".." in text:
        lo, hi = (parse_size(x, col) for x in text.split("..", 1))
        if not 0 < lo <= hi:
            raise usage(f"empty size range {text}", col)
        out, n = [], lo
        while n <= hi:
            out.append(n)
            n *= 2
        return out
    return [parse_size(x, col) for x in text.split(",") if x]


def timed_batch(backend, calls: list, gate: bool = True, rounds: int = 1) -> float:
    """GPU seconds of `rounds` rounds of the calls, issued on the GPU side; `gate`: held until all are queued."""
    return backend.run_plan(calls, rounds, gate, trace=False)["gpu_seconds"]


def _us(n: int):
    import numpy as np

    return np.int64(n)


def _copy_calls(backend, s: Scratch, kind: str, direction: str, size: int, streams) -> list:
    """One round of a batch: a copy from each of two rotating buffer pairs (each direction for bidir)."""
    if direction != "d2d":  # the two host buffers written; what a copy makes where it lands, it reserves itself
        backend.room(2 * size)
    dev = [s.alloc("device", size)[0] for _ in range(2)]
    if direction == "d2d":
        return [["memcpy", (dev[i], 0, dev[1 - i], 0, size, None, True)] for i in range(2)]
    host = []
    for _ in range(2):
        if kind == "registered":
            buf = s.alloc("pageable", size)[0]
            s.register(buf)
        elif kind in ("pinned", "writecombined", "mapped"):
            buf = s.alloc("pinned", size, {"writecombined"} if kind == "writecombined" else {"mapped"} if kind == "mapped" else set())[0]
        else:
            buf = s.alloc(kind, size)[0]
        s.fill_ones(buf)
        host.append(buf)
    n = size // 4

    def one(i, d) -> list:
        h, g = host[i], dev[i]
        src, dst = (h, g) if d == "h2d" else (g, h)
        if kind == "mapped":  # a kernel's threads do the copy through the mapped pointer
            return [["launch", (BUILTINS["copy"], [src.whole(), dst.whole()], n, dim3(-(-n // 256)), dim3(256), 0,
                                streams[d])]]
        if kind == "managed":  # pages must move every time: there and back, both counted
            first, back = ("device", "host") if d == "h2d" else ("host", "device")
            return [["prefetch", (h, first, streams[d])], ["prefetch", (h, back, streams[d])]]
        return [["memcpy", (src, 0, dst, 0, size, streams[d], True)]]

    dirs = ("h2d", "d2h") if direction == "bidir" else (direction,)
    return [call for i in range(2) for d in dirs for call in one(i, d)]


# Pageable copies cannot be held: the host stages them through the driver's few pinned buffers, and waits for
# the stream when those are full (or, into pageable memory, for the copy itself) — held, that wait never ends.
# They run as issued, from the GPU side's loop of driver calls. Managed prefetches migrate through the host's
# page tables the same way.


def copies_per_batch(size: int) -> int:
    """Enough copies that a batch lasts well beyond the timer's resolution (256 MiB worth, at least 8), and few
    enough to wait behind a gate: on the H100 with CUPTI tracing, a thousand 64 KiB copies held blocked the call
    issuing them (its record buffer was full). 128 copies of 4 KiB last ~0.3 ms."""
    return max(8, min(128, (256 << 20) // size))


def _peak(backend, direction: str) -> tuple[float | None, str]:
    paths = backend.memory_paths()
    if direction == "d2d":
        return paths["hbm_peak"], "HBM peak (read + write counted)"
    link = paths["pcie"]
    if not link or not link.get("current_gen"):
        return None, "link unknown"
    peak = pcie_peak(link["current_gen"], link["current_width"])
    what = f"PCIe Gen{link['current_gen']} x{link['current_width']}"
    return (2 * peak, what + ", both directions") if direction == "bidir" else (peak, what + " per direction")


def _stopped(error: ShellError, rows: list, bench: str, at: str) -> dict:
    """A bench's point `at` refused (the simulator's RAM budget, the GPU's memory): with nothing measured yet, the
    bench fails, saying at which point; else the points stay, and where and why it stopped is said under them."""
    if not rows:
        raise ShellError(error.code, f"bench {bench} at {at}: {error.message}", error.hint, error.col)
    return {"stopped": f"{error.code}: {error.message}", "stopped_at": at}


@command("bench memcpy", "copies", "copy bandwidth by memory kind and size, against the link's peak",
         "bench memcpy h2d pinned pageable sizes 4KB..256MB reps 5",
         "cudaMemcpyAsync back to back behind a gate, timed on the GPU (nvbandwidth's method)",
         args=(Arg("DIR", choices=DIRECTIONS, optional=True),
               Arg("KIND", choices=MEMCPY_KINDS, optional=True, many=True)),
         opts=(Opt("sizes", Arg("SIZES", "word")), Opt("reps", Arg("REPS", "count")), Opt("--csv", Arg("FILE", "written-file")),
               Opt("--plot", Arg("PNG", "written-file"))),
         flags=(Flag("ungated"), Flag("--json")),
         details="Kinds: pageable, pinned, writecombined, registered, mapped (a kernel copies through the "
                 "mapped pointer), managed (prefetch migrates the pages there and back, both counted). Each point: "
                 "the median and coefficient of variation over `reps` batches of back-to-back copies (8 to 128 a "
                 "batch, 256 MiB worth), GB/s, % of the PCIe link's peak (read from sysfs; D2D against HBM, read + "
                 "write counted), and under 1 MiB the time per copy. The copies are issued on the GPU side while "
                 "the streams are held (`hold`), then released and timed from the first start to the last end; "
                 "`ungated` lets each copy start as it is issued (pageable and managed copies always do: a held "
                 "stream would keep their staging waiting forever). Ctrl-C keeps the points measured so far.", exported=False)
def bench_memcpy(session, backend, args):
    refuse_held(session, "bench memcpy, which frees what it made and waits for its work,")
    direction = args.get("DIR") or "h2d"
    kinds = args.get("KIND") or (["device"] if direction == "d2d" else ["pageable", "pinned"])
    if direction == "d2d":
        kinds = ["device"]
    sizes = parse_sizes(args.get("SIZES"), args.col("SIZES"), [1 << 20, 16 << 20, 64 << 20])
    reps = max(2, args.get("REPS", 5))
    peak, peak_what = _peak(backend, direction)
    rows, interrupted, stopped = [], False, {"stopped": None}
    progress = Progress(session, len(kinds) * len(sizes), "bench memcpy")
    try:
        for kind in kinds:
            for size in sizes:
                at = f"{kind} {format_size(size)}"
                gate = "ungated" not in args.flags and kind not in ("pageable", "managed")
                rows.append(_memcpy_point(backend, session.context.handle, kind, direction, size, reps, gate, peak))
                progress.step()
    except KeyboardInterrupt:
        interrupted = True
    except ShellError as e:  # a point the backend refused (out of memory): the points measured stay
        stopped = _stopped(e, rows, "memcpy", at)
    finally:
        progress.close()
    data = {"bench": "memcpy", "direction": direction, "rows": rows, "peak": peak, "peak_of": peak_what,
            "interrupted": interrupted, **stopped, "timing": backend.timing_label}
    return _outputs(Bench(data), args)


def _memcpy_point(backend, ctx, kind, direction, size, reps, gate, peak) -> dict:
    streams = {"h2d": None, "d2h": None}
    with Scratch(backend, ctx) as s:
        if direction == "bidir":
            for d in ("h2d", "d2h"):
                streams[d] = s.stream()  # blocking: the timing events see them
        calls = _copy_calls(backend, s, kind, direction, size, streams)
        rounds = copies_per_batch(size) // 2
        n = 2 * rounds
        moved = size * n * (2 if direction == "bidir" or kind == "managed" else 1)
        timed_batch(backend, calls, gate, rounds)  # warm-up
        times = [timed_batch(backend, calls, gate, rounds) for _ in range(reps)]
        rates = [moved / t for t in times]
    med = statistics.median(rates)
    cv = statistics.pstdev(rates) / statistics.mean(rates)
    return {"kind": kind, "size": size, "gbps": med / 1e9, "cv": cv, "percent_of_peak": 100 * med / peak if peak else None,
            # at the median rate: with an even number of reps the median time is not the median rate's reciprocal
            "us_per_copy": moved / n / med * 1e6 if size < (1 << 20) else None,
            "copies": n, "reps": reps, "gated": gate}


LATENCY_ROUNDS = 2000


@command("bench latency", "copies", "what one small operation costs: copies, a launch, an event, a callback",
         "bench latency", "one 4-byte cudaMemcpy per kind and direction, a kernel launch, cudaEventRecord, "
         "cudaLaunchHostFunc + cudaStreamSynchronize — each timed on the host, many times",
         opts=(Opt("rounds", Arg("ROUNDS", "count")), Opt("--csv", Arg("FILE", "written-file")), Opt("--plot", Arg("PNG", "written-file"))),
         flags=(Flag("--json"),),
         details="Each point runs N rounds (2000 by default) on the GPU side as a loop of driver calls and reports "
                 "the host time of one round: median and spread (p10–p90). Synchronous 4-byte copies from pageable "
                 "and pinned memory, each direction (what `cudaMemcpy` of one value costs); launching an empty kernel "
                 "(the call alone, and with a sync: a round trip); recording an event; a host function that does "
                 "nothing, queued and waited for (a callback's round trip); and 64 copies of 4 KiB with a sync, as a "
                 "loop of cudaMemcpyAsync and as one cudaMemcpyBatchAsync (CUDA 12.8+; left out where the driver "
                 "has none).", exported=False)
def bench_latency(session, backend, args):
    refuse_held(session, "bench latency, which frees what it made and waits for its work,")
    rounds = args.get("ROUNDS", LATENCY_ROUNDS)
    if not 10 <= rounds <= 1_000_000:
        raise usage("rounds 10..1000000", args.col("ROUNDS"))
    rows = []
    with Scratch(backend, session.context.handle) as s:
        pageable, pinned, dev = (s.alloc(k, 4096)[0] for k in ("pageable", "pinned", "device"))
        ev = s.event()
        spin0 = (BUILTINS["spin"], [_us(0)], 1, dim3(1), dim3(1), 0, None)
        points = [("memcpy h2d pageable 4 B", [["memcpy", (pageable, 0, dev, 0, 4, None, False)]]),
                  ("memcpy d2h pageable 4 B", [["memcpy", (dev, 0, pageable, 0, 4, None, False)]]),
                  ("memcpy h2d pinned 4 B", [["memcpy", (pinned, 0, dev, 0, 4, None, False)]]),
                  ("memcpy d2h pinned 4 B", [["memcpy", (dev, 0, pinned, 0, 4, None, False)]]),
                  ("kernel launch (the call)", [["launch", spin0]]),
                  ("kernel launch + sync", [["launch", spin0], ["stream_sync", (None,)]]),
                  ("event record", [["event_record", (ev, None)]]),
                  ("host callback + sync", [["host_noop", (None,)], ["stream_sync", (None,)]])]
        stream = s.stream()  # cudaMemcpyBatchAsync refuses the legacy default stream
        points = [(name, calls, rounds) for name, calls in points] + \
            [(name, calls, max(10, rounds // 10)) for name, calls in _batch_points(s, stream)]  # 64 copies a round
        progress = Progress(session, len(points), "bench latency")
        try:
            for name, calls, n in points:
                try:
                    backend.run_plan(calls, max(10, n // 20), trace=False)  # warm-up
                except ShellError as e:
                    if e.code != "CUDA_ERROR_NOT_SUPPORTED":
                        raise
                    progress.step()  # a driver older than CUDA 12.8 has no batch: the loop's row stands alone
                    continue
                r = backend.run_plan(calls, n, trace=False)["per_round"]
                rows.append({"what": name, "median_us": r["median"] * 1e6, "p10_us": r["p10"] * 1e6,
                             "p90_us": r["p90"] * 1e6, "rounds": n})
                progress.step()
        finally:
            progress.close()
    return _outputs(Bench({"bench": "latency", "rows": rows, "timing": backend.timing_label}), args)


BATCH = 64  # copies of 4 KiB, pinned → device: a loop of cudaMemcpyAsync against one cudaMemcpyBatchAsync


def _batch_points(s, stream) -> list:
    """N small copies and a sync, issued as a loop of calls and as one batch: on the H100 (C, CUDA 13,
    benchmarks/ref_batch.cu) the batch's call held the host 58 µs against the loop's 150, and issue + sync took 73 µs
    against 171."""
    host, dev = s.alloc("pinned", BATCH * 4096)[0], s.alloc("device", BATCH * 4096)[0]
    copies = [[host, k * 4096, dev, k * 4096, 4096] for k in range(BATCH)]
    sync = ["stream_sync", (stream,)]
    return [(f"{BATCH} × 4 KiB h2d pinned: cudaMemcpyAsync loop + sync",
             [["memcpy", (*c, stream, True)] for c in copies] + [sync]),
            (f"{BATCH} × 4 KiB h2d pinned: one cudaMemcpyBatchAsync + sync",
             [["memcpy_batch", (copies, stream, "stream")], sync])]


@command("bench alloc", "memory", "what allocating, pinning and freeing cost per GiB",
         "bench alloc pinned registered device sizes 64MB,256MB",
         "malloc, cudaHostAlloc (each flag), cudaHostRegister, cudaMalloc, cudaMallocManaged, "
         "cudaMallocFromPoolAsync (a cold pool and a warm one) and their frees",
         args=(Arg("KIND", choices=ALLOC_KINDS, optional=True, many=True),),
         opts=(Opt("sizes", Arg("SIZES", "word")), Opt("--csv", Arg("FILE", "written-file")), Opt("--plot", Arg("PNG", "written-file"))),
         flags=(Flag("--json"),), exported=False,
         details="`async` is the stream-ordered allocator from a cold pool (threshold 0, as the default pool is "
                 "after a synchronize: the memory is mapped again); `async-warm` from a pool whose threshold `max` "
                 "kept it (64 MiB on the H100: 11.3 ms cold, 3.3 µs warm). Both use a pool of the bench's own, "
                 "freed with cudaFreeAsync and a synchronize, so the session's pools stay as they were.")
def bench_alloc(session, backend, args):
    refuse_held(session, "bench alloc, which frees what it made and waits for its work,")
    kinds = args.get("KIND") or list(ALLOC_KINDS)
    sizes = parse_sizes(args.get("SIZES"), args.col("SIZES"), [64 << 20, 256 << 20])
    rows, interrupted, stopped = [], False, {"stopped": None}
    progress = Progress(session, len(kinds) * len(sizes), "bench alloc")
    try:
        for kind in kinds:
            for size in sizes:
                at = f"{kind} {format_size(size)}"
                rows.append(_async_point(backend, session.context.device, kind, size) if kind.startswith("async")
                            else _alloc_point(backend, session.context.handle, kind, size))
                progress.step()
    except KeyboardInterrupt:
        interrupted = True
    except ShellError as e:
        stopped = _stopped(e, rows, "alloc", at)
    finally:
        progress.close()
    return _outputs(Bench({"bench": "alloc", "rows": rows, "interrupted": interrupted, **stopped,
                           "timing": backend.timing_label}), args)


def _alloc_point(backend, ctx, kind: str, size: int) -> dict:
    flags = {"portable": {"portable"}, "mapped": {"mapped"}, "writecombined": {"writecombined"}}.get(kind, set())
    base = "pinned" if kind in ("pinned", "portable", "mapped", "writecombined") else \
        "pageable" if kind == "registered" else kind
    with Scratch(backend, ctx) as s:
        t0 = backend.clock()
        buf, _ = s.alloc(base, size, flags)
        alloc_s = backend.clock() - t0
        call = {"pageable": "malloc", "pinned": "cudaHostAlloc", "device": "cudaMalloc",
                "managed": "cudaMallocManaged"}[base]
        if kind == "registered":
            t0 = backend.clock()
            s.register(buf)
            alloc_s = backend.clock() - t0
            call = "cudaHostRegister"
        t0 = backend.clock()
        s.free(buf)  # cudaHostUnregister first, for `registered`
        free_s = backend.clock() - t0
    gib = size / (1 << 30)
    return {"kind": kind, "size": size, "call": call, "alloc_s_per_gib": alloc_s / gib, "free_s_per_gib": free_s / gib}


def _async_point(backend, device: int, kind: str, size: int) -> dict:
    """cudaMallocFromPoolAsync on the current context's default stream from a pool made for it: cold (its first
    mapping, threshold 0) or warm (threshold max, the memory of an allocation freed and synchronized before). The
    host times are the calls' own (on a GPU, taken in the worker: the pipe would be most of a warm 3.3 µs); the
    free's is cudaFreeAsync and the synchronize that gives the memory back, or keeps it."""
    with Scratch(backend, None) as s:
        pool = s.pool(device)

        def once() -> tuple[float, float]:
            buf, alloc_s = s.alloc_async(size, pool, device)
            return alloc_s, s.free_async(buf).host_seconds + backend.device_sync().host_seconds

        if kind == "async-warm":
            backend.pool_set(pool, "threshold", UNLIMITED)
            once()
        alloc_s, free_s = once()
    gib = size / (1 << 30)
    return {"kind": kind, "size": size, "call": "cudaMallocFromPoolAsync", "alloc_s_per_gib": alloc_s / gib,
            "free_s_per_gib": free_s / gib}


@command("bench zerocopy", "kernels", "seed 003's table: the vector sum on zero-copy vs device memory",
         "bench zerocopy 2^10..2^22", "sumArraysGPU on mapped host memory vs cudaMalloc'd memory, events",
         args=(Arg("RANGE", "word", optional=True),),
         opts=(Opt("--csv", Arg("FILE", "written-file")), Opt("--plot", Arg("PNG", "written-file"))), flags=(Flag("--json"),),
         details="For each n (float32 elements, powers of two): the kernel alone, reading A and B from zero-copy "
                 "(mapped pinned) memory vs from device memory; and the whole step — device: copy A and B in from "
                 "pageable memory, sum, copy C out; zero-copy: sum, copy C out. Says where zero-copy stops paying.", exported=False)
def bench_zerocopy(session, backend, args):
    refuse_held(session, "bench zerocopy, which frees what it made and waits for its work,")
    rng = args.get("RANGE") or "2^10..2^20"
    counts = parse_sizes(rng, args.col("RANGE"), [])
    rows, interrupted, stopped = [], False, {"stopped": None}
    progress = Progress(session, len(counts), "bench zerocopy")
    try:
        for n in counts:
            at = f"n = {n:,}"
            rows.append(_zerocopy_point(backend, session.context.handle, n))
            progress.step()
    except KeyboardInterrupt:
        interrupted = True
    except ShellError as e:
        stopped = _stopped(e, rows, "zerocopy", at)
    finally:
        progress.close()
    kernel_cross = next((r["n"] for r in rows if r["zc_kernel_us"] > 2 * r["dev_kernel_us"]), None)
    return _outputs(Bench({"bench": "zerocopy", "rows": rows, "zc_step_wins_from": _wins_from(rows, True),
                           "dev_step_wins_from": _wins_from(rows, False),
                           "kernel_2x": kernel_cross, "interrupted": interrupted, **stopped,
                           "timing": backend.timing_label}), args)


def _wins_from(rows: list[dict], zero_copy: bool) -> int | None:
    """The smallest n from which the whole step on zero-copy memory (or on device memory) keeps winning up to the
    largest n measured (noise at tiny n aside); None where the other wins there. The table and the figure say it."""
    n = None
    for r in reversed(rows):
        if (r["zc_step_us"] < r["dev_step_us"]) != zero_copy:
            break
        n = r["n"]
    return n


def _zerocopy_point(backend, ctx, n: int) -> dict:
    size = n * 4
    with Scratch(backend, ctx) as s:
        backend.room(8 * size)  # the four inputs written, the kernel's output, and what the copies land in
        za, zb = (s.alloc("pinned", size, {"mapped"})[0] for _ in range(2))
        ha, hb, hc = (s.alloc("pageable", size)[0] for _ in range(3))
        da, db, dc = (s.alloc("device", size)[0] for _ in range(3))
        for buf in (za, zb, ha, hb):
            s.fill_ones(buf)
        grid = dim3(-(-n // 256))

        def kernel(a, b):
            return ["launch", (BUILTINS["sum"], [a.whole(), b.whole(), dc.whole()], n, grid, dim3(256), 0, None)]

        def copy(src, dst):
            return ["memcpy", (src, 0, dst, 0, size, None, True)]

        def best(calls, gate=True):
            timed_batch(backend, calls, gate)
            return min(timed_batch(backend, calls, gate) for _ in range(5)) * 1e6

        # a kernel alone is held until issued; a whole step cannot be (its copies to and from pageable memory wait
        # for the GPU), so it runs as issued: a loop of driver calls, no shell between them
        return {"n": n, "zc_kernel_us": best([kernel(za, zb)]), "dev_kernel_us": best([kernel(da, db)]),
                "zc_step_us": best([kernel(za, zb), copy(dc, hc)], False),
                "dev_step_us": best([copy(ha, da), copy(hb, db), kernel(da, db), copy(dc, hc)], False)}


@command("bench overlap", "streams", "copy/compute overlap: the same work on 1, 2, 4, 8 streams",
         "bench overlap streams 1,2,4,8", "cudaMemcpyAsync + kernels on several streams, held until all are "
         "queued, timed on the GPU",
         opts=(Opt("streams", Arg("LIST", "word")), Opt("--csv", Arg("FILE", "written-file")), Opt("--plot", Arg("PNG", "written-file"))),
         flags=(Flag("--json"),),
         details="8 chunks of 16 MiB on pinned memory: each copied in, worked on by a kernel spinning 300 µs on "
                 "every SM, copied out; chunk c on stream c mod S. Prints the speedup over one stream.", exported=False)
def bench_overlap(session, backend, args):
    refuse_held(session, "bench overlap, which frees what it made and waits for its work,")
    counts = [int(x) for x in (args.get("LIST") or "1,2,4,8").split(",") if x.strip().isdigit()]
    if not counts or min(counts) < 1 or max(counts) > 32:
        raise usage("streams takes a list such as 1,2,4,8 (1..32)", args.col("LIST"))
    chunks, size = 8, 16 << 20
    rows = []
    progress = Progress(session, len(counts), "bench overlap")
    with Scratch(backend, session.context.handle) as s, closing(progress):
        host = [s.alloc("pinned", size)[0] for _ in range(chunks)]
        dev = [s.alloc("device", size)[0] for _ in range(chunks)]
        handles = [s.stream() for _ in range(max(counts))]
        grid = dim3(264)  # two blocks per SM on an H100/H200: the kernel holds the whole GPU
        for k in counts:
            calls = []
            for c in range(chunks):
                st = handles[c % k]
                calls += [["memcpy", (host[c], 0, dev[c], 0, size, st, True)],
                          ["launch", (BUILTINS["spin"], [_us(300)], 1, grid, dim3(256), 0, st)],
                          ["memcpy", (dev[c], 0, host[c], 0, size, st, True)]]
            timed_batch(backend, calls)
            ms = statistics.median(timed_batch(backend, calls) for _ in range(3)) * 1e3
            rows.append({"streams": k, "ms": ms})
            progress.step()
    for r in rows:
        r["speedup"] = rows[0]["ms"] / r["ms"]
    return _outputs(Bench({"bench": "overlap", "rows": rows, "timing": backend.timing_label}), args)


@command("bench peer", "copies", "copies between GPUs: every pair, each direction, peer access off and on",
         "bench peer 256MB reps 10", "cudaMemcpyPeerAsync back to back, timed by events (nvbandwidth's "
         "device-to-device copy-engine test); cudaDeviceEnablePeerAccess both ways for `on`",
         args=(Arg("SIZE", "size", optional=True),),
         opts=(Opt("reps", Arg("REPS", "count")), Opt("--csv", Arg("FILE", "written-file")), Opt("--plot", Arg("PNG", "written-file"))),
         flags=(Flag("--json"),),
         details="For every ordered pair of GPUs: SIZE (default 256 MiB) copied REPS times (default 10) from the "
                 "first GPU's memory to the second's, with peer access off (the driver stages the bytes through "
                 "host memory) and, where the pair can reach each other, on (the copy engines over NVLink or PCIe). "
                 "`devices` says which pairs can and over what link. Then host ↔ each GPU (pinned, cudaMemcpyAsync), "
                 "from memory on each NUMA node (mbind): near the GPU or across the CPUs' link where there are two. "
                 "On the simulator: `--sim-profile two-h200`.",
         exported=False)
def bench_peer(session, backend, args):
    refuse_held(session, "bench peer, which frees what it made and waits for its work,")
    nbytes, reps = args.get("SIZE", 256 << 20), max(1, args.get("REPS", 10))
    if nbytes <= 0:
        raise usage("the size must be at least one byte", args.col("SIZE"))
    topo = backend.devices()
    if len(topo["devices"]) < 2:
        raise ShellError("ONE_GPU", f"this machine has {len(topo['devices'])} GPU: copies between GPUs need two",
                         "on the simulator, `--sim-profile two-h200` models a pair joined by NVLink")
    rows, host_rows = [], []
    nodes = topo.get("memory_nodes") or [None]
    progress = Progress(session, len(topo["peers"]) + len(topo["devices"]) * len(nodes), "bench peer")
    try:
        for pair in topo["peers"]:
            for peer in (False, True) if pair["access"] else (False,):
                seconds = backend.peer_copy(pair["src"], pair["dst"], nbytes, reps, peer)
                rows.append({"src": pair["src"], "dst": pair["dst"], "peer": peer, "size": nbytes, "reps": reps,
                             "seconds": seconds, "gbps": nbytes / seconds / 1e9, "link": pair["link"]})
            progress.step()
        for gpu in topo["devices"]:  # host ↔ each GPU, from each NUMA node's memory: near and far
            home = gpu["numa_node"] if gpu["numa_node"] is not None and gpu["numa_node"] >= 0 else None
            for node in nodes:
                for to_device in (True, False):
                    seconds = backend.host_copy(gpu["ordinal"], node, nbytes, reps, to_device)
                    host_rows.append({"gpu": gpu["ordinal"], "node": node, "to_device": to_device,
                                      "near": None if home is None or node is None else node == home,
                                      "size": nbytes, "reps": reps, "seconds": seconds, "gbps": nbytes / seconds / 1e9})
                progress.step()
    finally:
        progress.close()
    return _outputs(Bench({"bench": "peer", "rows": rows, "host_rows": host_rows,
                                     "timing": backend.timing_label}), args)


def _outputs(result: Result, args) -> Result:
    """--csv FILE and --plot FILE.png beside the table; --json prints this result as JSON."""
    rows = result.data["rows"]
    if args.get("FILE") and rows:
        table = rows + result.data.get("host_rows", [])  # bench peer's host rows too, their own columns filled
        replace_file(args.get("FILE"), csv_records(table), args.col("FILE"))  # whole, or as it was
    if args.values.get("PNG") and rows:  # (no points measured: nothing to draw)
        _plot(result.data, args.get("PNG"), args.col("PNG"))
    result.as_json = "--json" in args.flags
    return result


def _plot(data: dict, path: str, col: int) -> None:
    try:
        fig = bench_figure(data)
    except ImportError:
        raise ShellError("NOT_INSTALLED", "--plot needs matplotlib", "pip install matplotlib", col) from None
    try:
        save(fig, path, col)
    except ValueError:  # matplotlib picks the format by the name's ending
        raise usage(f"cannot plot into '{path}': name a .png, .svg or .pdf file", col) from None
    finally:
        close(fig)


# ------------------------------------------------------------------ the results of these commands
# each bench's rows: the records its `_…_point` (or its loop) makes
class BenchLatencyRow(TypedDict):
    what: str
    median_us: float
    p10_us: float
    p90_us: float
    rounds: int


class BenchAllocRow(TypedDict):
    kind: str
    size: int
    call: str
    alloc_s_per_gib: float
    free_s_per_gib: float


class BenchZerocopyRow(TypedDict):
    n: int
    zc_kernel_us: float
    dev_kernel_us: float
    zc_step_us: float
    dev_step_us: float


class BenchOverlapRow(TypedDict):
    streams: int
    ms: float
    speedup: float


class BenchPeerRow(TypedDict):
    src: int
    dst: int
    peer: bool
    size: int
    reps: int
    seconds: float
    gbps: float
    link: str


class BenchMemcpyRow(TypedDict):
    kind: str
    size: int
    gbps: float
    cv: float
    percent_of_peak: float | None  # None: the link's peak unknown
    us_per_copy: float | None  # under 1 MiB only
    copies: int
    reps: int
    gated: bool


class BenchDataHostRowsItem(TypedDict):
    gpu: int
    node: int | None  # None: the host's NUMA nodes unknown
    to_device: bool
    near: bool | None  # whether the node is the GPU's own; None where either is unknown
    size: int
    reps: int
    seconds: float
    gbps: float


class BenchData(TypedDict):
    bench: str
    # (an empty table's CSV header is the last type's: memcpy's, the bench a Ctrl-C most often stops first)
    rows: (list[BenchLatencyRow] | list[BenchAllocRow] | list[BenchZerocopyRow] | list[BenchOverlapRow]
           | list[BenchPeerRow] | list[BenchMemcpyRow])
    zc_step_wins_from: NotRequired[int | None]
    dev_step_wins_from: NotRequired[int | None]
    kernel_2x: NotRequired[int | None]
    interrupted: NotRequired[bool]
    stopped: NotRequired[str | None]
    stopped_at: NotRequired[str]
    timing: str
    direction: NotRequired[str]
    peak: NotRequired[float | None]  # None: the link's peak unknown
    peak_of: NotRequired[str]
    host_rows: NotRequired[list[BenchDataHostRowsItem]]


class Bench(Result, kind="bench"):
    Data = BenchData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        rows, bench, label = d["rows"], d["bench"], d["timing"]
        if bench == "memcpy":
            flags = {r.get("gated", True) for r in rows}
            gated = "ungated" if flags == {False} else "gated" if flags == {True} else \
                "gated; " + ", ".join(dict.fromkeys(r["kind"] for r in rows if not r["gated"])) + " as issued"
            head = f"bench memcpy {d['direction']} ({label}, {gated}); % of {d['peak_of']}" + (
                f" = {d['peak'] / 1e9:.1f} GB/s" if d["peak"] else "")
            table = [[r["kind"], format_size(r["size"]), f"{r['gbps']:.2f}",
                      f"{r['us_per_copy']:.2f}" if r.get("us_per_copy") is not None else "", f"{100 * r['cv']:.1f}%",
                      f"{r['percent_of_peak']:.0f}%" if r["percent_of_peak"] is not None else "-", r["copies"]]
                     for r in rows]
            headers = ["kind", "size", "GB/s (median)", "µs/copy", "CV", "of peak", "copies/rep"]
        elif bench == "latency":
            head = f"bench latency ({label}): host time of one round, {rows[0]['rounds'] if rows else 0} rounds each"
            table = [[r["what"], f"{r['median_us']:.2f}", f"{r['p10_us']:.2f}–{r['p90_us']:.2f}"] for r in rows]
            headers = ["operation", "µs (median)", "p10–p90 µs"]
        elif bench == "alloc":
            head = f"bench alloc ({label}): time per GiB"
            table = [[r["kind"], format_size(r["size"]), r["call"], fmt_seconds(r["alloc_s_per_gib"]),
                      fmt_seconds(r["free_s_per_gib"])] for r in rows]
            headers = ["kind", "size", "call", "alloc /GiB", "free /GiB"]
        elif bench == "zerocopy":
            head = f"bench zerocopy ({label}): sumArraysGPU, µs"
            table = [[r["n"], f"{r['zc_kernel_us']:.1f}", f"{r['dev_kernel_us']:.1f}", f"{r['zc_step_us']:.1f}",
                      f"{r['dev_step_us']:.1f}"] for r in rows]
            headers = ["n", "zero-copy kernel", "device kernel", "zero-copy step", "device step (copies)"]
        elif bench == "peer":
            head = f"bench peer ({label}): cudaMemcpyPeerAsync, {format_size(rows[0]['size'])} × {rows[0]['reps']}, GB/s"
            pairs = {}
            for r in rows:
                pairs.setdefault((r["src"], r["dst"]), {"link": r["link"]})[r["peer"]] = r["gbps"]
            table = [[f"GPU {a} → GPU {b}", p["link"], f"{p[False]:.1f}",
                      f"{p[True]:.1f}" if True in p else "no peer access",
                      f"{p[True] / p[False]:.1f}×" if True in p else "-"] for (a, b), p in pairs.items()]
            headers = ["copy", "link", "peer access off", "peer access on", "on / off"]
        else:
            head = f"bench overlap ({label})"
            table = [[r["streams"], f"{r['ms']:.3f}", f"{r['speedup']:.2f}×"] for r in rows]
            headers = ["streams", "ms", "speedup"]
        out = [head, fit(table, headers, tablefmt, width)]
        if bench == "zerocopy":
            w, dw, k = d["zc_step_wins_from"], d.get("dev_step_wins_from"), d["kernel_2x"]
            out.append((f"whole step (copies from pageable memory included): zero-copy wins from n = {w} on" if w
                        else f"whole step: device memory wins from n = {dw} on" if dw
                        else "whole step: device memory wins at the largest n measured")
                       + (f"; the zero-copy kernel alone is over 2× slower from n = {k}" if k else ""))
        if bench == "peer" and d.get("host_rows"):
            out += ["", "host ↔ GPU (pinned host memory on each NUMA node, cudaMemcpyAsync), GB/s",
                    fit(host_table(d["host_rows"]), ["host memory", "GPU", "host → GPU", "GPU → host"], tablefmt,
                        width)]
        if d.get("interrupted"):
            out.append("interrupted: the points measured so far")
        if d.get("stopped"):
            out.append(f"stopped at {d['stopped_at']} — {d['stopped']}: the points measured so far")
        return out

    def figure(self):
        return bench_figure(self.data) if self.data.get("rows") else None


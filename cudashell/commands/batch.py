"""memcpy batch: many copies queued by one call (cudaMemcpyBatchAsync, CUDA 12.8+), written as the `memcpy` commands
they stand for between <<< and >>>, each checked as `memcpy` checks it before the driver sees any."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TypedDict

from ..errors import ShellError, usage
from ..language.grammar import Arg, Opt, split_commands
from ..language.registry import c_writer, command, parse_segment
from ..model.operations import MEMCPY, MEMCPY_BATCH
from ..model.syncrules import BATCH_ORDERS
from ..output.render import gpu_time, how_text, timing_note
from ..output.results import TIMING_FIELDS, Result, timing_data
from ..sizes import format_size_exact
from .checks import check_direction, check_range, common_size, infer_direction, region

ORDER_C = {"stream": "cudaMemcpySrcAccessOrderStream", "during-call": "cudaMemcpySrcAccessOrderDuringApiCall",
           "any": "cudaMemcpySrcAccessOrderAny"}


@contextmanager
def pointing_into(col: int, where: int):
    """An error of a command inside the block, its column (the block's own, or `where`) turned into the line's."""
    try:
        yield
    except ShellError as e:
        e.col = col + 3 + (e.col or where)
        raise


def inner_copies(text: str, col: int) -> list:
    """The block's commands, parsed: each must be a plain `memcpy` (the batch's stream and its one call make every
    copy async on that stream). A refusal points into the block (`col`: where it starts, about)."""
    segments = split_commands(text.replace("\n", ";"))
    if not segments:
        raise usage("the batch holds no copies", col, "memcpy batch <<< memcpy a b; memcpy c d >>> stream 1")
    copies = []
    for seg in segments:
        at = col + 3 + seg.tokens[0].col  # past the `<<<` and one space
        with pointing_into(col, seg.tokens[0].col):
            cmd = parse_segment(seg)
        if cmd.spec.name != "memcpy":
            raise usage(f"a batch holds memcpy commands only, not `{cmd.spec.name}`", at,
                        "write each copy as `memcpy SRC DST [SIZE]`")
        if "async" in cmd.args.flags or "S" in cmd.args.values:
            raise usage("a copy in a batch takes neither `async` nor `stream`: the batch is one async call on its "
                        "own stream", at, "put `stream S` after the block")
        copies.append((cmd.args, at))
    return copies


@command("memcpy batch", "copies", "many copies queued by one call, run in stream order (CUDA 12.8+)",
         "memcpy batch <<< memcpy p0[0:4KB] d0[0:4KB]; memcpy p0[4KB:+4KB] d0[4KB:+4KB] >>> stream 1",
         "cudaMemcpyBatchAsync (cuMemcpyBatchAsync)",
         args=(Arg("COPIES", "commands"),),
         opts=(Opt("stream", Arg("S", "stream")), Opt("order", Arg("ORDER", choices=BATCH_ORDERS))),
         details="The copies go between <<< and >>>, written as `memcpy [DIR] SRC DST [SIZE]` (no `async`, no "
                 "`stream`): each is checked as `memcpy` checks it (direction, bounds) before the driver sees any. "
                 "One call queues them all on the stream; they may run in any order among themselves. `order` is "
                 "when the driver may read the sources (srcAccessOrder): `stream` (default) in stream order, "
                 "`during-call` before the call returns (a source may change right after), `any` whenever, even "
                 "after the call (the source must stay as it is until the copies are done). The driver refuses the "
                 "legacy default stream (stream 0) and a copy of 0 bytes (CUDA_ERROR_INVALID_VALUE); a driver older "
                 "than CUDA 12.8 has no such call (CUDA_ERROR_NOT_SUPPORTED). A batch nests in `repeat`'s block "
                 "(`repeat 100 <<< memcpy batch <<< … >>> stream 1 >>>`). On the H100, 64 copies of 4 KiB held the host "
                 "58 µs as one batch against 150 µs as a loop of cudaMemcpyAsync, and were done in 73 µs against "
                 "171 (benchmarks/ref_batch.cu): `bench latency` compares.")
def memcpy_batch(session, backend, args):
    copies, rows = [], []
    for a, at in inner_copies(args.get("COPIES"), args.col("COPIES")):
        with pointing_into(args.col("COPIES"), 1):  # as `memcpy` checks a copy, the columns the block's own
            src = region(session, a.get("SRC"), a.col("SRC"), "copy")
            dst = region(session, a.get("DST"), a.col("DST"), "copy")
            direction = a.get("DIR")
            if direction and "unchecked" not in a.flags:
                check_direction(direction, src.buf, dst.buf, a.col("DIR"))
            direction = direction or infer_direction(src.buf, dst.buf)
            size_col = a.col("SIZE") if "SIZE" in a.values else None
            nbytes = common_size((src, dst), a.get("SIZE"), size_col, (a.col("SRC"), a.col("DST")))
            check_range(src.buf, src.offset, nbytes, size_col or a.col("SRC"), "copy")
            check_range(dst.buf, dst.offset, nbytes, size_col or a.col("DST"), "copy")
        copies.append([src.buf, src.offset, dst.buf, dst.offset, nbytes])
        rows.append({"direction": direction, "src_part": src.label(nbytes), "dst_part": dst.label(nbytes),
                     "bytes": nbytes})
    stream = session.stream(args.get("S"), args.col("S"))
    order = args.get("ORDER", "stream")
    t = backend.memcpy_batch(copies, stream.handle, order)
    total = sum(r["bytes"] for r in rows)
    ways = {r["direction"] for r in rows}
    engine = MEMCPY[ways.pop()].engine if len(ways) == 1 else ""
    bufs = list({id(b): b for c in copies for b in (c[0], c[2])}.values())
    session.track(MEMCPY_BATCH, stream, total, t, *bufs, engine=engine)
    for c in copies:
        c[2].view = c[0].view  # the bytes came as what they were
    return CopyBatch({"copies": rows, "count": len(rows), "bytes": total, "stream": stream.name, "order": order,
                      "gbps": total / t.seconds / 1e9 if t.seconds else None, "call": "cudaMemcpyBatchAsync",
                      **timing_data(t)})


@c_writer("memcpy batch")
def c_memcpy_batch(w, a, i, text):
    """Arrays of pointers and sizes, one attribute for every copy; CUDA 12.8 and 12.9 take a failIdx more."""
    dsts, srcs, sizes = [], [], []
    for cmd, _ in inner_copies(a.get("COPIES"), 0):
        src, dst = cmd.get("SRC"), cmd.get("DST")
        nbytes = cmd.get("SIZE")
        if nbytes is None:
            nbytes = w.length(src) if w.length(src) is not None else w.rest(src) \
                if w.length(dst) is None else w.length(dst)
        srcs.append(f"(const void *)({w.ptr(src)})")
        dsts.append(f"(void *)({w.ptr(dst)})")
        sizes.append(str(nbytes))
    n, stream = len(sizes), w.stream(a.get("S"))
    order = ORDER_C[a.get("ORDER", "stream")]

    def write():
        w.emit(f"{{ void *dsts[] = {{{', '.join(dsts)}}};", i, "cuMemcpyBatchAsync")
        w.emit(f"  const void *srcs[] = {{{', '.join(srcs)}}};", i)
        w.emit(f"  size_t sizes[] = {{{', '.join(sizes)}}};", i)
        w.emit(f"  cudaMemcpyAttributes attr = {{}}; attr.srcAccessOrder = {order};", i)
        w.emit("  size_t first = 0;  // attr applies from copy 0 on", i)
        w.emit("#if CUDART_VERSION >= 13000", 0)
        w.emit(f"  CHECK(cudaMemcpyBatchAsync((const void **)dsts, srcs, sizes, {n}, &attr, &first, 1, {stream}));", i)
        w.emit("#else  // CUDA 12.8, 12.9: the index of a failed copy comes back too", 0)
        w.emit("  size_t failed = 0;", i)
        w.emit(f"  CHECK(cudaMemcpyBatchAsync((void **)dsts, (void **)srcs, sizes, {n}, &attr, &first, 1, &failed, "
               f"{stream}));", i)
        w.emit("#endif", 0)
        w.emit("}", i)
    w.in_ctx(w.ctx_of_stream(a.get("S")), i, write)


# ------------------------------------------------------------------ its result
BatchRow = TypedDict("BatchRow", {"direction": str, "src_part": str, "dst_part": str, "bytes": int})
CopyBatchData = TypedDict("CopyBatchData", {
    "copies": list[BatchRow],
    "count": int,
    "bytes": int,
    "stream": str,
    "order": str,
    "gbps": float | None,
    "call": str,
    **TIMING_FIELDS,
})


class CopyBatch(Result, kind="copy batch"):
    Data = CopyBatchData

    def text(self):
        d = self.data
        rate = f" = {d['gbps']:.2f} GB/s" if d["gbps"] else ""
        head = (f"memcpy batch: {d['count']} cop{'y' if d['count'] == 1 else 'ies'}, {format_size_exact(d['bytes'])} in {gpu_time(d)}{rate} on "
                f"stream {d['stream']} (sources read: {d['order']}); {d['call']}, {how_text(d)} {timing_note(d)}")
        return [head] + [f"  {r['direction']} {r['src_part']} → {r['dst_part']}: {format_size_exact(r['bytes'])}"
                         for r in d["copies"]]

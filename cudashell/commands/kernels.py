"""launch: the seeds' sumArraysGPU, on whatever memory the GPU can reach."""

from __future__ import annotations

from ..errors import usage
from ..grammar import Arg, Opt
from ..registry import command
from ..results import Result, timing_data
from .checks import check_device_accessible, check_range

KERNELS = ("sum",)


@command("launch", "kernels", "run a built-in kernel: sum A B C computes C[i] = A[i] + B[i] (float32)",
         "launch sum d0 d1 d2 n 2^20 block 256", "sumArraysGPU<<<grid, block, 0, stream>>>(A, B, C, n)",
         args=(Arg("KERNEL", choices=KERNELS), Arg("BUF", "buffer", many=True)),
         opts=(Opt("n", Arg("N", "count")), Opt("grid", Arg("G", "count")), Opt("block", Arg("B", "count")),
               Opt("stream", Arg("S", "stream"))),
         details="A, B and C must be device-accessible: device or managed memory, or pinned/registered memory "
                 "on a UVA system (only mapped memory without UVA) — that is zero-copy. N defaults to the "
                 "elements of the smallest buffer, block to 256, grid to cover N. Launches are asynchronous.")
def launch(session, backend, args):
    names = args.get("BUF")
    if len(names) != 3:
        raise usage(f"sum takes three buffers A B C, got {len(names)}", args.col("BUF"))
    bufs = [session.buffer(n, args.col("BUF")) for n in names]
    for buf in bufs:
        check_device_accessible(buf, args.col("BUF"), backend.info.unified_addressing)
    n = args.get("N", min(b.size for b in bufs) // 4)
    for buf in bufs:
        check_range(buf, 0, n * 4, args.col("N"), f"{n} float32 elements")
    block = args.get("B", 256)
    if not 1 <= block <= 1024:
        raise usage(f"block {block} is outside 1..1024", args.col("B"))
    grid = args.get("G", max(1, -(-n // block)))
    if grid < 1:
        raise usage("grid must be at least 1", args.col("G"))
    stream = session.stream(args.get("S"), args.col("S"))
    t = backend.launch_sum(*bufs, n, grid, block, stream.handle if stream else None)
    session.mark_pending(stream, bufs[2])
    session.trace_op("kernel sum", stream, n * 12, t)
    return Result("launch", {"kernel": "sum", "buffers": names, "n": n, "grid": grid, "block": block,
                             "computed": min(n, grid * block), "stream": stream.name if stream else "0",
                             **timing_data(t)})

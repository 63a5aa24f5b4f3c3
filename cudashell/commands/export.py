"""export c FILE.cu: the session so far as a self-contained CUDA C program (runtime API, error checks,
the same allocations, flags, copies, kernels, streams and events), printing the checksums `checksum`
prints and the times `elapsed` printed."""

from __future__ import annotations

from pathlib import Path

from ..cemit import Writer
from ..grammar import Arg, Flag
from ..registry import command
from ..results import Result
from .checks import check_writable, write_file


@command("export c", "scripts", "write the session so far as a self-contained CUDA C program", "export c session.cu",
         "(the CUDA runtime API: cudaHostAlloc, cudaMemcpyAsync, kernel<<<…>>>, cudaEventRecord, …)",
         args=(Arg("FILE", "file"),), flags=(Flag("force"),), exported=False,
         details="The successful commands, in order, with error checks; built-in kernels included; `repeat` becomes "
                 "a loop; `elapsed` prints its time; at the end every live buffer's checksum, the same the "
                 "`checksum` command prints. Your kernels' sources are written above main (a loaded file is "
                 "#included). An existing FILE is replaced only with `force`.")
def export_c(session, backend, args):
    path = Path(args.get("FILE"))
    check_writable(path, "force" in args.flags, args.col("FILE"))
    w = Writer()
    for entry in session.history:
        if entry.ok:
            w.command(entry.text)
    write_file(path, w.program(), args.col("FILE"))
    return Result("message", {"text": f"wrote {path}: {len(w.body)} statements"
                              + (f"; not exported: {len(w.notes)} (see the comments)" if w.notes else ""),
                              "path": str(path), "skipped": w.notes})


"""export c FILE.cu: the session so far as a self-contained CUDA C program (runtime API, error checks,
the same allocations, flags, copies, kernels, streams and events), printing the checksums `checksum`
prints and the times `elapsed` printed."""

from __future__ import annotations

from pathlib import Path

from ..cemit import Writer
from ..errors import ShellError
from ..grammar import Arg
from ..registry import command
from ..results import Result


@command("export c", "scripts", "write the session so far as a self-contained CUDA C program", "export c session.cu",
         "(the CUDA runtime API: cudaHostAlloc, cudaMemcpyAsync, kernel<<<…>>>, cudaEventRecord, …)",
         args=(Arg("FILE", "file"),), exported=False,
         details="The successful commands, in order, with error checks; built-in kernels included; `repeat` becomes "
                 "a loop; `elapsed` prints its time; at the end every live buffer's checksum, the same the "
                 "`checksum` command prints. User kernels are left as comments.")
def export_c(session, backend, args):
    w = Writer()
    for entry in session.history:
        if entry.ok:
            w.command(entry.text)
    path = Path(args.get("FILE"))
    try:
        path.write_text(w.program())
    except OSError as e:
        raise ShellError("IO_ERROR", f"cannot write {path}: {e.strerror}", None, args.col("FILE")) from None
    return Result("message", {"text": f"wrote {path}: {len(w.body)} statements"
                              + (f"; not exported: {len(w.notes)} (see the comments)" if w.notes else ""),
                              "path": str(path), "skipped": w.notes})


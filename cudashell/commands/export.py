"""export c FILE.cu: the session so far as a self-contained CUDA C program (runtime API, error checks,
the same allocations, flags, copies, kernels, streams, events, holds and contexts), printing the checksums
`checksum` prints and the times `elapsed` printed. A command it cannot write faithfully is refused by name
(NOT_EXPORTABLE) and no file is written."""

from __future__ import annotations

from pathlib import Path

from ..export.cemit import Writer
from ..language.grammar import Arg, Flag
from ..language.registry import command
from ..output.results import Message
from .checks import check_writable, write_file


@command("export c", "scripts", "write the session so far as a self-contained CUDA C program", "export c session.cu",
         "(the CUDA runtime API: cudaHostAlloc, cudaMemcpyAsync, kernel<<<…>>>, cudaEventRecord, …)",
         args=(Arg("FILE", "written-file"),), flags=(Flag("force"),), exported=False,
         details="The successful commands, in order, with error checks; built-in kernels included; `repeat` becomes "
                 "a loop and `if gpus` a check of cudaGetDeviceCount; `elapsed` prints its time; `hold` launches "
                 "the gate kernel on every stream and `release` writes its flag; contexts are the driver API's "
                 "(reached through the runtime: plain nvcc builds it); `reset` is cudaDeviceReset and everything "
                 "made again. At the end every live buffer's checksum, the same the `checksum` command prints. Your "
                 "kernels' sources are written above main. A command that cannot be written as C doing what the "
                 "session did is refused by name (NOT_EXPORTABLE) and nothing is written. An existing FILE is "
                 "replaced only with `force`.")
def export_c(session, backend, args):
    path = Path(args.get("FILE"))
    check_writable(path, "force" in args.flags, args.col("FILE"))
    w = Writer(kernels=session.kernels, gpus_here=len(backend.devices()["devices"]), base=session.script_dir,
               lang=session.settings["lang"])
    w.replay(session.history)
    write_file(path, w.program(), args.col("FILE"))
    return Message({"text": f"wrote {path}: {len(w.body)} statements", "path": str(path), "skipped": []})

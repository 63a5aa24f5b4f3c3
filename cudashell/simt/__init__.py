"""Users' CUDA C kernels on the simulator: a real front end (frontend.py: pcpp + libclang) makes a typed tree
(ir.py) that a SIMT interpreter (interp.py) runs as NumPy lanes, checking and counting every memory access
(memory.py, racecheck.py). `compile_source` is the entry the simulator's `kernel load`/`define` use."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import OUTSIDE_HINT, ShellError
from ..model.kernels import Kernel


def compile_source(source: str, path: str | None = None, root: Path | None = None) -> list[Kernel]:
    """The __global__ functions of a source, as Kernels whose handle is (program, function); with `root`
    (grading), a source that names a file outside that folder is OUTSIDE_SUBMISSION."""
    from .compile_error import CompileError
    from .frontend import parse
    from .localmem import refuse_oversized
    from .signatures import SUBSET_HINT, read_kernels

    name = Path(path).name if path else "kernel.cu"
    dirs = [Path(path).parent] if path else []
    signatures = read_kernels(source, path, root)  # the parameters, as the GPU reads them too
    try:
        program = parse(source, name, dirs, root)
        refuse_oversized(program)
    except CompileError as e:
        where = f"{e.where[0]}:{e.where[1]}:{e.where[2]}: " if e.where else ""
        raise ShellError(e.code, f"{where}{e.message}",
                         e.hint or (SUBSET_HINT if e.code == "NOT_SUPPORTED_ON_SIM"
                                    else OUTSIDE_HINT if e.code == "OUTSIDE_SUBMISSION" else None)) from None
    return [replace(k, handle=(program, program.functions[k.name]), source=source) for k in signatures]


__all__ = ["compile_source"]

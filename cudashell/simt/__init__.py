"""Users' CUDA C kernels on the simulator: a real front end (frontend.py: pcpp + libclang) makes a typed tree
(ir.py) that a SIMT interpreter (interp.py) runs as NumPy lanes, checking and counting every memory access
(memory.py, racecheck.py). `compile_source` is the entry the simulator's `kernel load`/`define` use."""

from __future__ import annotations

from pathlib import Path

from ..errors import OUTSIDE_HINT, ShellError
from ..model.kernels import Kernel, Param


def compile_source(source: str, path: str | None = None, root: Path | None = None) -> list[Kernel]:
    """The __global__ functions of a source, as Kernels whose handle is (program, function); with `root`
    (grading), a source that names a file outside that folder is OUTSIDE_SUBMISSION."""
    from .compile_error import CompileError
    from .ctype import Pointer, Scalar
    from .frontend import parse

    name = Path(path).name if path else "kernel.cu"
    dirs = [Path(path).parent] if path else []
    try:
        program = parse(source, name, dirs, root)
    except CompileError as e:
        where = f"{e.where[0]}:{e.where[1]}:{e.where[2]}: " if e.where else ""
        raise ShellError(e.code, f"{where}{e.message}",
                         "the simulator runs the CUDA C subset in the guide's chapter \"Your own kernels\""
                         if e.code == "NOT_SUPPORTED_ON_SIM" else OUTSIDE_HINT if e.code == "OUTSIDE_SUBMISSION"
                         else None) from None
    kernels = []
    for kname in program.kernel_names:
        fn = program.functions[kname]
        params = []
        for p in fn.params:
            if isinstance(p.type, Pointer):
                to = p.type.to
                dtype = to.dtype.name if isinstance(to, Scalar) and to.name != "bool" else "uint8"
                const = fn.const_params[len(params)] if len(params) < len(fn.const_params) else False
                params.append(Param(p.name, "in" if const else "inout", dtype))
            elif isinstance(p.type, Scalar):
                params.append(Param(p.name, "scalar", "uint8" if p.type.name == "bool" else p.type.dtype.name))
            else:
                raise ShellError("NOT_SUPPORTED_ON_SIM", f"{kname}: parameter {p.name} is a {p.type}, which the "
                                 "shell cannot pass", "kernels take pointers and scalars")
        kernels.append(Kernel(kname, tuple(params), "user kernel", builtin=False, symbol=kname,
                              handle=(program, fn), source=source))
    return kernels


__all__ = ["compile_source"]

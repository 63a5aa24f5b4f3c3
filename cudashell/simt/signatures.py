"""The parameters of a source's kernels, read by the simulator's own front end (pcpp, then clang's typed
declarations) for both backends, so that the GPU and the simulator cannot disagree about what a kernel takes.

Only declarations are read: function bodies are not converted, and what only the simulator's interpreter lacks
(textures, inline PTX, a device function the prelude does not declare…) is left to the backend that compiles
the source — nvcc on a GPU, the interpreter on the simulator. Imported when a kernel is first loaded: clang costs
time to load."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from ..errors import OUTSIDE_HINT, ShellError
from ..model.kernels import Kernel, Param

# nvcc's own words that clang (without CUDA's headers) does not know; they change how a kernel is compiled, not
# what it takes, so the reader blanks them (columns stay where they were)
_NVCC_ONLY = re.compile(r"\b__launch_bounds__\s*\(|\b__grid_constant__\b")
SUBSET_HINT = "the simulator runs the CUDA C subset in the guide's chapter \"Your own kernels\""
_TEMPLATE_HINT = ("a template kernel is launched through its instantiations, which the shell cannot name: "
                  "make it a __device__ template called by a plain __global__ kernel")


def read_kernels(source: str, path: str | None = None, root: Path | None = None) -> tuple[Kernel, ...]:
    """The kernels of `source` (a file at `path`, whose #includes are read beside it; with `root`, grading,
    none outside that folder) with their parameters: a pointer, reference or array parameter is a buffer
    (`in` when what it points to is const, else `inout`), a scalar takes the dtype of its canonical type
    (typedefs resolved, an enum its integer type). A parameter the shell cannot pass (a struct by value)
    or a signature clang cannot read is a USAGE error naming it at file:line:col. Cached by source: a launch in
    another context, or an export, reads it again for free."""
    return _read(source, path, str(root) if root is not None else None)


@functools.lru_cache(maxsize=32)
def _read(source: str, path: str | None, root: str | None) -> tuple[Kernel, ...]:
    from .compile_error import CompileError

    try:
        return _kernels(source, path, Path(root) if root is not None else None)
    except CompileError as e:
        where = f"{e.where[0]}:{e.where[1]}:{e.where[2]}: " if e.where else ""
        raise ShellError(e.code, f"{where}{e.message}",
                         e.hint or (_TEMPLATE_HINT if e.message.startswith("no __global__") and "template" in source
                                    else SUBSET_HINT if e.code == "NOT_SUPPORTED_ON_SIM"
                                    else OUTSIDE_HINT if e.code == "OUTSIDE_SUBMISSION" else None)) from None


@functools.lru_cache(maxsize=8)
def declarations(source: str, path: str | None, root: str | None) -> tuple:
    """clang's reading of a source's declarations (its translation unit, and each line's file and line): one parse
    for the kernels' parameters and the module's variables (variables.py), which a GPU load asks for both."""
    from .frontend import _tu, preprocess

    name = Path(path).name if path else "kernel.cu"
    dirs = [Path(path).parent] if path else []
    text, where = preprocess(source, name, dirs, Path(root) if root is not None else None, missing_headers_ok=True)
    return _tu(_blank_nvcc_only(text)), where


def _kernels(source: str, path: str | None, root: Path | None) -> tuple[Kernel, ...]:
    from .compile_error import CompileError
    from .prelude import DECL_LINES

    tu, where = declarations(source, path, str(root) if root is not None else None)

    def loc(location) -> tuple:
        line = location.line - DECL_LINES
        if 1 <= line <= len(where):
            return (where[line - 1][0], where[line - 1][1], location.column)
        return ("<built-in>", location.line, location.column)

    errors = [d for d in tu.diagnostics if d.severity >= 3 and d.location.line > DECL_LINES]
    found: dict[str, Kernel] = {}
    for cur in _top(tu.cursor, DECL_LINES):
        if cur.kind.name != "FUNCTION_DECL" or not cur.is_definition() \
                or cur.get_num_template_arguments() > 0:  # a template's specialisation: as the template
            continue
        if not any(c.kind.name == "CUDAGLOBAL_ATTR" for c in cur.get_children()):
            continue
        if cur.spelling in found:  # an overload: nvcc refuses two C functions of one name, the shell's launch too
            raise CompileError("USAGE", f"kernel {cur.spelling} is defined twice (overloaded): the shell finds a "
                               "kernel by its name, so each needs its own", loc(cur.location))
        body = next((c for c in cur.get_children() if c.kind.name == "COMPOUND_STMT"), None)
        head_end = body.extent.start.offset if body is not None else cur.extent.end.offset
        in_head = [d for d in errors if cur.extent.start.offset <= d.location.offset < head_end]
        params = tuple(_param(cur.spelling, n, p, in_head, loc) for n, p in enumerate(cur.get_arguments()))
        for d in in_head:  # what _param did not take as a pointer to a type only nvcc's headers declare
            if not _opaque_pointer(d, cur.get_arguments()):
                raise CompileError("USAGE", f"kernel {cur.spelling}: its signature cannot be read: {d.spelling}",
                                   loc(d.location))
        found[cur.spelling] = Kernel(cur.spelling, params, "user kernel", builtin=False, symbol=cur.spelling)
    if not found:
        if errors:  # a signature so broken that clang found no function in it
            raise CompileError("USAGE", f"error: {errors[0].spelling}", loc(errors[0].location))
        raise CompileError("USAGE", "no __global__ function found", None)
    return tuple(found.values())


def _blank_nvcc_only(text: str) -> str:
    """`__launch_bounds__(256, 2)` and `__grid_constant__` as spaces (a newline stays one)."""
    out, pos = [], 0
    for m in _NVCC_ONLY.finditer(text):
        if m.start() < pos:
            continue
        end = m.end()
        if m.group().endswith("("):
            depth = 1
            while end < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
        out.append(text[pos:m.start()] + re.sub(r"[^\n]", " ", text[m.start():end]))
        pos = end
    return "".join(out) + text[pos:]


def _top(cursor, decl_lines: int):
    """The declarations of the user's source, inside `extern "C" { … }` and namespaces too."""
    for cur in cursor.get_children():
        if cur.location.file is None or cur.location.line <= decl_lines:
            continue
        if cur.kind.name in ("LINKAGE_SPEC", "NAMESPACE"):
            yield from _top(cur, decl_lines)
        else:
            yield cur


def _opaque_pointer(diagnostic, params) -> bool:
    """An unknown type behind a pointer (`curandState *s`, from a header only nvcc reads): a buffer of bytes."""
    return diagnostic.spelling.startswith("unknown type name") and any(
        p.extent.start.offset <= diagnostic.location.offset < p.extent.end.offset and _pointee(p.type) is not None
        for p in params)


_SCALARS = {"INT": "int32", "UINT": "uint32", "CHAR_S": "int8", "SCHAR": "int8", "UCHAR": "uint8", "CHAR_U": "uint8",
            "SHORT": "int16", "USHORT": "uint16", "LONG": "int64", "ULONG": "uint64", "LONGLONG": "int64",
            "ULONGLONG": "uint64", "FLOAT": "float32", "DOUBLE": "float64", "BOOL": "uint8"}


def _pointee(t):
    """What a pointer, reference or array parameter points to (an array parameter is a pointer, as C passes
    it), and whether it is const; None for a value."""
    t = t.get_canonical()
    kind = t.kind.name
    if kind in ("POINTER", "LVALUEREFERENCE", "RVALUEREFERENCE"):
        return t.get_pointee(), t.get_pointee().is_const_qualified()
    if kind.endswith("ARRAY"):  # clang keeps an element's const on the array
        return t.get_array_element_type(), t.is_const_qualified()
    return None


def _dtype(t) -> str | None:
    """A scalar type's dtype (an enum: its integer type's); None for what has none."""
    t = t.get_canonical()
    if t.kind.name == "ENUM":
        return _dtype(t.get_declaration().enum_type)
    return _SCALARS.get(t.kind.name)


def _param(kernel: str, index: int, p, in_head: list, loc) -> Param:
    from .compile_error import CompileError

    name = p.spelling or f"arg{index}"  # an unnamed parameter
    pointed = _pointee(p.type)
    if pointed is not None:
        to, const = pointed
        if any(d.spelling.startswith("unknown type name") and
               p.extent.start.offset <= d.location.offset < p.extent.end.offset for d in in_head):
            element = "uint8"  # its type is in a header only nvcc reads
        elif to.get_canonical().kind.name == "POINTER":
            element = "uint64"  # a buffer of pointers, 8 bytes each
        else:
            element = _dtype(to) or "uint8"  # void *, a struct: bytes
        return Param(name, "in" if const else "inout", element)
    dtype = _dtype(p.type)
    if dtype is not None:
        return Param(name, "scalar", dtype)
    spelled = p.type.spelling
    if p.type.get_canonical().kind.name == "RECORD":
        raise CompileError("USAGE", f"kernel {kernel}: parameter '{name}' ({spelled}) is a struct passed by value, "
                           f"which the shell cannot pass from the command line: pass a pointer to it "
                           f"(`const {spelled} *{name}`) and a buffer holding its bytes", loc(p.location))
    raise CompileError("USAGE", f"kernel {kernel}: parameter '{name}' is a '{spelled}', which the shell cannot "
                       "pass (it passes pointers, references, arrays, integers, floats, bool and enums)",
                       loc(p.location))

"""The names of a module's `__constant__`, `__device__` and `__managed__` variables, as the GPU side needs them to
ask the driver for each (cuModuleGetGlobal) after nvcc compiled the source: read by the same front end as the
simulator's (pcpp, then clang), but only the file-scope declarations — a source the interpreter cannot run still
has its variables listed, since nvcc, not the simulator, compiles it there."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .compile_error import CompileError


@dataclass(frozen=True)
class Variable:
    name: str
    space: str  # constant | global | managed
    dtype: str  # its element's numpy dtype, uint8 for a struct
    size: int  # bytes
    linkage: str  # "external", or "internal" (`static`: its name in the module is mangled, _ZL<len><name>)
    namespaced: bool  # declared in a namespace: its name in the module is mangled with it (not looked up)

    @property
    def module_names(self) -> tuple[str, ...]:
        """The names it may have in the compiled module, the plain one first."""
        return (self.name, f"_ZL{len(self.name)}{self.name}") if self.linkage == "internal" else (self.name,)


# a declaration (not a function's: no parenthesis before its `;` or `=`) with a memory-space qualifier
_DECLARED = re.compile(r"^[ \t]*(?:extern\s+\"C\"\s*\{\s*)?((?:(?:static|extern|const|volatile|__device__|__constant__|__managed__)\s+)+)"
                       r"[\w:<>,\s*]*?\b(\w+)\s*(?:\[[^\]]*\]\s*)*(?:=|;)", re.M)


def _by_pattern(source: str) -> list[Variable]:
    """Where the front end cannot read the source: its variables found by their declarations' shape (the driver
    confirms each name, and gives its size); their element type is not known here (shown as bytes)."""
    found: dict[str, Variable] = {}
    for m in _DECLARED.finditer(re.sub(r"/\*.*?\*/|//[^\n]*", " ", source, flags=re.S)):
        words = m.group(1).split()
        space = "managed" if "__managed__" in words else "constant" if "__constant__" in words else \
            "global" if "__device__" in words else None
        if space is not None and m.group(2) not in found:
            found[m.group(2)] = Variable(m.group(2), space, "uint8", 0,
                                         "internal" if "static" in words else "external", False)
    return list(found.values())


_DTYPES = {"INT": "int32", "UINT": "uint32", "CHAR_S": "int8", "SCHAR": "int8", "UCHAR": "uint8", "CHAR_U": "uint8",
           "SHORT": "int16", "USHORT": "uint16", "LONG": "int64", "ULONG": "uint64", "LONGLONG": "int64",
           "ULONGLONG": "uint64", "FLOAT": "float32", "DOUBLE": "float64", "POINTER": "uint64"}


def module_variables(source: str, path: str | None = None, root: Path | None = None) -> list[Variable]:
    """The file-scope variables of a source in device memory, in the order declared (a definition once). With
    `root` (grading), no file outside it is opened."""
    from .prelude import DECL_LINES
    from .signatures import declarations
    from .symbols import space_of

    try:
        tu, _ = declarations(source, path, str(root) if root is not None else None)  # the parameters' parse
    except CompileError as e:  # nvcc read what the front end cannot (or clang is not installed here)
        if e.code == "OUTSIDE_SUBMISSION":
            raise
        return _by_pattern(source)
    found: dict[str, Variable] = {}

    def walk(cursor, namespaced: bool):
        for cur in cursor.get_children():
            if cur.location.file is None or cur.location.line <= DECL_LINES:
                continue
            kind = cur.kind.name
            if kind in ("LINKAGE_SPEC", "NAMESPACE"):
                walk(cur, namespaced or kind == "NAMESPACE")
            elif kind == "VAR_DECL":
                space = space_of(cur)
                if space is not None and cur.spelling not in found:
                    t = cur.type.get_canonical()
                    while t.kind.name in ("CONSTANTARRAY", "INCOMPLETEARRAY"):
                        t = t.element_type.get_canonical()
                    found[cur.spelling] = Variable(cur.spelling, space, _DTYPES.get(t.kind.name, "uint8"),
                                                   max(cur.type.get_size(), 0), "internal" if cur.storage_class.name == "STATIC" else "external",
                                                   namespaced)
    walk(tu.cursor, False)
    return list(found.values())

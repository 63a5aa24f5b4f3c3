"""A module's own memory: its file-scope `__constant__`, `__device__` and `__managed__` variables, read from clang's
tree. Each is a symbol the backend allocates when the module is loaded (fresh each load, as the driver does), its
bytes set from the source's initialiser; the interpreter reaches it at the address the load gave it. A kernel that
writes `__constant__` memory is refused here, as nvcc refuses it when compiling."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ir
from .compile_error import CompileError
from .ctype import Array, Pointer, Scalar, Struct

SPACES = {"CUDACONSTANT_ATTR": "constant", "CUDADEVICE_ATTR": "global"}
MANAGED_MARK = "__managed__"  # the prelude's annotation on a `__managed__` variable (clang ignores the attribute)


@dataclass(frozen=True)
class SymbolDecl:
    """One variable of the module as the source gives it: its name, space, C type and initial bytes."""

    name: str
    space: str  # constant | global | managed
    type: object  # its ctype
    initial: bytes  # its bytes at load: the initialiser's, zero where it gives none
    loc: tuple

    @property
    def dtype(self) -> str:
        """The numpy dtype of its element, for `show`: float32 for `float c[9]`, uint8 for a struct."""
        t = self.type
        while isinstance(t, Array):
            t = t.elem
        if isinstance(t, Scalar) and t.name != "bool":
            return t.dtype.name
        return "uint64" if isinstance(t, Pointer) else "uint8"


def space_of(cur) -> str | None:
    """The space a file-scope variable lives in, or None for one of none of them (a host variable)."""
    kinds = {c.kind.name: c for c in cur.get_children()}
    if any(k == "ANNOTATE_ATTR" and c.spelling == MANAGED_MARK for k, c in kinds.items()):
        return "managed"
    for kind, space in SPACES.items():
        if kind in kinds:
            return space
    return None


def declare(program, cur, space: str) -> None:
    """Record a file-scope variable: its symbol (with its initial bytes) and the Var its uses read. An `extern`
    declaration names a definition elsewhere in the module; without one, nvcc (whole-program) cannot link it."""
    usr = cur.get_usr()
    t = program.type_of(cur)
    if cur.storage_class.name == "EXTERN" and _init(program, cur) is None:
        definition = cur.get_definition()
        if definition is None or not program._user(definition):
            raise CompileError("USAGE", f"extern {cur.spelling} is declared but not defined in this module (nvcc "
                               "without -rdc cannot link it)", program.loc(cur))
        program.module_vars.setdefault(usr, ir.Var(program.loc(cur), t, f"@{cur.spelling}", True))
        return
    if isinstance(t, Array) and t.n is None:
        program.refuse(cur, f"a {space} array without a size")
    if t.size == 0:
        program.refuse(cur, f"a {space} variable of no size")
    data = bytearray(t.size)
    init = _init(program, cur)
    if init is not None:
        _fill(program, init, t, data, 0)
    program.module_vars[usr] = ir.Var(program.loc(cur), t, f"@{cur.spelling}", True)
    program.symbols[cur.spelling] = SymbolDecl(cur.spelling, space, t, bytes(data), program.loc(cur))


def reference(program, ref, loc) -> ir.Var | None:
    """A use of a module variable, or None when `ref` is not one."""
    v = program.module_vars.get(ref.get_usr()) if ref.kind.name == "VAR_DECL" else None
    return None if v is None else ir.Var(loc, v.type, v.name, True)


def _init(program, cur):
    """The initialiser's cursor, or None: an array's size is a child too, so the tokens after the name decide."""
    toks = program._tokens(cur)
    rest = toks[toks.index(cur.spelling) + 1:] if cur.spelling in toks else []
    if not any(t in ("=", "{", "(") for t in rest):
        return None
    kids = [c for c in cur.get_children() if not c.kind.name.endswith("_ATTR")
            and c.kind.name not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
    return kids[-1] if kids else None


def _fill(program, cur, t, data: bytearray, offset: int) -> None:
    """Write the constant initialiser `cur` of a `t` at `offset`: scalars as clang evaluates them, arrays and
    structs element by element (what the list leaves out stays zero)."""
    while cur.kind.name in ("UNEXPOSED_EXPR", "PAREN_EXPR") and isinstance(t, (Array, Struct)):
        kids = list(cur.get_children())
        if len(kids) != 1:
            break
        cur = kids[0]
    k = cur.kind.name
    if isinstance(t, Array):
        if k == "STRING_LITERAL":
            text = b"".join(string_value(s) for s in program._tokens(cur) if s.endswith('"'))
            data[offset:offset + min(len(text), t.size)] = text[:t.size]
            return
        if k != "INIT_LIST_EXPR":
            program.refuse(cur, "an array initialiser that is not a list of constants")
        for i, item in enumerate(cur.get_children()):
            _fill(program, item, t.elem, data, offset + i * t.elem.size)
        return
    if isinstance(t, Struct):
        if k != "INIT_LIST_EXPR":
            program.refuse(cur, "a struct initialiser that is not a list of constants")
        for (_, ft, off), item in zip(t.fields, cur.get_children()):
            _fill(program, item, ft, data, offset + off)
        return
    if k == "INIT_LIST_EXPR":  # `int x = {5}` / `int x{}`
        items = list(cur.get_children())
        if items:
            _fill(program, items[0], t, data, offset)
        return
    value = program._evaluate(cur)
    if value is None or (isinstance(t, Pointer) and value != 0):
        program.refuse(cur, "an initialiser of module memory that is not a constant")
    dtype = np.dtype(np.uint64) if isinstance(t, Pointer) else t.dtype
    with np.errstate(all="ignore"):
        raw = np.array(value).astype(dtype).tobytes()
    data[offset:offset + len(raw)] = raw


def refuse_constant_writes(program, fn: ir.Function) -> None:
    """nvcc refuses device code that writes a `__constant__` variable (an assignment, ++/--, an atomic on its
    address): so does the simulator, at `kernel define`/`load`."""
    constant = {f"@{name}" for name, s in program.symbols.items() if s.space == "constant"}
    if not constant:
        return

    def check(node):
        target = None
        if isinstance(node, ir.Assign):
            target = node.target
        elif isinstance(node, ir.Unary) and node.op in ("++pre", "--pre", "post++", "post--"):
            target = node.expr
        elif isinstance(node, ir.Call) and node.name.startswith("atomic") and node.args:
            target = node.args[0]
        root = _root(target) if target is not None else None
        if root is not None and root.name in constant:
            raise CompileError("USAGE", f"__constant__ variable '{root.name[1:]}' is written in device code: nvcc "
                               "refuses it (constant memory is read-only for kernels)", node.loc)
        for name in getattr(node, "__dataclass_fields__", ()):
            value = getattr(node, name)
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, tuple):
                    child = child[1]
                if isinstance(child, ir.Node):
                    check(child)
    check(fn.body)


def _root(e):
    """The variable an lvalue (or an address) is part of: `c`, `c[i]`, `c[i].x`, `&c[i]`, `c + i`."""
    while True:
        if isinstance(e, ir.Var):
            return e
        if isinstance(e, (ir.Cast, ir.Decay)):
            e = e.expr
        elif isinstance(e, ir.Unary) and e.op == "&":
            e = e.expr
        elif isinstance(e, ir.Index):
            e = e.base
        elif isinstance(e, ir.Member) and not e.arrow:
            e = e.base
        elif isinstance(e, ir.Binary) and e.op in ("+", "-") and isinstance(e.type, Pointer):
            e = e.a if isinstance(e.a.type, Pointer) else e.b
        else:
            return None


def string_value(text: str) -> bytes:
    """A string literal's bytes: its escapes read as C reads them, other characters as UTF-8."""
    import codecs

    body = text[text.index('"') + 1:-1]
    return codecs.escape_decode(body.encode("utf-8"))[0]

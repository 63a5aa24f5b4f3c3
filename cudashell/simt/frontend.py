"""CUDA C → the typed tree (ir.py), through a real front end: pcpp preprocesses (macros, #if, #include beside
the file), libclang parses and types the result as CUDA device code (every implicit conversion is in its
tree). What the interpreter cannot run faithfully is refused here, naming the construct and its line:col.
Imported only when a kernel is defined: clang costs time to load."""

from __future__ import annotations

import bisect
import io
import re
from pathlib import Path

import numpy as np

from . import ir
from .bounds import read_include, refuse_deep, spend_expansion
from .classes import NOT_EXPRESSIONS, RECORDS, ClassesMixin, callee_at
from .compile_error import CompileError
from .coopfront import HANDLE, declared_by_cg
from .coopfront import call as cg_call
from .ctype import (
    BOOL,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    UINT,
    ULONG,
    VOID,
    Array,
    Pointer,
    Scalar,
    Struct,
)
from .prelude import DECL_LINES, DECLS, MACROS
from .symbols import (
    check_constant_total,
    constant_path,
    declare,
    reference,
    refuse_constant_writes,
    space_of,
    string_value,
)
from .templates import instantiate


def _clang():
    try:
        import clang.cindex as ci
    except ImportError:  # pragma: no cover - a dependency
        raise CompileError("NOT_SUPPORTED_ON_SIM", "the simulator's C front end (libclang) is not installed: "
                           "pip install libclang") from None
    return ci


# ------------------------------------------------------------------ preprocessing
_LINE = re.compile(r'#line (\d+) "(.*)"')
CUDA_HEADERS = {"cuda_runtime.h", "cuda.h", "stdio.h", "assert.h", "math.h", "stdint.h", "stdlib.h",
                "device_launch_parameters.h", "cuda_runtime_api.h", "cstdio", "cmath", "cstdint", "cassert",
                "math_constants.h", "cooperative_groups.h", "cuda_texture_types.h", "texture_fetch_functions.h",
                "device_functions.h", "sm_20_atomic_functions.h", "helper_cuda.h", "helper_math.h"}
CUDA_HEADER_PATHS = {"cooperative_groups/reduce.h", "cooperative_groups/scan.h",  # named with their folder
                     "cooperative_groups/memcpy_async.h"}


def built_in_header(name: str) -> bool:
    return Path(name).name in CUDA_HEADERS or name.replace("\\", "/") in CUDA_HEADER_PATHS


PASSED = {"pragma", "line", "ident"}  # directives pcpp leaves to clang: none of them opens a file
FILE_DIRECTIVE = re.compile(r"\bdependency\b")  # `#pragma GCC dependency "f"` (or through _Pragma) makes clang stat f


def confined(name: str, folders: list[str], root: Path | None, what: str) -> list[Path]:
    """Where `name` may be looked for — as written when absolute, else in each of `folders` — all inside `root`
    when one is set (grading), else the directive is OUTSIDE_SUBMISSION: refused before any of them is opened or
    looked at, so that neither the file's text nor whether it exists reaches the submission."""
    places = [Path(name)] if Path(name).is_absolute() else [Path(f or ".") / name for f in folders]
    if root is not None:
        for place in places:
            if not place.resolve().is_relative_to(root.resolve()):
                raise CompileError("OUTSIDE_SUBMISSION", f"{what} {name!r} is outside the submission's folder {root}")
    return places


def preprocess(source: str, filename: str, include_dirs: list[Path], root: Path | None = None,
               missing_headers_ok: bool = False) -> tuple[str, list]:
    """The source with macros expanded and includes inlined; and, per output line, its (file, line). With `root`
    (grading) no file outside that folder is opened, nor its existence tested, by any directive: pcpp opens the
    files (each through on_file_open), and every directive that could make clang open one is refused here.
    With `missing_headers_ok` (signatures.py, reading only declarations) a `#include <…>` not found is left out:
    nvcc finds it on a GPU."""
    try:
        import pcpp
    except ImportError:  # pragma: no cover - a dependency
        raise CompileError("NOT_SUPPORTED_ON_SIM", "the simulator's preprocessor (pcpp) is not installed") from None

    class Pre(pcpp.Preprocessor):
        read = len(source.encode())  # bytes of the source and the files it included (bounds.read_include)
        expanded = 0  # tokens its macros expanded to (bounds.spend_expansion)

        def on_file_open(self, is_system_include, includepath):
            confined(includepath, [""], root, "#include")
            text, self.read = read_include(includepath, self.read)
            return io.StringIO(text)

        def expand_macros(self, tokens, expanding_from=[]):  # noqa: B006 - pcpp's own signature
            out = super().expand_macros(tokens, expanding_from)
            if expanding_from:  # a macro's replacement, expanded
                self.expanded = spend_expansion(self.expanded, len(out), (Path(self.source).name, self.linemacro))
            return out

        refused: CompileError | None = None  # met inside an #if, whose evaluator turns errors into on_error

        def on_unknown_macro_function_in_expr(self, ident):
            if ident not in ("__has_include", "__has_include_next"):
                return super().on_unknown_macro_function_in_expr(ident)

            def has(arg: str) -> int:
                name = arg.strip('"')
                try:
                    places = confined(name, [*self.temp_path[:1], *self.path], root, ident)
                except CompileError as e:
                    self.refused = e
                    raise
                return int(built_in_header(name) or any(p.is_file() for p in places))
            return has

        def on_include_not_found(self, is_malformed, is_system_include, curdir, includepath):
            if built_in_header(includepath) or (missing_headers_ok and is_system_include):  # built in
                raise pcpp.OutputDirective(pcpp.Action.IgnoreAndRemove)
            raise CompileError("USAGE", f"cannot open include file '{includepath}' (only files beside the source "
                               "are found; CUDA's own headers are built in)")

        def on_error(self, file, line, msg):
            if self.refused is not None:
                raise self.refused
            raise CompileError("USAGE", f"{file}:{line}: {msg}")

        def on_directive_unknown(self, directive, toks, ifpassthru, precedingtoks):
            """Called for live lines only (pcpp skips those an #if left out, where an #error means nothing)."""
            text = "".join(tok.value for tok in toks).strip()
            where = (directive.source, directive.lineno, 2)
            if directive.value == "error":  # nvcc stops here: so does the shell, in its own error line
                raise CompileError("USAGE", f"#error {text}", where)
            if directive.value == "warning":  # nvcc goes on
                raise pcpp.OutputDirective(pcpp.Action.IgnoreAndRemove)
            if directive.value in PASSED and not FILE_DIRECTIVE.search(text):
                return None  # passed through: `#pragma unroll` changes nothing the interpreter computes
            named = re.search(r'"([^"]+)"|<([^>]+)>', "".join(t.value for t in self.expand_macros(list(toks))))
            if named:  # `#include_next`, `#import`, `#embed`…: clang would open the file
                confined(named.group(1) or named.group(2), [*self.temp_path[:1], *self.path], root,
                         f"#{directive.value}")
            raise CompileError("NOT_SUPPORTED_ON_SIM", f"#{directive.value} {text} is not in the simulator's "
                               "subset (#include a file beside the source instead)", where)

    pre = Pre()
    pre.line_directive = "#line"
    for d in include_dirs:
        pre.add_path(str(d))
    for name, value in MACROS.items():
        pre.define(f"{name} {value}")
    try:
        pre.parse(source, filename)
        out = io.StringIO()
        pre.write(out)
    except CompileError:
        raise
    except Exception as e:  # pcpp's own refusals
        raise CompileError("USAGE", f"preprocessing {filename}: {e}") from None
    lines, where = [], []
    file, line = filename, 1
    for text in out.getvalue().split("\n"):
        m = _LINE.fullmatch(text.strip())
        if m:
            line, file = int(m.group(1)), m.group(2)
            lines.append("")
            where.append((file, 0))
            continue
        lines.append(text)
        where.append((file, line))
        line += 1
    text = "\n".join(lines)
    refuse_deep(text, where)  # before clang, whose parser would crash on it
    return text, where


# ------------------------------------------------------------------ parsing
ARGS = ["-x", "cuda", "-nocudainc", "-nocudalib", "--cuda-device-only", "--cuda-gpu-arch=sm_90", "-std=c++17",
        "-Wno-unknown-cuda-version", "-ferror-limit=0"]  # host code may hold many errors the simulator ignores
REFUSED = {  # cursor kinds the interpreter does not run, and what to call them
    "ASM_STMT": "inline PTX (asm)", "GCC_ASM_STMT": "inline PTX (asm)",
    "MS_ASM_STMT": "inline assembly", "CUDA_KERNEL_CALL_EXPR": "dynamic parallelism (a launch from a kernel)",
    "GOTO_STMT": "goto", "LABEL_STMT": "labels and goto", "CXX_TRY_STMT": "exceptions",
    "CXX_NEW_EXPR": "new", "CXX_DELETE_EXPR": "delete",
}


NAMESPACE_NAMES = ("NAMESPACE_ALIAS", "USING_DIRECTIVE", "USING_DECLARATION")  # `namespace cg = …;`, `using …;`
DEVICE_ATTRS = {"CUDADEVICE_ATTR", "CUDAGLOBAL_ATTR"}
OUTSIDE = [
    (r"\b(cudaTextureObject_t|cudaSurfaceObject_t|tex[123]D\w*|texture\s*<|surf[123]D\w*)", "textures and surfaces"),
]


def parse(source: str, filename: str = "kernel.cu", include_dirs: list[Path] | None = None,
          root: Path | None = None) -> "Program":
    # a system header the simulator does not have is left out: what host code uses from it is host code's, and
    # device code that uses it meets clang's "undeclared" below
    text, where = preprocess(source, filename, include_dirs or [], root, missing_headers_ok=True)
    if FILE_DIRECTIVE.search("\n".join(re.findall(r"_Pragma\s*\((.*?)\)", text))):
        raise CompileError("NOT_SUPPORTED_ON_SIM", "_Pragma(\"GCC dependency …\") is not in the simulator's subset")
    for pattern, what in OUTSIDE:  # what clang would only call an unknown name: say what it is
        m = re.search(pattern, text)
        if m:
            line = text.count("\n", 0, m.start())
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            raise CompileError("NOT_SUPPORTED_ON_SIM", f"not in the simulator's subset: {what}",
                               (where[line][0], where[line][1], col))
    text = instantiate(text, lambda t: _tu(t), lambda location: _where(where, location))
    tu = _tu(text)
    return Program(tu, text, where)


def _tu(text: str):
    ci = _clang()
    tu = ci.Index.create().parse("__cush__.cu", args=ARGS, unsaved_files=[("__cush__.cu", DECLS + text)],
                                 options=0)
    if any(True for _ in tu.get_includes()):  # pcpp inlined every #include: what clang read, no directive asked for
        raise CompileError("NOT_SUPPORTED_ON_SIM", "the source reads a file by a means the simulator does not run")
    return tu


def _where(where, location):
    """A place in a round of templates.py's text as the user's file:line:col (its copies keep the lines)."""
    line = location.line - DECL_LINES
    if line < 1 or line > len(where):
        return None
    return (where[line - 1][0], where[line - 1][1], location.column)


class Program(ClassesMixin):
    """The functions of one source, converted; `kernels` are the __global__ ones, with their parameters."""

    def __init__(self, tu, text: str, where: list):
        self.ci = _clang()
        self.where = where
        self.text = DECLS + text
        self.structs: dict = {}
        self.functions: dict[str, ir.Function] = {}
        self.method_names: dict = {}  # a member function's definition (its cursor's hash) → its function's name
        self.this = self.made = None  # in a member function: `this`, and a constructor's object
        self.returns_ref = False  # the function being converted returns a reference
        self.captured: dict = {}  # in a lambda's body: a captured variable's hash → (field, by reference)
        self.lambdas: dict = {}  # a lambda's closure type (its declaration's hash) → the lambda expression
        self.member_inits: dict = {}  # (struct's name, member) → the member's own initializer's cursor
        self.overloads: dict = {}  # a user function's USR → its name in `functions` (overloads get `#2`, …)
        user = self.ci.SourceRange.from_locations(  # the prelude's tokens are never looked up: not made
            tu.get_location("__cush__.cu", len(DECLS.encode())), tu.cursor.extent.end)
        toks = list(tu.get_tokens(extent=user))
        self.tok_offsets = [t.extent.start.offset for t in toks]
        self.tok_text = [t.spelling for t in toks]
        host = _host_bodies(tu.cursor)
        self._refuse_device_launches(host)
        errors = [d for d in tu.diagnostics if d.severity >= 3 and not _inside(d.location.offset, host)]
        if errors:
            d = errors[0]
            called = re.fullmatch(r"use of undeclared identifier '(\w+)'", d.spelling)
            if called and self._tok_after(d.location.offset + len(called.group(1))) == "(":
                # nvcc knows more device functions than the simulator declares: say which one it lacks
                raise CompileError("NOT_SUPPORTED_ON_SIM", f"not in the simulator's subset (or not declared): the "
                                   f"function '{called.group(1)}'", self.loc_of(d.location))
            cg = re.search(r"named '(\w+)' in namespace 'cooperative_groups'", d.spelling)
            if cg:  # a part of cooperative groups the prelude does not declare: nvcc has it, the simulator does not
                raise CompileError("NOT_SUPPORTED_ON_SIM", f"not in the simulator's subset: cooperative groups' "
                                   f"{cg.group(1)}", self.loc_of(d.location))
            raise CompileError("USAGE", f"error: {d.spelling}", self.loc_of(d.location))
        self.kernel_names: list[str] = []
        self.shared_globals: list[ir.Decl] = []  # file-scope __shared__ variables
        self.global_shared: dict = {}  # their cursors' hashes → Var
        self.host_values: dict = {}  # file-scope variables of no memory space: hash → (const, value or None)
        self.symbols: dict = {}  # the module's __constant__/__device__/__managed__ variables (symbols.SymbolDecl)
        self.module_vars: dict = {}  # their USRs → Var (an extern declaration and its definition share one)
        self.constant_vars: set = set()  # the names of those Vars in __constant__ memory
        self.addresses: dict = {}  # their Vars' names → the address a load gave them (the backend binds it)
        for cur in self._top(tu.cursor):
            self._top_decl(cur)
        if self.symbols:  # once every variable is declared
            check_constant_total(self)
            for fn in self.functions.values():
                refuse_constant_writes(self, fn)
        if not self.kernel_names:
            raise CompileError("USAGE", "no __global__ function found", None)

    # -------------------------------------------------------------- locations and tokens
    def loc_of(self, location) -> tuple:
        line = location.line - DECL_LINES
        if line < 1 or line > len(self.where):
            return ("<built-in>", location.line, location.column)
        f, ln = self.where[line - 1]
        return (f, ln, location.column)

    def _refuse_device_launches(self, host: list) -> None:
        """A `<<<` outside host code is a launch from the device (dynamic parallelism): refused by name, before clang's
        own words about it. In host code (a course file's `main`) launches are nvcc's business, not the simulator's."""
        for offset, text in zip(self.tok_offsets, self.tok_text):
            if text == "<<<" and not _inside(offset, host):
                line = self.text.count("\n", 0, offset) + 1
                col = offset - self.text.rfind("\n", 0, offset)
                f, ln = self.where[line - DECL_LINES - 1] if 0 < line - DECL_LINES <= len(self.where) else ("?", line)
                raise CompileError("NOT_SUPPORTED_ON_SIM", "not in the simulator's subset: dynamic parallelism (a "
                                   "launch from a kernel)", (f, ln, col))

    def loc(self, cur) -> tuple:
        return self.loc_of(cur.location)

    def refuse(self, cur, what: str):
        raise CompileError("NOT_SUPPORTED_ON_SIM", f"not in the simulator's subset: {what}", self.loc(cur))

    def _tok_after(self, offset: int) -> str:
        i = bisect.bisect_left(self.tok_offsets, offset)
        return self.tok_text[i]

    def _tokens(self, cur) -> list[str]:
        a = bisect.bisect_left(self.tok_offsets, cur.extent.start.offset)
        b = bisect.bisect_left(self.tok_offsets, cur.extent.end.offset)
        return self.tok_text[a:b]

    def _user(self, cur) -> bool:
        return cur.location.file is not None and cur.location.line > DECL_LINES

    def _top(self, cursor):
        for cur in cursor.get_children():
            if not self._user(cur):
                continue
            if cur.kind.name in ("LINKAGE_SPEC", "NAMESPACE"):  # extern "C" { … }, namespace X { … }
                yield from self._top(cur)
            else:
                yield cur

    # -------------------------------------------------------------- types
    def ctype(self, t):
        K = self.ci.TypeKind
        t = t.get_canonical()
        k = t.kind
        simple = {K.INT: INT, K.UINT: UINT, K.CHAR_S: Scalar("int8"), K.SCHAR: Scalar("int8"),
                  K.UCHAR: Scalar("uint8"), K.CHAR_U: Scalar("uint8"), K.SHORT: Scalar("int16"),
                  K.USHORT: Scalar("uint16"), K.LONG: LONG, K.ULONG: ULONG, K.LONGLONG: LONG, K.ULONGLONG: ULONG,
                  K.FLOAT: FLOAT, K.DOUBLE: DOUBLE, K.BOOL: BOOL, K.VOID: VOID}
        if k in simple:
            return simple[k]
        if k == K.POINTER:
            return Pointer(self.ctype(t.get_pointee()))
        if k == K.LVALUEREFERENCE:
            return Pointer(self.ctype(t.get_pointee()))  # a reference is a pointer the language dereferences
        if k == K.CONSTANTARRAY:
            return Array(self.ctype(t.element_type), t.element_count)
        if k == K.INCOMPLETEARRAY:
            return Array(self.ctype(t.element_type), None)
        if k == K.NULLPTR:
            return Pointer(VOID)
        if k == K.ENUM:
            return self.ctype(t.get_declaration().enum_type)
        if k == K.RECORD and declared_by_cg(t.get_declaration()):
            return HANDLE  # a cooperative group's handle: a register value (coop.py)
        if k == K.RECORD:
            return self._record(t)
        raise CompileError("NOT_SUPPORTED_ON_SIM", f"not in the simulator's subset: the type '{t.spelling}'", None)

    def type_of(self, cur):
        try:
            return self.ctype(cur.type)
        except CompileError as e:
            raise CompileError(e.code, e.message, e.where or self.loc(cur)) from None

    # -------------------------------------------------------------- declarations
    def _top_decl(self, cur):
        kind = cur.kind.name
        if kind in REFUSED:
            self.refuse(cur, REFUSED[kind])
        if kind == "FUNCTION_DECL":
            attrs = {c.kind.name for c in cur.get_children()}
            body = [c for c in cur.get_children() if c.kind.name == "COMPOUND_STMT"]
            if not body:
                return  # a declaration; its definition comes elsewhere
            if "CUDAGLOBAL_ATTR" not in attrs and "CUDADEVICE_ATTR" not in attrs:
                return  # host code: not the simulator's to run
            kernel = "CUDAGLOBAL_ATTR" in attrs  # a kernel is launched by its own name; a device function is
            # `X::f` in namespace X, and an overload (`operator*(V, float)`, `operator*(float, V)`) has its own name
            name = self._function_name(cur, cur.spelling if kernel else self._qualified(cur))
            self.functions[name] = self._function(cur, body[0], kernel, name=name)
            if kernel:
                self.kernel_names.append(name)
        elif kind == "FUNCTION_TEMPLATE":
            return  # instantiated copies (templates.py) are what runs
        elif kind in ("CLASS_TEMPLATE", "CLASS_TEMPLATE_PARTIAL_SPECIALIZATION", "CXX_METHOD", "CONSTRUCTOR",
                      "CONVERSION_FUNCTION", "DESTRUCTOR"):
            return  # clang instantiates class templates; a member function is converted when it is called
        elif kind in ("STRUCT_DECL", "CLASS_DECL", "TYPEDEF_DECL", "ENUM_DECL", "UNION_DECL", "TYPE_ALIAS_DECL",
                      "STATIC_ASSERT", "UNEXPOSED_DECL", *NAMESPACE_NAMES):
            if kind in ("STRUCT_DECL", "CLASS_DECL"):
                self.type_of(cur)
            return
        elif kind == "VAR_DECL":
            if self._module_variable(cur) or self._host_variable(cur):
                return
            if "CUDASHARED_ATTR" not in {c.kind.name for c in cur.get_children()}:
                self.refuse(cur, "a global variable (__device__ or __constant__ memory)")
            t = self.type_of(cur)
            v = ir.Var(self.loc(cur), t, f"::{cur.spelling}", True)
            self.global_shared[cur.hash] = v
            extern = cur.storage_class.name == "EXTERN" or (isinstance(t, Array) and t.n is None)
            self.shared_globals.append(ir.Decl(self.loc(cur), v, None, True, extern))
        else:
            self.refuse(cur, kind.lower().replace("_", " "))

    def _host_variable(self, cur) -> bool:
        """A file-scope variable in no CUDA memory space (no attribute) is host memory; device code may still use
        it when it is a const (or constexpr) scalar with a constant initializer (`const int N = 256;`), as nvcc
        allows: its value, as clang evaluates it, stands in each use (`host_values`). Any other is refused where
        device code uses it (`_host_value`), as nvcc refuses it there; host code may use it freely."""
        if any(c.kind.name.endswith("_ATTR") for c in cur.get_children()):
            return False
        value = None
        elem = cur.type
        while elem.kind in (self.ci.TypeKind.CONSTANTARRAY, self.ci.TypeKind.INCOMPLETEARRAY):
            elem = elem.element_type
        if cur.type.is_const_qualified():
            try:
                t = self.ctype(cur.type)
            except CompileError:
                t = None
            if isinstance(t, Scalar):
                value = self._evaluate(cur)
        self.host_values[cur.hash] = (elem.is_const_qualified(), value)
        return True

    def _constant_scalar(self, cur) -> bool:
        """A const scalar whose initializer clang evaluates: the same value wherever it is stored."""
        return cur.type.is_const_qualified() and isinstance(self.type_of(cur), Scalar) \
            and self._evaluate(cur) is not None

    def _host_value(self, cur, ref, loc) -> ir.Const:
        """A use of a host variable in device code: the const's value, or the refusal nvcc would give."""
        const, value = self.host_values[ref.hash]
        if value is not None:
            return _scalar_const(loc, self.type_of(cur), value)
        if const:
            self.refuse(cur, f"the file-scope const '{ref.spelling}' in device code: nvcc lets device code use a "
                        "file-scope const only when it is a scalar with a constant initializer (put it in "
                        "__constant__ memory)")
        self.refuse(cur, f"the host variable '{ref.spelling}' in device code: a file-scope variable without "
                    "__device__ or __constant__ is host memory, and nvcc refuses it in device code too")

    def _qualified(self, cur) -> str:
        """A device function's name in the program: `X::f` inside namespace X, so that two namespaces' f are two
        functions (and calls name the one clang resolved)."""
        parts = [cur.spelling]
        parent = cur.semantic_parent
        while parent is not None and parent.kind.name == "NAMESPACE":
            parts.append(parent.spelling or "(anonymous)")
            parent = parent.semantic_parent
        return "::".join(reversed(parts))

    def _module_variable(self, cur) -> bool:
        """A file-scope __constant__, __device__ or __managed__ variable becomes one of the module's symbols."""
        space = space_of(cur)
        if space is None:
            return False
        declare(self, cur, space)
        return True

    def _function(self, cur, body, kernel: bool, name: str | None = None, owner=None) -> ir.Function:
        name = name or cur.spelling
        self.fn = name
        self.scope: dict[str, ir.Var] = {}
        self.refs: set = set()  # reference variables: a use reads through the pointer they hold
        self.names: set[str] = set()
        self.addressed = self._addressed(body)
        self.readonly_params = {p.spelling for p in cur.get_children() if p.kind.name == "PARM_DECL"
                                and p.type.kind == self.ci.TypeKind.POINTER and p.type.is_restrict_qualified()
                                and p.type.get_pointee().is_const_qualified()}
        params = self._member_params(cur, owner, self.loc(cur))
        defaults = [None] * len(params)
        for p in cur.get_children():
            if p.kind.name != "PARM_DECL":
                continue
            v = self._var(p)
            params.append(v)
            init = [c for c in p.get_children() if c.kind.name not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
            defaults.append(self.expr(init[-1]) if init else None)
        ret = self.ctype(cur.result_type)
        self.returns_ref = cur.result_type.kind == self.ci.TypeKind.LVALUEREFERENCE
        code = self.stmt(body)
        if self.made is not None:  # a constructor: it returns the object it made
            ret, code = self.made.type, self._constructed(cur, owner, code, self.loc(cur))
        fn = ir.Function(name, params, ret, code, kernel, self.loc(cur), defaults)
        stmts, toks = fn.body.stmts, self._tokens(cur)
        head = toks[:toks.index("{")] if "{" in toks else toks  # the declaration before the body
        if stmts and isinstance(stmts[-1], ir.Return) and _straight(stmts[:-1]) and not kernel \
                and self.made is None and not self.returns_ref and "noinline" not in head:
            fn.returns, fn.prologue = stmts[-1].value, stmts[:-1]
        _check(fn.body)
        return fn

    def _addressed(self, body) -> set:
        """Variables whose address is taken (`&x`, or passed to a reference parameter): they live in memory,
        not in registers."""
        found = set()

        def mark(c):
            inner = c
            while True:
                if inner.kind.name == "DECL_REF_EXPR":
                    if inner.referenced is not None:
                        found.add(inner.referenced.hash)
                    return
                if inner.kind.name not in ("UNEXPOSED_EXPR", "PAREN_EXPR"):
                    return  # `&p[i]`, `&s.x`: the address of an element, not of the variable p
                kids = list(inner.get_children())
                if not kids:
                    return
                inner = kids[0]

        def walk(c):
            if c.kind.name == "LAMBDA_EXPR":
                found.update(self._captured_by_reference(c))
            if c.kind.name == "UNARY_OPERATOR" and self._tok_after(c.extent.start.offset) == "&":
                mark(list(c.get_children())[0])
            if c.kind.name == "CALL_EXPR" and c.referenced is not None and not declared_by_cg(c.referenced):
                params = [p for p in c.referenced.get_children() if p.kind.name == "PARM_DECL"]
                for p, a in zip(params, list(c.get_children())[1:]):
                    if p.type.kind == self.ci.TypeKind.LVALUEREFERENCE:
                        mark(a)
            for k in c.get_children():
                walk(k)
        walk(body)
        return found

    def _var(self, decl) -> ir.Var:
        t = self.type_of(decl)
        if decl.kind.name == "PARM_DECL" and isinstance(t, Array):  # `float in[]` is a pointer, as C passes it
            t = Pointer(t.elem)
        name = decl.spelling or "_"
        unique = name
        n = 1
        while unique in self.names:
            n += 1
            unique = f"{name}#{n}"
        self.names.add(unique)
        reference = decl.type.kind == self.ci.TypeKind.LVALUEREFERENCE
        if reference and not self._by_address(decl):  # `const float &`: a value
            t, reference = t.to, False
        mem = isinstance(t, (Array, Struct)) or decl.hash in self.addressed
        v = ir.Var(self.loc(decl), t, unique, mem)
        self.scope[decl.hash] = v
        if reference:
            self.refs.add(decl.hash)
        return v

    # -------------------------------------------------------------- statements
    def stmt(self, cur) -> ir.Node:
        k = cur.kind.name
        loc = self.loc(cur)
        kids = list(cur.get_children())
        if k in REFUSED:
            self.refuse(cur, REFUSED[k])
        if k == "COMPOUND_STMT":
            return ir.Block(loc, [self.stmt(c) for c in kids])
        if k == "DECL_STMT":
            return ir.Block(loc, [self._decl(c) for c in kids])
        if k == "NULL_STMT":
            return ir.Block(loc, [])
        if k == "IF_STMT":
            return ir.If(loc, self.expr(kids[0]), self.stmt(kids[1]), self.stmt(kids[2]) if len(kids) > 2 else None)
        if k == "WHILE_STMT":
            return ir.Loop(loc, None, self.expr(kids[0]), None, self.stmt(kids[1]))
        if k == "DO_STMT":
            return ir.Loop(loc, None, self.expr(kids[1]), None, self.stmt(kids[0]), test_first=False)
        if k == "FOR_STMT":
            return self._for(cur, kids, loc)
        if k == "BREAK_STMT":
            return ir.Jump(loc, "break")
        if k == "CONTINUE_STMT":
            return ir.Jump(loc, "continue")
        if k == "RETURN_STMT":
            if not kids and self.made is not None:  # `return;` in a constructor: the object is its result
                return ir.Return(loc, ir.Var(loc, self.made.type, self.made.name, True))
            if kids and self.returns_ref:  # `return *this;` from a `T &` function: where it is
                return ir.Return(loc, self._reference_to(self.expr(kids[0]), loc))
            return ir.Return(loc, self.expr(kids[0]) if kids else None)
        if k == "SWITCH_STMT":
            return self._switch(cur, kids, loc)
        if k in ("CASE_STMT", "DEFAULT_STMT"):
            self.refuse(cur, "a case label outside a switch's own block")
        if k == "UNEXPOSED_STMT" and len(kids) == 1:  # an attributed statement: `#pragma unroll` on a loop
            return self.stmt(kids[0])
        if k.endswith("_EXPR") or k.endswith("_OPERATOR") or k.endswith("_LITERAL"):
            return ir.ExprStmt(loc, self.expr(cur))
        self.refuse(cur, k.lower().replace("_", " "))

    def _decl(self, cur) -> ir.Node:
        if cur.kind.name != "VAR_DECL":
            if cur.kind.name in ("TYPEDEF_DECL", "STRUCT_DECL", "TYPE_ALIAS_DECL", "ENUM_DECL", "STATIC_ASSERT",
                                 *NAMESPACE_NAMES):
                return ir.Block(self.loc(cur), [])
            self.refuse(cur, cur.kind.name.lower().replace("_", " "))
        kids = list(cur.get_children())
        attrs = {c.kind.name for c in kids}
        shared = "CUDASHARED_ATTR" in attrs
        if "CUDACONSTANT_ATTR" in attrs:
            self.refuse(cur, "__constant__ memory declared inside a function (nvcc allows it at file scope only)")
        storage = cur.storage_class.name if hasattr(cur, "storage_class") else ""
        if storage == "STATIC" and not shared and not self._constant_scalar(cur):  # a static const is its value
            self.refuse(cur, "a static local variable")
        if cur.type.kind == self.ci.TypeKind.LVALUEREFERENCE:
            self.refuse(cur, "a reference variable (references are passed as parameters only)")
        v = self._var(cur)
        if shared:
            v.name = f"{self.fn}:{v.name}"  # one per function: two functions' `s` are two arrays
        exprs = [c for c in kids if not c.kind.name.endswith("_ATTR") and c.kind.name not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
        toks = self._tokens(cur)
        has_init = any(t in ("=", "{", "(") for t in toks[toks.index(cur.spelling) + 1:] if cur.spelling in toks) \
            and exprs and not (isinstance(v.type, Array) and toks[toks.index(cur.spelling) + 1:][:1] == ["["]
                               and "=" not in toks and "{" not in toks)
        init = self.expr(exprs[-1]) if has_init else None
        if init is None and exprs and not shared and self._constructs(exprs[-1]):
            init = self._constructed_each(v.type, self.expr(exprs[-1]))  # `T x;` runs T's default constructor
        if shared and init is not None:
            self.refuse(cur, "an initializer on __shared__ memory")
        return ir.Decl(self.loc(cur), v, init, shared, storage == "EXTERN")

    def _for(self, cur, kids, loc) -> ir.Loop:
        """clang leaves absent parts of `for (init; cond; step)` out of the children: place the ones given by
        where they are in the source."""
        toks_at = bisect.bisect_left(self.tok_offsets, cur.extent.start.offset)
        depth, semis, i = 0, [], toks_at
        while len(semis) < 2:
            t = self.tok_text[i]
            if t == "(":
                depth += 1
            elif t == ")":
                depth -= 1
            elif t == ";" and depth == 1:
                semis.append(self.tok_offsets[i])
            i += 1
        init = cond = step = None
        body = kids[-1]
        for c in kids[:-1]:
            off = c.extent.start.offset
            if off < semis[0]:
                init = self.stmt(c)
            elif off < semis[1]:
                cond = self.expr(c)
            else:
                step = self.expr(c)
        return ir.Loop(loc, init, cond, step, self.stmt(body))

    def _switch(self, cur, kids, loc) -> ir.Switch:
        value = self.expr(kids[0])
        body = kids[-1]
        items = []
        for c in (body.get_children() if body.kind.name == "COMPOUND_STMT" else [body]):
            labels = []
            while c.kind.name in ("CASE_STMT", "DEFAULT_STMT"):
                inner = list(c.get_children())
                if c.kind.name == "CASE_STMT":
                    labels.append(self._int_const(inner[0]))
                    c = inner[1]
                else:
                    labels.append(None)
                    c = inner[0]
            items.append((labels, self.stmt(c)))  # no labels: it runs for the lanes already inside
        return ir.Switch(loc, value, items)

    def _int_const(self, cur) -> int:
        value = self._evaluate(cur)
        if isinstance(value, int):
            return value
        e = self.expr(cur)
        while isinstance(e, ir.Cast):
            e = e.expr
        if isinstance(e, ir.Const):
            return int(e.value)
        if isinstance(e, ir.Unary) and e.op == "-" and isinstance(e.expr, ir.Const):
            return -int(e.expr.value)
        self.refuse(cur, "a case label that is not a plain constant")

    # -------------------------------------------------------------- expressions
    def expr(self, cur) -> ir.Expr:
        k = cur.kind.name
        kids = list(cur.get_children())
        loc = self.loc(cur)
        if k in REFUSED:
            self.refuse(cur, REFUSED[k])
        if k in ("PAREN_EXPR",):
            return self.expr(kids[0])
        if k == "UNEXPOSED_EXPR":
            real = [c for c in kids if c.kind.name not in ("TYPE_REF",)]
            if len(real) == 1:
                return self._implicit(cur, real[0], loc)
            if not real:  # a default argument at a call: filled from the declaration by the call
                return None
            self.refuse(cur, "this expression")
        if k in ("CSTYLE_CAST_EXPR", "CXX_FUNCTIONAL_CAST_EXPR", "CXX_STATIC_CAST_EXPR", "CXX_REINTERPRET_CAST_EXPR",
                 "CXX_CONST_CAST_EXPR"):
            inner = [c for c in kids if c.kind.name not in ("TYPE_REF",)]
            return self._cast(self.expr(inner[-1]), self.type_of(cur), loc)
        if k in ("INTEGER_LITERAL", "FLOATING_LITERAL", "CHARACTER_LITERAL"):  # clang reads every spelling
            t = self.type_of(cur)
            value = self._evaluate(cur)
            if value is None:
                self.refuse(cur, f"the literal {self._tok_after(cur.extent.start.offset)}")
            return _scalar_const(loc, t, value)
        if k == "CXX_BOOL_LITERAL_EXPR":
            return ir.Const(loc, BOOL, np.bool_(self._tok_after(cur.extent.start.offset) == "true"))
        if k == "CXX_NULL_PTR_LITERAL_EXPR":
            return ir.Const(loc, self.type_of(cur) if self.type_of(cur) != VOID else Pointer(VOID), 0)
        if k == "STRING_LITERAL":
            pieces = [t for t in self._tokens(cur) if t.endswith('"')]  # "ab" "cd" is one literal
            return ir.Const(loc, Pointer(Scalar("int8")), b"".join(string_value(t) for t in pieces))
        if k == "DECL_REF_EXPR" and cur.referenced is None and kids:  # `N` in an instantiated `template <int N>`
            return self._cast(self.expr(kids[-1]), self.type_of(cur), loc)
        if k == "DECL_REF_EXPR":
            return self._ref(cur, loc)
        if k == "CXX_THIS_EXPR":
            return self._this(cur)
        if k == "LAMBDA_EXPR":
            return self._lambda(cur, loc)
        if k == "MEMBER_REF_EXPR":
            return self._member(cur, kids, loc)
        if k == "ARRAY_SUBSCRIPT_EXPR":
            a, b = self.expr(kids[0]), self.expr(kids[1])
            if isinstance(b.type, Pointer):
                a, b = b, a
            path = "readonly" if isinstance(a, ir.Var) and a.name in self.readonly_params else \
                "constant" if self.constant_vars and constant_path(self, a) else ""
            return ir.Index(loc, self.type_of(cur), a, b, path)
        if k == "UNARY_OPERATOR":
            return self._unary(cur, kids, loc)
        if k == "BINARY_OPERATOR":
            op = self._tok_after(kids[0].extent.end.offset)
            if op == "=":
                return ir.Assign(loc, self.type_of(cur), op, self.expr(kids[0]), self.expr(kids[1]))
            return ir.Binary(loc, self.type_of(cur), op, self.expr(kids[0]), self.expr(kids[1]))
        if k == "COMPOUND_ASSIGNMENT_OPERATOR":
            op = self._tok_after(kids[0].extent.end.offset)
            return ir.Assign(loc, self.type_of(cur), op, self.expr(kids[0]), self.expr(kids[1]))
        if k == "CONDITIONAL_OPERATOR":
            return ir.Cond(loc, self.type_of(cur), *[self.expr(c) for c in kids])
        if k == "CALL_EXPR":
            return self._call(cur, kids, loc)
        if k == "INIT_LIST_EXPR":
            t = self.type_of(cur)
            items = [self.expr(c) for c in kids]
            if isinstance(t, (Scalar, Pointer)):  # `int a{5}`, `int b = {}`: the one value, or zero
                return self._cast(items[0], t, loc) if items else ir.Const(loc, t, np.zeros((), t.dtype)[()]
                                                                              if isinstance(t, Scalar) else 0)
            return self._braced(t, items, loc)
        if k == "CXX_UNARY_EXPR":  # sizeof / alignof: clang's value
            toks = self._tokens(cur)
            if toks and toks[0] in ("sizeof", "alignof", "__alignof__", "_Alignof"):
                size = self._sizeof(cur, kids)
                return ir.Const(loc, self.type_of(cur), np.uint64(size))
            self.refuse(cur, f"'{toks[0] if toks else '?'}'")
        if k == "PACK_EXPANSION_EXPR" or k == "CXX_THROW_EXPR":
            self.refuse(cur, k.lower())
        self.refuse(cur, f"the expression '{' '.join(self._tokens(cur))[:40]}' ({k.lower()})")

    def _evaluate(self, cur):
        """clang's own value of a constant expression (a literal in any spelling, `sizeof`, `case N*2:`), or None.
        Its python bindings leave these functions undeclared: declared here, or ctypes cuts the pointer to an int."""
        import ctypes

        lib = self.ci.conf.lib
        if not getattr(lib, "_cush_declared", False):
            lib.clang_Cursor_Evaluate.restype, lib.clang_Cursor_Evaluate.argtypes = ctypes.c_void_p, [self.ci.Cursor]
            for name, res in (("clang_EvalResult_getKind", ctypes.c_int), ("clang_EvalResult_isUnsignedInt", ctypes.c_uint),
                              ("clang_EvalResult_getAsUnsigned", ctypes.c_ulonglong),
                              ("clang_EvalResult_getAsLongLong", ctypes.c_longlong),
                              ("clang_EvalResult_getAsDouble", ctypes.c_double)):
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, [ctypes.c_void_p]
            lib.clang_EvalResult_dispose.argtypes = [ctypes.c_void_p]
            lib._cush_declared = True
        ev = lib.clang_Cursor_Evaluate(cur)
        if not ev:
            return None
        try:
            kind = lib.clang_EvalResult_getKind(ev)
            if kind == 1:  # CXEval_Int
                return int(lib.clang_EvalResult_getAsUnsigned(ev) if lib.clang_EvalResult_isUnsignedInt(ev)
                           else lib.clang_EvalResult_getAsLongLong(ev))
            if kind == 2:  # CXEval_Float
                return float(lib.clang_EvalResult_getAsDouble(ev))
            return None
        finally:
            lib.clang_EvalResult_dispose(ev)

    def _sizeof(self, cur, kids) -> int:
        size = self._evaluate(cur)
        if size is None:
            self.refuse(cur, "a sizeof clang cannot evaluate")
        return size

    def _implicit(self, cur, child, loc) -> ir.Expr:
        inner = self.expr(child)
        if inner is None:
            return None
        t = self.type_of(cur)
        if isinstance(inner.type, Array) and isinstance(t, Pointer):
            return ir.Decay(loc, t, inner)
        if child.kind.name == "DECL_REF_EXPR" and child.referenced is not None \
                and child.referenced.kind.name == "FUNCTION_DECL":
            return inner  # a function's name before a call
        return self._cast(inner, t, loc)

    def _cast(self, inner, t, loc) -> ir.Expr:
        if inner.type == t:
            return inner
        if isinstance(t, Struct) or isinstance(inner.type, Struct):
            return inner  # a struct copied (a constructor clang made implicit)
        if isinstance(inner.type, Array) and isinstance(t, Pointer):
            return ir.Decay(loc, t, inner)
        return ir.Cast(loc, t, inner)

    def _ref(self, cur, loc) -> ir.Expr:
        ref = cur.referenced
        if ref is None:
            self.refuse(cur, f"'{cur.spelling}'")
        rk = ref.kind.name
        if rk in ("VAR_DECL", "PARM_DECL"):
            if ref.hash in self.captured:  # inside a lambda: the closure's copy, or its pointer
                return self._capture(ref, loc)
            if ref.semantic_parent is not None and ref.semantic_parent.kind.name in RECORDS:
                return self._static_member(cur, loc)  # `S::N`
            if ref.hash in self.scope:
                v = self.scope[ref.hash]
                var = ir.Var(loc, v.type, v.name, v.in_memory)
                if ref.hash in self.refs:
                    return ir.Unary(loc, v.type.to, "*", var)
                return var
            if ref.hash in self.global_shared:
                v = self.global_shared[ref.hash]
                return ir.Var(loc, v.type, v.name, True)
            if self.module_vars:
                v = reference(self, ref, loc)
                if v is not None:
                    return v
            if ref.hash in self.host_values:
                return self._host_value(cur, ref, loc)
            if ref.spelling == "warpSize":
                return ir.Special(loc, INT, "warpSize")
            if ref.spelling in ("threadIdx", "blockIdx", "blockDim", "gridDim"):
                return ir.Special(loc, self.type_of(cur), ref.spelling)
            self.refuse(cur, f"the global variable '{ref.spelling}'")
        if rk == "ENUM_CONSTANT_DECL":
            t = self.type_of(cur)
            return ir.Const(loc, t, t.dtype.type(ref.enum_value))
        if rk == "FUNCTION_DECL":
            return ir.Const(loc, VOID, ref.spelling)
        if rk == "NON_TYPE_TEMPLATE_PARAMETER":  # pragma: no cover - instantiated away
            self.refuse(cur, "a template parameter")
        self.refuse(cur, f"a reference to {rk.lower()}")

    def _member(self, cur, kids, loc) -> ir.Expr:
        base = self.expr(kids[0]) if kids else self._this(cur)  # `r` inside a method is `this->r`
        if isinstance(base, ir.Special):
            if base.name == "warpSize":
                self.refuse(cur, "warpSize.member")
            return ir.Special(loc, UINT, f"{base.name}.{cur.spelling}")
        arrow = isinstance(base.type, Pointer)
        st = base.type.to if arrow else base.type
        if not isinstance(st, Struct):
            self.refuse(cur, "a member of something that is not a struct")
        try:
            name, ftype, offset = st.field(cur.spelling)
        except KeyError:
            self.refuse(cur, f"the member '{cur.spelling}' of a base class (inheritance)")
        path = "constant" if self.constant_vars and not arrow and constant_path(self, base) else ""
        return ir.Member(loc, ftype, base, name, offset, arrow, path)

    def _unary(self, cur, kids, loc) -> ir.Expr:
        start = cur.extent.start.offset
        first = self._tok_after(start)
        inner = self.expr(kids[0])
        t = self.type_of(cur)
        if kids[0].extent.start.offset > start:  # prefix
            op = {"++": "++pre", "--": "--pre"}.get(first, first)
        else:
            op = {"++": "post++", "--": "post--"}[self._tok_after(kids[0].extent.end.offset)]
        if op == "&" and isinstance(inner, ir.Unary) and inner.op == "*":
            return inner.expr
        return ir.Unary(loc, t, op, inner)

    def _cooperative(self, ref) -> bool:
        """A call to cooperative groups: declared by the prelude, not by the user (coopfront.py translates it)."""
        return not self._user(ref) and declared_by_cg(ref)

    def _call(self, cur, kids, loc) -> ir.Expr:
        ref = cur.referenced
        t = self.type_of(cur)
        name = self._callee_name(ref, cur.spelling)
        if ref is None:
            self.refuse(cur, f"the call '{name}'")
        if self._cooperative(ref):
            return cg_call(self, cur, kids, loc)
        written = self._written_method(ref)
        if written is not None:
            return self._method_call(cur, kids, loc, written)
        if ref.kind.name == "CXX_METHOD" and name == "operator=" and len(kids) == 3:  # a struct's implicit copy
            return ir.Assign(loc, t, "=", self.expr(kids[0]), self.expr(kids[2]))
        if ref.kind.name == "CONSTRUCTOR":  # a struct's implicit copy (or default) constructor
            args = [self.expr(c) for c in kids if c.kind.name not in NOT_EXPRESSIONS]
            if len(args) == 1 and isinstance(t, Struct):
                return args[0]
            if not args:
                return self._default_object(t, loc)
            self.refuse(cur, "a constructor")
        callee = callee_at(kids, ref) if name.startswith("operator") else 0  # `a + b`: [a, operator+, b]
        args = [self.expr(c) for i, c in enumerate(kids) if i != callee]
        params = [p for p in ref.get_children() if p.kind.name == "PARM_DECL"]
        definition = ref.get_definition()
        key = self._callee_name(ref, self._qualified(ref))
        if key in self.functions or (definition is not None and self._user(definition)):
            fn = self.functions.get(key)
            if fn is None and not {c.kind.name for c in definition.get_children()} & DEVICE_ATTRS:
                self.refuse(cur, f"a call to the constexpr host function '{name}' from device code: nvcc refuses "
                            "it unless it compiles with --expt-relaxed-constexpr (declare it __host__ __device__)")
            if fn is None:
                self.refuse(cur, f"recursion, or a call to '{name}' before its definition")
            filled = []
            decls = [p for p in (definition or ref).get_children() if p.kind.name == "PARM_DECL"]
            for i, p in enumerate(fn.params):
                a = args[i] if i < len(args) else None
                if a is None:
                    a = fn.defaults[i]
                    if a is None:
                        self.refuse(cur, f"a call to '{name}' without argument {i + 1}")
                elif i < len(decls):
                    a = self._pass(a, decls[i], loc)  # a reference parameter gets the argument's address
                filled.append(a)
            return self._result(ref, ir.Call(loc, t, key, filled))
        if name == "printf":
            fmt = args[0]
            while isinstance(fmt, (ir.Cast, ir.Decay)):
                fmt = fmt.expr
            if not isinstance(fmt, ir.Const) or not isinstance(fmt.value, bytes):
                self.refuse(cur, "printf with a format that is not a string literal")
            return ir.Printf(loc, t, fmt.value.decode("utf-8", "replace"), args[1:])
        if name == "__cush_assert":
            text = args[1]
            while isinstance(text, (ir.Cast, ir.Decay)):
                text = text.expr
            return ir.Call(loc, t, name, [args[0], ir.Const(loc, VOID, text.value.decode("utf-8", "replace"))])
        for i in range(len(args), len(params)):  # defaults of built-ins (`__syncwarp()`, shfl's width)
            dk = [c for c in params[i].get_children() if c.kind.name != "TYPE_REF"]
            args.append(self._cast(self.expr(dk[-1]), self.type_of(params[i]), loc))
        args = [a if a is not None else self._cast(self.expr(
            [c for c in params[i].get_children() if c.kind.name != "TYPE_REF"][-1]), self.type_of(params[i]), loc)
            for i, a in enumerate(args)]
        from .builtins import known

        if not known(name):
            self.refuse(cur, f"the function '{name}'")
        return ir.Call(loc, t, name, args)


HOST_CODE_KINDS = {"FUNCTION_DECL", "FUNCTION_TEMPLATE", "CXX_METHOD", "CONSTRUCTOR", "DESTRUCTOR",
                   "CONVERSION_FUNCTION"}


def _host_bodies(cursor) -> list:
    """The byte ranges of host-only function definitions (`main`, helpers without __device__): the simulator never
    runs them, so what clang cannot make of them (the runtime API, launches, iostream) is not its to refuse."""
    found = []
    for cur in cursor.get_children():
        k = cur.kind.name
        if k in ("NAMESPACE", "LINKAGE_SPEC", "STRUCT_DECL", "CLASS_DECL", "CLASS_TEMPLATE"):
            found += _host_bodies(cur)
        elif k in HOST_CODE_KINDS:
            kids = list(cur.get_children())
            if {c.kind.name for c in kids} & DEVICE_ATTRS:
                continue
            if any(c.kind.name == "COMPOUND_STMT" for c in kids):  # a definition: its signature and body
                found.append((cur.extent.start.offset, cur.extent.end.offset))
    return found


def _inside(offset: int, ranges: list) -> bool:
    return any(a <= offset < b for a, b in ranges)


def _straight(stmts: list) -> bool:
    """Declarations and expressions only: no branch, loop or early return."""
    return all(isinstance(s, (ir.Decl, ir.ExprStmt)) or (isinstance(s, ir.Block) and _straight(s.stmts))
               for s in stmts)


def _scalar_const(loc, t: Scalar, value) -> ir.Const:
    """A constant of a scalar type from clang's value of it (an int of any sign, or a float)."""
    if t.is_float:
        return ir.Const(loc, t, t.dtype.type(value))
    return ir.Const(loc, t, np.array(value).astype(t.dtype)[()] if value >= 0 else t.dtype.type(value))


def _check(node, inside_printf: bool = False) -> None:
    """What clang accepts but the interpreter has no value for is refused here, at define, not at a launch: a
    string outside printf and assert, `threadIdx` (or another index) used whole."""
    if isinstance(node, ir.Const) and isinstance(node.value, bytes) and not inside_printf:
        raise CompileError("NOT_SUPPORTED_ON_SIM", "not in the simulator's subset: a string outside printf", node.loc)
    if isinstance(node, ir.Special) and "." not in node.name and node.name != "warpSize":
        raise CompileError("NOT_SUPPORTED_ON_SIM", f"not in the simulator's subset: {node.name} as a whole (use "
                           f"{node.name}.x, .y, .z)", node.loc)
    printing = isinstance(node, ir.Printf) or (isinstance(node, ir.Call) and node.name == "__cush_assert")
    for name in getattr(node, "__dataclass_fields__", ()):
        value = getattr(node, name)
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, tuple):  # a switch's (labels, statement)
                child = child[1]
            if isinstance(child, ir.Node):
                _check(child, inside_printf or printing)

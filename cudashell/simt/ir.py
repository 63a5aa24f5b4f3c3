"""The typed tree the front end makes from clang's and the interpreter runs: every expression has its C type
and its source position, every implicit conversion is explicit (clang put them there)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class Node:
    loc: tuple  # (file, line, col)


# ------------------------------------------------------------------ expressions
@dataclass(eq=False)
class Expr(Node):
    type: object


@dataclass(eq=False)
class Const(Expr):
    value: object  # a numpy scalar of the type's dtype (pointers: an int address)


@dataclass(eq=False)
class Var(Expr):
    name: str  # unique within its function
    in_memory: bool = False  # address taken, array or struct: it lives in local memory


@dataclass(eq=False)
class Special(Expr):
    name: str  # threadIdx.x, blockDim.y, warpSize …


@dataclass(eq=False)
class Cast(Expr):
    expr: Expr


@dataclass(eq=False)
class Decay(Expr):
    """An array used as a pointer to its first element."""
    expr: Expr


@dataclass(eq=False)
class Unary(Expr):
    op: str  # - ~ ! + * & ++pre --pre post++ post--
    expr: Expr


@dataclass(eq=False)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr


@dataclass(eq=False)
class Assign(Expr):
    op: str  # = += -= …
    target: Expr
    value: Expr


@dataclass(eq=False)
class Index(Expr):
    base: Expr  # a pointer
    index: Expr
    path: str = ""  # how a load goes: "readonly" (a `const T* __restrict__` parameter's), "constant" (a __constant__
    # variable's, through the constant cache), "" (the generic path)


@dataclass(eq=False)
class Member(Expr):
    base: Expr
    name: str
    offset: int
    arrow: bool
    path: str = ""  # as Index's: "constant" for a member of a __constant__ struct


@dataclass(eq=False)
class Cond(Expr):
    cond: Expr
    a: Expr
    b: Expr


@dataclass(eq=False)
class Call(Expr):
    name: str  # a device function of the program, or a built-in
    args: list


@dataclass(eq=False)
class InitList(Expr):
    items: list


@dataclass(eq=False)
class Printf(Expr):
    fmt: str
    args: list


# ------------------------------------------------------------------ statements
@dataclass(eq=False)
class Block(Node):
    stmts: list


@dataclass(eq=False)
class Decl(Node):
    var: Var
    init: Expr | None
    shared: bool = False
    extern: bool = False


@dataclass(eq=False)
class ExprStmt(Node):
    expr: Expr


@dataclass(eq=False)
class If(Node):
    cond: Expr
    then: Node
    other: Node | None


@dataclass(eq=False)
class Loop(Node):
    """for, while and do: `init; while (cond) { body; step }`; a do-loop runs its body before the first test."""
    init: Node | None
    cond: Expr | None
    step: Expr | None
    body: Node
    test_first: bool = True


@dataclass(eq=False)
class Switch(Node):
    value: Expr
    items: list  # [(case values or None for default, statement)] in source order; values: [ints]


@dataclass(eq=False)
class Jump(Node):
    kind: str  # break, continue


@dataclass(eq=False)
class Return(Node):
    value: Expr | None


@dataclass(eq=False)
class Function:
    name: str
    params: list  # [Var]
    ret: object
    body: Block
    kernel: bool
    loc: tuple
    defaults: list = field(default_factory=list)  # a default Expr (or None) per parameter
    returns: Expr | None = None  # the body is straight-line code ending in `return EXPR;`, and nvcc inlines it:
    prologue: list = field(default_factory=list)  # EXPR (contractions reach into it) and the statements before it

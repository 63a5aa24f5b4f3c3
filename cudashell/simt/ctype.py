"""C types as the interpreter sees them: scalars map to numpy dtypes (C's sizes on a 64-bit GPU), pointers,
fixed arrays and structs carry the layout clang computed. Also C's usual arithmetic conversions, which clang
leaves implicit in compound assignments (`c += 1` on a char computes in int)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scalar:
    name: str  # a numpy dtype name, or "bool"

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.bool_ if self.name == "bool" else self.name)

    @property
    def size(self) -> int:
        return self.dtype.itemsize

    @property
    def is_float(self) -> bool:
        return self.name.startswith("float")

    @property
    def is_signed(self) -> bool:
        return self.name.startswith("int") or self.is_float

    def __str__(self) -> str:
        return C_NAMES.get(self.name, self.name)


@dataclass(frozen=True)
class Pointer:
    to: object  # a type, or VOID
    size = 8

    def __str__(self) -> str:
        return f"{self.to} *"


@dataclass(frozen=True)
class Array:
    elem: object
    n: int | None  # None: `extern __shared__ float s[]`

    @property
    def size(self) -> int:
        return self.elem.size * (self.n or 0)

    def __str__(self) -> str:
        return f"{self.elem}[{self.n or ''}]"


@dataclass(frozen=True, eq=False)
class Struct:
    """Equal by name and layout, not by fields: a struct may hold a pointer to itself (`node *next`), and its
    fields are filled in after it is made so that the pointer can name it."""
    name: str
    fields: tuple  # ((name, type, byte offset), …)
    size: int
    align: int

    def __eq__(self, other) -> bool:
        return isinstance(other, Struct) and (self.name, self.size, self.align) == (other.name, other.size,
                                                                                     other.align)

    def __hash__(self) -> int:
        return hash((self.name, self.size))

    def field(self, name: str):
        for f in self.fields:
            if f[0] == name:
                return f
        raise KeyError(name)

    def __str__(self) -> str:
        return f"struct {self.name}"


@dataclass(frozen=True)
class Void:
    size = 1

    def __str__(self) -> str:
        return "void"


VOID = Void()
BOOL, INT, UINT, LONG, ULONG = Scalar("bool"), Scalar("int32"), Scalar("uint32"), Scalar("int64"), Scalar("uint64")
FLOAT, DOUBLE = Scalar("float32"), Scalar("float64")
C_NAMES = {"bool": "bool", "int8": "char", "uint8": "unsigned char", "int16": "short", "uint16": "unsigned short",
           "int32": "int", "uint32": "unsigned int", "int64": "long long", "uint64": "unsigned long long",
           "float32": "float", "float64": "double"}
_RANK = {"bool": 0, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 3, "uint32": 3, "int64": 4, "uint64": 4}


def promote(t: Scalar) -> Scalar:
    """C's integer promotion: anything narrower than int computes as int."""
    if t.is_float or _RANK[t.name] >= 3:
        return t
    return INT


def common(a: Scalar, b: Scalar) -> Scalar:
    """C's usual arithmetic conversions of two operands."""
    if a.is_float or b.is_float:
        return DOUBLE if DOUBLE in (a, b) else FLOAT
    a, b = promote(a), promote(b)
    if a == b:
        return a
    if a.is_signed == b.is_signed:
        return a if _RANK[a.name] >= _RANK[b.name] else b
    s, u = (a, b) if a.is_signed else (b, a)
    if _RANK[u.name] >= _RANK[s.name]:
        return u
    return s  # the signed type is wider and holds every value of the unsigned one (here: long long vs unsigned)

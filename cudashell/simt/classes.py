"""Structs and classes as course code writes them, for the front end (frontend.Program): their layout (a struct
may point to itself), and their member functions, constructors and operators as plain ir.Functions. Clang has
already resolved every call and instantiated every class template (`SharedMemory<float>`'s methods come with
float in their bodies), so a method is a function whose first parameter is `this`, and a constructor is a
function that builds the object in a local and returns it (the interpreter copies struct results into the
caller). Methods are converted when first called, so one may call another defined later or out of line."""

from __future__ import annotations

from . import ir
from .compile_error import CompileError
from .ctype import Array, Pointer, Scalar, Struct

METHODS = ("CXX_METHOD", "CONSTRUCTOR", "CONVERSION_FUNCTION")
NOT_EXPRESSIONS = ("TYPE_REF", "TEMPLATE_REF", "NAMESPACE_REF", "MEMBER_REF")
RECORDS = ("STRUCT_DECL", "CLASS_DECL", "UNION_DECL", "CLASS_TEMPLATE")


class ClassesMixin:
    """Program's part for records and their members; Program provides ctype, expr, stmt, _function…"""

    # -------------------------------------------------------------- layout
    def _record(self, t):
        decl = t.get_declaration()
        name = t.spelling if decl.spelling else f"anon{decl.hash}"
        if name in self.structs:
            return self.structs[name]
        if decl.hash in self.lambdas:
            return self._closure(name, self.lambdas[decl.hash])
        if self._user(decl):
            self._refuse_record(decl)
        st = Struct(name, (), t.get_size(), t.get_align())
        self.structs[name] = st  # before the fields: `node *next` names the struct being made
        fields = []
        for f in t.get_fields():  # a template's instantiation (`Pair<int>`) shows its fields only here
            if f.is_bitfield():
                self.refuse(f, "a bit-field")
            ftype, offset = self.ctype(f.type), f.get_field_offsetof() // 8
            if f.is_anonymous() and isinstance(ftype, Struct):  # `union { int i; float f; };`: s.f is a member
                fields.extend((n, sub, offset + o) for n, sub, o in ftype.fields)
                continue
            fields.append((f.spelling, ftype, offset))
            own = [c for c in f.get_children() if c.kind.name not in NOT_EXPRESSIONS]
            if own and _initialised(self._tokens(f), f.spelling):
                self.member_inits[(name, f.spelling)] = own[-1]
        object.__setattr__(st, "fields", tuple(fields))
        return st

    def _member_init(self, st, field: str):
        """A member's own initializer (`int total = 0;`), as a cursor, or None."""
        return self.member_inits.get((st.name, field))

    def _braced(self, st, items: list, loc) -> ir.InitList:
        """`T x = {1};`: the members the list leaves out take their own initializers (`int b = 5;`), the rest
        zero."""
        if not isinstance(st, Struct) or not any(self._member_init(st, f[0]) is not None
                                                 for f in st.fields[len(items):]):
            return ir.InitList(loc, st, items)
        items = list(items)
        for field, ftype, _ in st.fields[len(items):]:
            init = self._member_init(st, field)
            items.append(self.expr(init) if init is not None else
                         ir.InitList(loc, ftype, []) if isinstance(ftype, (Struct, Array)) else
                         ir.Const(loc, ftype, 0 if isinstance(ftype, Pointer) else ftype.dtype.type(0)))
        return ir.InitList(loc, st, items)

    def _default_object(self, st, loc) -> ir.Expr:
        """An object C++'s implicit default constructor makes (`T()`, `T{}`, `T x;`), by a function: a
        temporary needs a place, and the call's result has one."""
        name = f"{st.name}::{st.name.split('<')[0]}()"
        if name not in self.functions:
            made = ir.Var(loc, st, "object", True)
            body = ir.Block(loc, [ir.Decl(loc, made, self._braced(st, [], loc)), ir.Return(loc, made)])
            self.functions[name] = ir.Function(name, [], st, body, False, loc, [])
        return ir.Call(loc, st, name, [])

    def _constructs(self, cur) -> bool:
        """A declaration without an initializer whose type's constructor does something: `T x;` runs it."""
        if cur.kind.name != "CALL_EXPR" or cur.referenced is None or cur.referenced.kind.name != "CONSTRUCTOR":
            return False
        if self._written_method(cur.referenced) is not None:
            return True
        st = self.type_of(cur)
        return isinstance(st, Struct) and any(self._member_init(st, f[0]) is not None for f in st.fields)

    def _refuse_record(self, decl):
        """What a user's class may hold that the interpreter would run wrong: said by name, at its place."""
        if decl.kind.name == "LAMBDA_EXPR" or "lambda at" in decl.type.spelling:
            return
        for c in decl.get_children():
            k = c.kind.name
            if k == "CXX_BASE_SPECIFIER":
                self.refuse(c, "a class with a base class (inheritance)")
            if k == "FIELD_DECL" and c.type.kind == self.ci.TypeKind.LVALUEREFERENCE:
                self.refuse(c, "a reference member")
            if k in METHODS and c.is_virtual_method():
                self.refuse(c, "virtual methods")
            if k == "DESTRUCTOR" and any(s.kind.name == "COMPOUND_STMT" and list(s.get_children())
                                         for s in (c.get_definition() or c).get_children()):
                self.refuse(c, "a destructor that does something")
            if k == "VAR_DECL" and not c.type.is_const_qualified():
                self.refuse(c, "a static data member that is not const")

    # -------------------------------------------------------------- calls
    def _function_name(self, cur, base: str | None = None) -> str:
        """A user function's name in `functions`: `base` (its own, or `X::f` in namespace X), or `base#2`… for an
        overload of one already there."""
        usr = cur.get_usr()
        if usr in self.overloads:
            return self.overloads[usr]
        base = base or self._qualified(cur)
        name, n = base, 1
        while name in self.functions or name in self.overloads.values():
            n += 1
            name = f"{base}#{n}"
        self.overloads[usr] = name
        return name

    def _callee_name(self, ref, spelling: str) -> str:
        return spelling if ref is None else self.overloads.get(ref.get_usr(), spelling)

    def _written_method(self, ref):
        """The definition of a member function the user wrote for the device (not one clang made implicitly,
        like a copy, and not the prelude's) or of a friend function defined in a class, or None."""
        if ref.kind.name not in (*METHODS, "FUNCTION_DECL"):
            return None
        definition = ref.get_definition()
        if definition is None or not self._user(definition):
            return None
        inside = definition.lexical_parent
        if ref.kind.name == "FUNCTION_DECL" and (inside is None or inside.kind.name not in RECORDS):
            return None  # a free function: not a friend defined in its class
        kinds = {c.kind.name for c in definition.get_children()}
        if "COMPOUND_STMT" not in kinds:
            return None
        lambda_body = definition.spelling == "operator()" and definition.semantic_parent.hash in self.lambdas
        if not kinds & {"CUDADEVICE_ATTR", "CUDAGLOBAL_ATTR"} and not lambda_body:
            return None
        return definition

    def _method_call(self, cur, kids, loc, definition) -> ir.Expr:
        name = self._method(definition)
        kind = definition.kind.name
        has_this = kind in METHODS and not definition.is_static_method()
        this = None
        if kind == "CONSTRUCTOR":
            operands = [c for c in kids if c.kind.name not in NOT_EXPRESSIONS]
        else:
            head = _unwrap(kids[0]) if kids else None
            if head is not None and head.kind.name == "MEMBER_REF_EXPR":  # a.f(…), p->f(…), f(…) inside a method
                inner = list(head.get_children())
                if has_this:  # `v.two()` calls a static one without an object
                    this = self._object(self.expr(inner[0]) if inner else self._this(cur), loc)
                operands = kids[1:]
            else:
                callee = callee_at(kids, definition)
                operands = [c for i, c in enumerate(kids) if i != callee]
                if has_this:  # an operator written as a member: its first operand is `this`
                    this = self._object(self.expr(operands[0]), loc)
                    operands = operands[1:]
        decls = [p for p in definition.get_children() if p.kind.name == "PARM_DECL"]
        args = [self.expr(c) for c in operands]
        fn = self.functions.get(name)
        filled = [] if this is None else [this]
        hidden = len(filled)
        for i, p in enumerate(decls):
            a = args[i] if i < len(args) else None
            if a is None:
                a = fn.defaults[hidden + i] if fn is not None else None
                if a is None:
                    self.refuse(cur, f"a call to '{definition.spelling}' without argument {i + 1}")
            else:
                a = self._pass(a, p, loc)
            filled.append(a)
        return self._result(definition, ir.Call(loc, self.type_of(cur), name, filled))

    def _result(self, ref, call: ir.Call) -> ir.Expr:
        """A call to a function returning `T &` (`v[i]`, `a += b`) gets the address: the place it names."""
        if ref.result_type.kind != self.ci.TypeKind.LVALUEREFERENCE:
            return call
        t = call.type
        call.type = Pointer(t)
        return ir.Unary(call.loc, t, "*", call)

    def _reference_to(self, e, loc) -> ir.Expr:
        if isinstance(e, ir.Cond):  # `return i ? y : x;` names one of two places
            return ir.Cond(loc, Pointer(e.type), e.cond, self._reference_to(e.a, loc), self._reference_to(e.b, loc))
        if isinstance(e.type, Struct):
            return _address(loc, e)
        return ir.Unary(loc, Pointer(e.type), "&", e)

    def _object(self, e, loc) -> ir.Expr:
        """`this` for a call on `e`: a pointer as it is; a struct's value is already its address; a temporary
        that clang's implicit constructor makes (`SharedMemory<T>()`) is made by a function, to have one."""
        if isinstance(e.type, Pointer):
            return e
        if isinstance(e, ir.InitList):
            if e.items:
                what = "a lambda called where it is written (name it first: auto f = …; f(…))" if "(lambda at " in \
                    e.type.name else "a member function called on a braced temporary"
                raise CompileError("NOT_SUPPORTED_ON_SIM", f"not in the simulator's subset: {what}", loc)
            e = self._default_object(e.type, loc)
        return _address(loc, e)

    def _pass(self, a, decl, loc) -> ir.Expr:
        """An argument for a parameter: a reference parameter gets the argument's address (a struct's value is
        its address, so a temporary struct `f(a * b)` passes too); a `const T &` of a scalar is passed by value."""
        if not self._by_address(decl):
            return a
        if isinstance(a.type, Struct):
            return _address(loc, a)
        return ir.Unary(loc, Pointer(a.type), "&", a)

    def _by_address(self, decl) -> bool:
        t = decl.type
        if t.kind != self.ci.TypeKind.LVALUEREFERENCE:
            return False
        pointee = t.get_pointee()
        K = self.ci.TypeKind
        return not (pointee.is_const_qualified()
                    and pointee.get_canonical().kind not in (K.RECORD, K.CONSTANTARRAY, K.INCOMPLETEARRAY))

    # -------------------------------------------------------------- conversion
    def _method(self, definition) -> str:
        """The function name of a user's member function, converting it the first time."""
        key = definition.hash
        if key in self.method_names:
            return self.method_names[key]
        if definition.kind.name in METHODS:
            owner = self.ctype(definition.semantic_parent.type)
            base = f"{owner.name}::{definition.spelling}"
            name, n = base, 1
            while name in self.functions or name in self.method_names.values():
                n += 1
                name = f"{base}#{n}"
        else:  # a friend: a free function
            owner, name = None, self._function_name(definition)
        self.method_names[key] = name  # before converting: a method may call itself
        saved = {k: getattr(self, k, None) for k in FUNCTION_STATE}
        try:
            body = next(c for c in definition.get_children() if c.kind.name == "COMPOUND_STMT")
            self.functions[name] = self._function(definition, body, False, name=name, owner=owner)
        finally:
            for k, v in saved.items():
                setattr(self, k, v)
        return name

    # -------------------------------------------------------------- lambdas
    def _captures(self, lam) -> list:
        """A lambda's captures in clang's order — (a cursor naming the variable, its field's type, by
        reference) — the order of the closure's fields: clang lists each capture that has an initial value
        (explicit ones, then `[=]`'s), and `[&]`'s follow in the order the body first uses them."""
        listed, named = [], set()
        for c in lam.get_children():  # `[a]` lists a twice: its name, then its copy
            c = _unwrap(c)
            if c.kind.name in ("PARM_DECL", "COMPOUND_STMT", "TYPE_REF") or c.kind.name.endswith("_ATTR"):
                continue
            if c.referenced is not None and c.referenced.hash in named:
                continue
            named.add(c.referenced.hash if c.referenced is not None else None)
            listed.append(c)
        intro = []
        for t in lam.get_tokens():
            if t.spelling == "]":
                break
            intro.append(t.spelling)
        if "this" in intro or "*" in intro or any(r.kind.name not in ("VARIABLE_REF", "DECL_REF_EXPR")
                                                 or r.referenced is None for r in listed):
            self.refuse(lam, "a lambda capturing 'this', or with an initialised capture")
        if intro[1:2] == ["&"] and intro[2:3] in ([], [","], ["]"]):  # [&] or [&, y]: the rest by reference
            seen = {r.referenced.hash for r in listed}
            body = next(c for c in lam.get_children() if c.kind.name == "COMPOUND_STMT")
            start, end = lam.extent.start.offset, lam.extent.end.offset
            for use in _walk(body):
                var = use.referenced
                if use.kind.name == "DECL_REF_EXPR" and var is not None and var.kind.name in ("VAR_DECL", "PARM_DECL") \
                        and var.hash not in seen and not start <= var.extent.start.offset < end \
                        and var.semantic_parent is not None and var.semantic_parent.kind.name != "TRANSLATION_UNIT" \
                        and self._user(var):
                    seen.add(var.hash)
                    listed.append(use)
        fields = list(lam.type.get_canonical().get_fields())
        if len(listed) != len(fields):
            self.refuse(lam, "a lambda capturing 'this' (a member used in its body)")
        return [(r, f.type, f.type.kind == self.ci.TypeKind.LVALUEREFERENCE) for r, f in zip(listed, fields)]

    def _captured_by_reference(self, lam) -> set:
        """Noted when the enclosing function is read: what a lambda captures by reference lives in memory."""
        self.lambdas[lam.type.get_canonical().get_declaration().hash] = lam
        return {r.referenced.hash for r, _, by_ref in self._captures(lam) if by_ref}

    def _closure(self, name, lam):
        """A lambda's object: a struct of its captures (copies, or pointers for `&`), laid out here: only the
        lambda's own code reads it."""
        fields, offset, align = [], 0, 1
        for r, ftype, _ in self._captures(lam):
            t = self.ctype(ftype)
            a = t.align if isinstance(t, Struct) else min(max(getattr(t, "size", 1), 1), 8)
            offset = -(-offset // a) * a
            fields.append((r.referenced.spelling, t, offset))
            offset += t.size
            align = max(align, a)
        st = Struct(name, tuple(fields), max(-(-offset // align) * align, 1), align)
        self.structs[name] = st
        return st

    def _lambda(self, cur, loc) -> ir.Expr:
        """Where a lambda is written, its object is made: each capture copied, or its address taken."""
        st = self.type_of(cur)
        items = []
        for r, _, by_ref in self._captures(cur):
            value = self._ref(r, loc)
            items.append(self._reference_to(value, loc) if by_ref else value)
        return ir.InitList(loc, st, items)

    def _static_member(self, cur, loc) -> ir.Expr:
        """`S::N` of `static const int N = 4;` inside a struct: its value, which clang computes."""
        value = self._evaluate(cur)
        t = self.type_of(cur)
        if value is None or not isinstance(t, Scalar):
            self.refuse(cur, f"the static data member '{cur.spelling}' (only constant scalars)")
        return ir.Const(loc, t, t.dtype.type(value))

    def _capture(self, var, loc) -> ir.Expr:
        name, by_ref = self.captured[var.hash]
        field, t, offset = self.this.type.to.field(name)
        member = ir.Member(loc, t, self.this, field, offset, True)
        return ir.Unary(loc, t.to, "*", member) if by_ref else member

    def _this(self, cur) -> ir.Expr:
        if self.this is None:
            self.refuse(cur, "'this' outside a member function")
        return self.this

    def _member_params(self, cur, owner, loc) -> list:
        """The hidden first parameter of a method (`this`), or none (static, or a constructor, which makes its
        object in a local)."""
        self.this, self.made = None, None
        if owner is None or cur.is_static_method():
            return []
        if cur.kind.name == "CONSTRUCTOR":
            self.made = ir.Var(loc, owner, "this#object", True)
            self.names.add(self.made.name)
            self.this = _address(loc, self.made)
            return []
        v = ir.Var(loc, Pointer(owner), "this", False)
        self.names.add("this")
        self.this = v
        lam = self.lambdas.get(cur.semantic_parent.hash)
        self.captured = {} if lam is None else {r.referenced.hash: (r.referenced.spelling, by_ref)
                                               for r, _, by_ref in self._captures(lam)}
        return [v]

    def _constructed_each(self, t, made: ir.Expr) -> ir.Expr:
        """`T x;` is one object made; `T a[3][2];` makes every element, in order."""
        if not isinstance(t, Array):
            return made
        elem = t.elem
        while isinstance(elem, Array):
            elem = elem.elem
        made.type = elem  # clang types an array's construction as the array
        return ir.InitList(made.loc, t, [self._constructed_each(t.elem, made)] * (t.n or 0))

    def _constructed(self, cur, owner, body: ir.Block, loc) -> ir.Block:
        """A constructor's body: the object made in a local, its members initialised in declaration order
        (from the initializer list, else the member's own initializer), the body run, the object returned."""
        given = {}
        kids = list(cur.get_children())
        for i, c in enumerate(kids):
            if c.kind.name == "MEMBER_REF" and i + 1 < len(kids):
                given[c.spelling] = kids[i + 1]
        stmts = [ir.Decl(loc, self.made, None)]
        for name, ftype, offset in owner.fields:
            init = given.get(name)
            if init is None:
                init = self._member_init(owner, name)
            if init is None:
                continue
            value = self.expr(init)
            if value is None or isinstance(value, ir.InitList):
                self.refuse(init, "a member initialised with a braced list")
            target = ir.Member(loc, ftype, self.this, name, offset, True)
            stmts.append(ir.ExprStmt(loc, ir.Assign(loc, ftype, "=", target, value)))
        return ir.Block(loc, stmts + [body, ir.Return(loc, ir.Var(loc, owner, self.made.name, True))])


FUNCTION_STATE = ("fn", "scope", "refs", "names", "addressed", "this", "made", "returns_ref", "captured")


def _address(loc, e) -> ir.Expr:
    """An aggregate's address: a struct's value is where it is (interp.Machine.ev), so a cast to a pointer to
    it leaves the value as it is — also for a temporary (a call's result), which has no place to take `&` of."""
    return ir.Cast(loc, Pointer(e.type), e)


def _initialised(tokens: list, name: str) -> bool:
    """A member declared with its own initializer (`int b = 5;`, `float c[2] = {…}`, `int d{3};`), not only
    with an array size (`int v[N];`), which clang also lists among the member's children."""
    if name not in tokens:
        return False
    rest, depth = tokens[tokens.index(name) + 1:], 0
    for t in rest:
        if t == "[":
            depth += 1
        elif t == "]":
            depth -= 1
        elif depth == 0:
            return t in ("=", "{")
    return False


def _walk(cur):
    yield cur
    for c in cur.get_children():
        yield from _walk(c)


def _unwrap(cur):
    while cur.kind.name in ("UNEXPOSED_EXPR", "PAREN_EXPR"):
        kids = list(cur.get_children())
        if len(kids) != 1:
            break
        cur = kids[0]
    return cur


def callee_at(kids, definition) -> int:
    """Where the operator's own name is among an operator call's children (`a * b`: [a, operator*, b])."""
    for i, c in enumerate(kids):
        inner = _unwrap(c)
        if inner.kind.name == "DECL_REF_EXPR" and inner.referenced is not None \
                and inner.referenced.spelling == definition.spelling \
                and inner.referenced.kind.name == definition.kind.name:
            return i
    return 0

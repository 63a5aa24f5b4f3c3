"""Function templates, instantiated as the compiler would for the calls a program makes: libclang shows a
template's body only uninstantiated (its types dependent), so each specialisation a call uses (`mul<16, float>`,
or arguments deduced from the call) is written out as a plain function with the parameters substituted, the
call renamed to it, and the source parsed again — until no call reaches a template."""

from __future__ import annotations

from .compile_error import CompileError
from .prelude import DECLS

ROUNDS = 8  # nested templates: each round instantiates one more level


def instantiate(text: str, parse, where) -> str:
    if "template" not in text:
        return text
    for _ in range(ROUNDS):
        tu = parse(text)
        edits = _edits(tu, text, where)
        if not edits:
            return text
        data = text.encode()
        for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
            data = data[:start] + new.encode() + data[end:]
        text = data.decode()
    return text


def _edits(tu, text: str, where) -> list:
    base = len(DECLS.encode())
    templates = {}  # name → (cursor, [param names])
    calls = []  # (call cursor's callee, specialization decl)

    def walk(cur, inside_template):
        k = cur.kind.name
        if k == "FUNCTION_TEMPLATE" and cur.location.file is not None and cur.extent.start.offset >= base:
            params = [c.spelling for c in cur.get_children()
                      if c.kind.name in ("TEMPLATE_TYPE_PARAMETER", "TEMPLATE_NON_TYPE_PARAMETER")]
            templates.setdefault(cur.spelling, []).append((cur, params))
            inside_template = True
        if k == "CALL_EXPR" and not inside_template:
            ref = cur.referenced
            if ref is not None and ref.get_num_template_arguments() > 0 and ref.spelling in templates:
                kids = list(cur.get_children())
                if kids:
                    calls.append((kids[0], ref))
        for c in cur.get_children():
            walk(c, inside_template)

    walk(tu.cursor, False)
    if not calls:
        return []
    from clang.cindex import SourceRange

    user = SourceRange.from_locations(tu.get_location("__cush__.cu", base), tu.cursor.extent.end)
    toks = list(tu.get_tokens(extent=user))  # the user's: the prelude's are never copied
    edits, made = [], {}
    for callee, spec in calls:
        name = spec.spelling
        args = []
        for i in range(spec.get_num_template_arguments()):
            kind = spec.get_template_argument_kind(i).name
            if kind == "TYPE":
                spelled = spec.get_template_argument_type(i).get_canonical().spelling
                if "(lambda at " in spelled:  # a closure has no name to write a copy with
                    raise _unsupported(callee, "a lambda passed to a function template", where)
                args.append(spelled)
            elif kind == "INTEGRAL":
                args.append(str(spec.get_template_argument_value(i)))
            else:
                raise _unsupported(callee, "a template argument that is not a type or an integer", where)
        key = (name, tuple(args))
        if key not in made:
            template, params = templates[name][0]
            mangled = f"{name}__cush{len(made)}"
            made[key] = mangled
            copy = _copy(template, params, args, mangled, toks, base)
            end = template.extent.end.offset - base
            edits.append((end, end, " " + copy))
        start, end = callee.extent.start.offset - base, callee.extent.end.offset - base
        edits.append((start, end, made[key]))
    return edits


def _copy(template, params: list, args: list, mangled: str, toks, base: int) -> str:
    """The template's text as one line (so the lines after it keep their numbers), its `template <…>` head
    dropped, its parameters replaced by the arguments and its name by `mangled`."""
    start, end = template.extent.start.offset, template.extent.end.offset
    inside = [t for t in toks if start <= t.extent.start.offset < end]
    # skip `template < … >`
    depth, i = 0, 0
    while i < len(inside):
        s = inside[i].spelling
        if s == "<":
            depth += 1
        elif s == ">":
            depth -= 1
            if depth == 0:
                i += 1
                break
        elif s == ">>":
            depth -= 2
            if depth <= 0:
                i += 1
                break
        i += 1
    out, named, skip_line = [], False, None
    subst = dict(zip(params, args))
    for t in inside[i:]:
        line = t.extent.start.line
        if t.spelling == "#":
            skip_line = line
        if skip_line == line:
            continue
        s = t.spelling
        if s == template.spelling and not named:
            s, named = mangled, True
        elif s in subst:
            s = f"({subst[s]})" if subst[s].lstrip("-").isdigit() else subst[s]
        out.append(s)
    return " ".join(out)


def _unsupported(cur, what, where):
    return CompileError("NOT_SUPPORTED_ON_SIM", f"not in the simulator's subset: {what}", where(cur.location))

"""Cooperative groups in the front end: a call to a class or function that prelude.py declares in `namespace
cooperative_groups` becomes a built-in `ir.Call` named `cg::NAME`, the group handle (`this`) its first argument,
run by coop.py. What the simulator cannot run (a grid-wide sync, an operator that is not one of cg's own, a
tile wider than a warp) is refused here, at `kernel define`, naming it."""

from __future__ import annotations

import re

import numpy as np

from . import ir
from .ctype import UINT, ULONG, VOID, Scalar

HANDLE = ULONG  # every group handle (and cg's operator objects) is one 64-bit register value: coop.py packs it
METHODS = {  # the class that declares them → the methods a kernel may call on its objects
    "thread_group": {"sync", "size", "num_threads", "thread_rank"},
    "thread_block": {"sync", "size", "num_threads", "thread_rank", "group_index", "thread_index", "dim_threads",
                     "group_dim"},
    "grid_group": {"size", "num_threads", "thread_rank", "block_rank", "num_blocks"},
    "coalesced_group": {"sync", "size", "num_threads", "thread_rank", "meta_group_rank", "meta_group_size", "shfl",
                        "shfl_up", "shfl_down", "any", "all", "ballot", "match_any"},
    "thread_block_tile": {"sync", "size", "num_threads", "thread_rank", "meta_group_rank", "meta_group_size", "shfl",
                          "shfl_up", "shfl_down", "shfl_xor", "any", "all", "ballot", "match_any"},
}
COLLECTIVES = {"reduce", "inclusive_scan", "exclusive_scan"}
OPERATORS = {"plus", "less", "greater", "bit_and", "bit_or", "bit_xor"}
GRID_SYNC = ("grid-wide sync needs a cooperative launch (cudaLaunchCooperativeKernel), which the simulator does "
             "not run: this_grid().sync()")


def declared_by_cg(cur) -> bool:
    """Whether the cursor is one of the prelude's cooperative-groups declarations (or inside one)."""
    p = cur.semantic_parent
    while p is not None and p.kind.name != "TRANSLATION_UNIT":
        if p.kind.name == "NAMESPACE" and p.spelling == "cooperative_groups":
            return True
        p = p.semantic_parent
    return False


def call(prog, cur, kids, loc) -> ir.Expr:
    """The built-in call for a cooperative-groups call; `prog` is the front end's Program."""
    ref = cur.referenced
    kind, name = ref.kind.name, ref.spelling
    t = prog.type_of(cur)
    if kind == "CONSTRUCTOR":  # a handle copied (to a base class too), or an operator object made: `cg::plus<int>()`
        args = [prog.expr(c) for c in kids]
        return args[0] if args else ir.Const(loc, HANDLE, np.uint64(0))
    if kind == "CXX_METHOD":
        owner = ref.semantic_parent.spelling
        if owner in ("grid_group", "multi_grid_group", "cluster_group") and name == "sync":
            prog.refuse(cur, GRID_SYNC if owner == "grid_group" else f"{owner}::sync() (several grids, or a "
                             "cluster of blocks, synchronised)")
        if name not in METHODS.get(owner, ()):
            prog.refuse(cur, f"the cooperative-groups method {owner}::{name}")
        member = kids[0]
        obj = prog.expr(next(member.get_children()))  # `g.name(…)`: the object, before the dot
        args = [prog.expr(c) for c in kids[1:]]
        if (name.startswith("shfl") or name == "match_any") and not isinstance(args[0].type, Scalar):
            prog.refuse(cur, f"{owner}::{name} of a value that is not a number")
        if name == "sync":  # the method, told from the free function cg::sync(g) in what a barrier's error says
            return ir.Call(loc, t, "cg::group.sync", [obj])
        return ir.Call(loc, t, f"cg::{name}", [obj, *args])
    if name in ("this_thread_block", "coalesced_threads", "this_grid"):
        return ir.Call(loc, t, f"cg::{name}", [])
    args = kids[1:]
    if name in ("thread_rank", "group_size"):  # cg::thread_rank(g), cg::group_size(g): the methods, called free
        return ir.Call(loc, t, "cg::thread_rank" if name == "thread_rank" else "cg::size", [prog.expr(args[0])])
    if name == "sync":
        if "grid_group" in args[0].type.get_canonical().spelling:
            prog.refuse(cur, GRID_SYNC.replace("this_grid().sync()", "cg::sync(grid)"))
        return ir.Call(loc, t, "cg::sync", [prog.expr(args[0])])
    if name == "tiled_partition":
        parent = prog.expr(args[0])
        if "coalesced_group" in args[0].type.get_canonical().spelling:
            prog.refuse(cur, "tiled_partition of a coalesced_group")
        if ref.get_num_template_arguments() > 0:
            size = int(ref.get_template_argument_value(0))
            if size < 1 or size > 32 or size & (size - 1):
                prog.refuse(cur, f"tiled_partition<{size}>: a tile of a power of two threads up to 32 "
                                 "(wider tiles are not in the subset)")
            return ir.Call(loc, t, "cg::tiled_partition", [parent, ir.Const(loc, UINT, np.uint32(size))])
        return ir.Call(loc, t, "cg::tiled_partition", [parent, prog.expr(args[1])])
    if name in COLLECTIVES:
        return _collective(prog, cur, name, args, t, loc)
    prog.refuse(cur, f"the cooperative-groups function '{name}'")


def _collective(prog, cur, name, args, t, loc) -> ir.Expr:
    """cg::reduce and the scans: over a tile or a coalesced group, with one of cg's operators (its type says which)."""
    group_type = args[0].type.get_canonical().spelling
    if "thread_block_tile" not in group_type and "coalesced_group" not in group_type:
        prog.refuse(cur, f"cg::{name} over a {_short(group_type)} (a thread_block_tile or a coalesced_group is "
                         "what it takes)")
    op = "plus"
    if len(args) > 2:
        m = re.search(r"cooperative_groups::(\w+)<", args[2].type.get_canonical().spelling)
        if m is None or m.group(1) not in OPERATORS:
            prog.refuse(cur, f"cg::{name} with the operator {_short(args[2].type.spelling)} (cg::plus, less, "
                             "greater, bit_and, bit_or and bit_xor are in the subset)")
        op = m.group(1)
    if not isinstance(t, Scalar) or t.name == "bool" or (t.is_float and op.startswith("bit_")):
        prog.refuse(cur, f"cg::{name} of a '{t}' with cg::{op}")
    value = prog._cast(prog.expr(args[1]), t, loc)  # cg's operators take and give their own type
    return ir.Call(loc, t, f"cg::{name}", [prog.expr(args[0]), value, ir.Const(loc, VOID, op)])


def _short(spelling: str) -> str:
    if spelling.startswith("(lambda at "):
        return "a lambda"  # clang's spelling names the prelude-prefixed text's line, not the user's
    return spelling.replace("const ", "").replace("cooperative_groups::", "cg::")

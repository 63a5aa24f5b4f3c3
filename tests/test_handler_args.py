"""A handler asks only for the arguments its spec declares: a typo fails here (and at run time, loudly), not
as a silent default."""

from __future__ import annotations

import ast
import inspect

import pytest

import cudashell.commands  # noqa: F401  (registers the specs)
from cudashell.grammar import split_commands
from cudashell.registry import REGISTRY, parse_segment


def test_every_argument_a_handler_reads_is_declared():
    undeclared = []
    for name, spec in REGISTRY.items():
        declared = {a.name for a in spec.args} | {o.arg.name for o in spec.opts} | {f.word for f in spec.flags}
        for node in ast.walk(ast.parse(inspect.getsource(spec.handler))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("get", "col") and getattr(node.func.value, "id", None) == "args" and \
                    node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value not in declared:
                undeclared.append((name, node.args[0].value))
    assert undeclared == []


def test_asking_for_an_undeclared_argument_raises():
    args = parse_segment(split_commands("show p count 4")[0]).args
    assert args.get("COUNT") == 4 and args.get("T", "uint8") == "uint8"
    with pytest.raises(KeyError):
        args.get("N")

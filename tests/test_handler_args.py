"""A handler asks only for the arguments its spec declares: a typo fails here (and at run time, loudly), not
as a silent default."""

from __future__ import annotations

import pytest

import cudashell.commands  # noqa: F401  (registers the specs)
from cudashell.language.grammar import split_commands
from cudashell.language.registry import REGISTRY, parse_segment

NOT_RUN = {"calibrate": "minutes of measuring on the simulator; tests/test_scenarios.py runs it"}


def declared(spec) -> frozenset:
    return frozenset({a.name for a in spec.args} | {o.arg.name for o in spec.opts} | {f.word for f in spec.flags})


def test_every_argument_a_handler_reads_is_declared(real_runs):
    """Every handler, run by fuzzed lines, the demos and the benches (conftest.real_runs): the names it asked of
    its arguments are ones its spec declares, and its arguments knew the declared set (asking another raises)."""
    assert set(REGISTRY) - real_runs.ran == set(NOT_RUN)
    undeclared = {name: asked - declared(REGISTRY[name]) for name, asked in real_runs.asked.items()}
    assert {name: names for name, names in undeclared.items() if names} == {}
    for name in real_runs.ran:
        # a command with no arguments gets the set {""}: the guard is on for it too, and refuses every name
        assert real_runs.declared[name] == {declared(REGISTRY[name]) or frozenset({""})}, name
    assert sum(map(len, real_runs.asked.values())) > 50  # the handlers did ask, and were watched


def test_asking_for_an_undeclared_argument_raises():
    args = parse_segment(split_commands("show p count 4")[0]).args
    assert args.get("COUNT") == 4 and args.get("T", "uint8") == "uint8"
    with pytest.raises(KeyError):
        args.get("N")

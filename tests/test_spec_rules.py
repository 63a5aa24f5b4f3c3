"""What goes together is said once, in a command's spec, and the parser holds to it: no handler checks it again."""

from __future__ import annotations

import pytest

from cudashell.errors import ShellError
from cudashell.language.grammar import Arg, Flag, Opt, parse_args, tokenize
from cudashell.language.registry import REGISTRY, load


def _parse(spec_line: str, args, opts=(), flags=()):
    tokens = tuple(tokenize(spec_line))
    return parse_args(tokens, spec_line, len(spec_line), args, opts, flags)


KIND = Arg("KIND", choices=("pinned", "device", "managed"), noun="memory")
FLAGS = (Flag("mapped", only_with=("pinned",)), Flag("global", only_with=("managed",), excludes=("host",)),
         Flag("host", only_with=("managed",)), Flag("async"))
OPTS = (Opt("on", Arg("GPU", "int"), only_with=("device",)), Opt("stream", Arg("S"), needs="async"))


@pytest.mark.parametrize("line, message, col", [
    ("device mapped", "'mapped' does not apply to device memory", 8),
    ("managed global host", "'global' and 'host' exclude each other", 9),
    ("pinned on 1", "'on' does not apply to pinned memory", 11),
    ("device stream 1", "'stream' applies only with 'async'", 15),
])
def test_the_parser_refuses_what_the_spec_says_does_not_go_together(line, message, col):
    with pytest.raises(ShellError) as e:
        _parse(line, (KIND,), OPTS, FLAGS)
    assert e.value.code == "USAGE" and message in e.value.message and e.value.col == col


@pytest.mark.parametrize("line", ["pinned mapped", "managed host", "device on 0", "device async stream 1"])
def test_what_goes_together_parses(line):
    _parse(line, (KIND,), OPTS, FLAGS)


def test_alloc_and_memcpy_take_their_rules_from_their_specs(sim):
    load()
    alloc = REGISTRY["alloc"]
    assert {f.word: f.only_with for f in alloc.flags}["mapped"] == ("pinned",)
    assert sim.fails("alloc device 1MB mapped")["message"] == "'mapped' does not apply to device memory"
    assert sim.fails("alloc managed 1MB global host")["code"] == "USAGE"
    assert sim.fails("alloc pinned 1MB on 0")["col"] == 21
    sim.ok("alloc pinned 4KB as p; alloc device 4KB as d")
    assert "applies only with 'async'" in sim.fails("memcpy p d stream 1")["message"]
    assert sim.ok("memcpy p d async stream 0")["stream"] == "0"


def _offers(session, text):
    from cudashell.language.suggest import suggest

    return {s.text for s in suggest(text, session)}


def test_completion_follows_the_parsers_walk(sim):
    sim.ok("alloc pinned 4KB as p; alloc device 4KB as d; stream create")
    s = sim.shell.session
    assert {"portable", "mapped", "writecombined", "as"} <= _offers(s, "alloc pinned 64MB ")
    assert not {"global", "host", "on"} & _offers(s, "alloc pinned 64MB ")
    assert "on" in _offers(s, "alloc device 64MB ")
    assert {"0", "1"} <= _offers(s, "memcpy p d async stream ")  # the option's value
    assert "d" in _offers(s, "memcpy h2d p ") and "p" not in _offers(s, "memcpy h2d p ")  # the destination, device side
    assert "async" not in _offers(s, "memcpy p d async ")  # a flag given is not offered again
    assert _offers(s, "say en ") == set()  # the rest of the line is text


def test_help_shows_the_registry_as_it_is_now(sim, monkeypatch):
    """`help` keeps the commands' order between calls (sorting them took most of its time); a spec replaced since
    (a C writer added, a test's stand-in) is the one it shows."""
    from dataclasses import replace

    from cudashell.language import registry

    def summary(name):
        groups = sim.ok("help all")["groups"]
        return next(c["summary"] for cmds in groups.values() for c in cmds if c["name"] == name)

    assert summary("sleep") == registry.lookup("sleep").summary
    monkeypatch.setitem(registry.REGISTRY, "sleep", replace(registry.lookup("sleep"), summary="a stand-in"))
    assert summary("sleep") == "a stand-in"

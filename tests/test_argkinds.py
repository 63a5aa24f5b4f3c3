"""Argument kinds are objects (argkinds.KINDS): a misspelt kind fails where the command is declared, and every kind
the registry uses converts, completes and confines as its table row below says — a new kind needs a row."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest

from cudashell.backends.sim import SimBackend
from cudashell.errors import ShellError
from cudashell.frontends.shell import Shell
from cudashell.language import registry
from cudashell.language.argkinds import KINDS, Part, Typing
from cudashell.language.grammar import Arg, Token, convert
from cudashell.teaching.shipped import demos
from tests.test_confinement import confined_shell


@dataclass(frozen=True)
class Row:
    token: str  # a word the kind takes (at column 7), and the value it makes
    value: object
    bad: tuple[str, str] | None = None  # a word it refuses, and what the error says
    offers: str | None = None  # a text completion offers (in the session below), None: it offers nothing
    path: tuple[str, ...] = ()  # values grading confines as paths
    not_path: tuple[str, ...] = ()  # values it does not
    cuda: bool = False
    writes: bool = False  # the command writes the file: a script, a cell, a lesson confine it too


ROWS = {
    "word": Row("hello", "hello", not_path=("hello",)),
    "rest": Row("a b", "a b"),
    "code": Row("CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_INVALID_VALUE"),
    "newname": Row("d0", "d0"),
    "commands": Row("alloc device 1KB", "alloc device 1KB", not_path=("alloc device 1KB",)),
    "cuda-source": Row('#include "in.h"', '#include "in.h"', not_path=('#include "in.h"',), cuda=True),
    "buffer": Row("p0", "p0", offers="p0"),
    "part": Row("p0[1KB:+64]", Part("p0", 1024, None, 64, 10), ("p0[", "bad range 'p0['"), offers="p0"),
    "stream": Row("s1", "s1", offers="s1"),
    "event": Row("e1", "e1", offers="e1"),
    "pool": Row("default", "default", offers="default"),
    "context": Row("gpu0", "gpu0", offers="gpu0"),
    "kernel": Row("k", "k", offers="k"),
    "size": Row("1KB", 1024, ("lots", "bad size 'lots'")),
    "count": Row("2^4", 16, ("many", "'many'")),
    "extent": Row("1000x64", (1000, 64), ("1x2x3x4", "'1x2x3x4' is neither a size nor an extent")),
    "points": Row("2.5", 2.5, ("-1", "bad points '-1'")),
    "int": Row("0x10", 16, ("x", "expected an integer, got 'x'")),
    "dim3": Row("16,16", (16, 16, 1), ("1,,2", "'1,,2' lacks its y dimension"), offers="16,16"),
    "dtype": Row("FLOAT32", "float32", ("float128", "unknown dtype 'float128'"), offers="float32"),
    "value": Row("1.5", 1.5, ("abc", "expected a number, iota or random, got 'abc'"), offers="iota"),
    "file": Row("out.txt", "out.txt", offers="out.txt", path=("out.txt", "off", "../x")),
    "written-file": Row("out.txt", "out.txt", offers="out.txt", path=("out.txt", "../x"), writes=True),
    "file-or-off": Row("out.txt", "out.txt", offers="out.txt", path=("out.txt",), not_path=("off",), writes=True),
    "cuda-file": Row("k.cu", "k.cu", offers="out.txt", path=("k.cu",), cuda=True),
    "lesson": Row("intro", "intro", path=("mine.toml", "../intro"), not_path=("intro",)),
    "command": Row("alloc", "alloc", offers="alloc"),
    "demo": Row("x", "x", offers=next(iter(demos()))),
    "key": Row("count", "count", offers="count"),
}


def registry_args() -> list[tuple[registry.Spec, Arg]]:
    return [(s, a) for s in registry.specs() for a in (*s.args, *(o.arg for o in s.opts))]


def test_a_misspelt_kind_fails_where_the_argument_is_declared():
    with pytest.raises(ValueError, match="no argument kind 'fiel' \\(did you mean 'file'\\?\\)"):
        Arg("FILE", "fiel")
    assert Arg("FILE", "file").kind is KINDS["file"] and Arg("X").kind is KINDS["word"]


def test_a_kind_is_not_compared_with_a_string():
    """`arg.kind == "file"` was how the three if-chains asked; left anywhere, it would be silently false."""
    with pytest.raises(TypeError):
        _ = KINDS["file"] == "file"
    assert KINDS["file"] == KINDS["file"] and KINDS["file"] != KINDS["cuda-file"]


def test_every_kind_is_used_by_the_registry_and_has_a_row_here():
    used = {a.kind.name for _, a in registry_args()}
    assert used == set(KINDS) == set(ROWS)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_kind_converts_a_word_with_the_parsers_errors_and_columns(name):
    row, arg = ROWS[name], Arg("X", name)
    assert convert(arg, Token(row.token, 7, 7 + len(row.token))) == row.value
    if row.bad is not None:
        with pytest.raises(ShellError) as e:
            convert(arg, Token(row.bad[0], 7, 7 + len(row.bad[0])))
        assert e.value.code == "USAGE" and row.bad[1] in e.value.message and e.value.col >= 7


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    """A session holding one of each thing completion names, and a folder holding out.txt."""
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    assert shell.execute("alloc device 1MB as p0; stream create as s1; event record e1; "
                         "kernel define k <<< __global__ void k(float *a) {} >>>"), shell.err.getvalue()
    folder = tmp_path_factory.mktemp("files")
    (folder / "out.txt").write_text("")
    yield shell.session, folder
    shell.close()


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_kind_offers_its_values_to_completion(name, typed):
    (session, folder), row = typed, ROWS[name]
    partial = str(folder / "o") if row.offers == "out.txt" else ""
    offers = [text for text, _ in KINDS[name].offer(Arg("B", name), Typing(session, [], partial, registry.command_words))]
    if row.offers is None:
        assert offers == []
    else:
        assert any(text.endswith(row.offers) for text in offers), offers


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_kind_says_what_grading_confines(name):
    kind, row = KINDS[name], ROWS[name]
    assert all(kind.path(v) for v in row.path) and not any(kind.path(v) for v in row.not_path)
    assert kind.cuda == row.cuda and kind.writes == row.writes


def _line_naming(spec: registry.Spec, target: Arg, value: str) -> str:
    """A command line that parses, with `value` as the target argument's."""
    words = [spec.name]
    for arg in spec.args:
        if arg is target:
            words.append(value)
        elif not arg.optional:
            words.append(arg.choices[0] if arg.choices else ROWS[arg.kind.name].token)
    for opt in spec.opts:
        if opt.arg is target:
            words += [opt.keyword, value] + ([opt.needs] if opt.needs else [])
    return " ".join(words)


CONFINED = [(s, a) for s, a in registry_args() if a.kind.path("x") or a.kind.cuda]


@pytest.mark.parametrize("spec, arg", CONFINED, ids=[f"{s.name}:{a.name}" for s, a in CONFINED])
def test_every_path_a_command_names_is_confined_to_the_grading_root(spec, arg, tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    shell = confined_shell(SimBackend(), sub)
    outside = "<<< #include \"../secret.h\" >>>" if not arg.kind.path("x") else \
        "../x.toml" if arg.kind.name == "lesson" else "../x"
    line = _line_naming(spec, arg, outside)
    try:
        assert shell.execute(line) is False, line
        assert shell.last_error.code == "OUTSIDE_SUBMISSION", (line, shell.last_error)
    finally:
        shell.close()


WRITTEN = [(s, a) for s, a in registry_args() if a.kind.writes]


@pytest.mark.parametrize("spec, arg", WRITTEN, ids=[f"{s.name}:{a.name}" for s, a in WRITTEN])
def test_every_file_a_command_writes_is_confined_to_a_scripts_folder(spec, arg, tmp_path):
    """A script's commands write only below its folder: `..`, an absolute path and a hidden name are refused, each
    command that writes a file by its path argument, before it opens anything."""
    sub = tmp_path / "sub"
    sub.mkdir()
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO(), workdir=sub)
    try:
        for value in ("../x", str(tmp_path / "x"), ".x"):
            (sub / "s.cush").write_text(_line_naming(spec, arg, value) + "\n")
            assert shell.execute("run s.cush") is False, value
        said = shell.err.getvalue()
        assert said.count("s.cush:1:") == 3 and said.count("OUTSIDE_FOLDER") == 3, said
        assert sorted(p.name for p in tmp_path.rglob("*")) == ["s.cush", "sub"]
    finally:
        shell.close()

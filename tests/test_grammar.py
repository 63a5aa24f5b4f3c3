"""The command language: sizes, tokens, columns, and errors that point at the right place."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cudashell.errors import ShellError
from cudashell.language.grammar import split_commands
from cudashell.language.registry import parse_segment
from cudashell.sizes import format_size, parse_size


@pytest.mark.parametrize("text,value", [
    ("4096", 4096), ("4KB", 4096), ("4KiB", 4096), ("4kib", 4096), ("64MB", 64 << 20), ("64MiB", 64 << 20),
    ("1GB", 1 << 30), ("1GiB", 1 << 30), ("2^20", 1 << 20), ("100_000", 100000), ("0x1000", 4096), ("3b", 3),
])
def test_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["4QB", "MB", "-1", "1.5MB", "2^", "2^99"])
def test_bad_sizes_are_usage_errors_with_a_hint(text):
    with pytest.raises(ShellError) as e:
        parse_size(text, 7)
    assert e.value.code == "USAGE" and e.value.col == 7 and "KiB" in e.value.hint


@given(st.integers(min_value=0, max_value=1 << 50), st.sampled_from(["", "KiB", "MiB", "GiB"]))
def test_size_units_multiply_up_to_2_to_the_64(n, unit):
    size = n * {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
    if size < 1 << 64:
        assert parse_size(f"{n}{unit}") == size
    else:
        with pytest.raises(ShellError, match="absurdly large"):
            parse_size(f"{n}{unit}")


@pytest.mark.parametrize("text", ["1_", "4_KB", "1__0x", "9" * 5000, "99999999999^64", "2^99999999999999", "0x"])
def test_bad_sizes_are_usage_errors(text):
    with pytest.raises(ShellError) as e:
        parse_size(text, 3)
    assert e.value.code == "USAGE" and e.value.col == 3


def test_leading_zeros_are_decimal():
    assert parse_size("010") == 10 and parse_size("0x10") == 16 and parse_size("1_000KB") == 1000 << 10


def test_format_size():
    assert format_size(64 << 20) == "64 MiB" and format_size(400000) == "390.62 KiB" and format_size(12) == "12 B"


def test_semicolons_comments_and_blank_lines():
    assert split_commands("   ") == () and split_commands("# only a comment") == ()
    segs = split_commands("alloc pinned 4KB ; ls;; free all # done")
    assert [s.text for s in segs] == ["alloc pinned 4KB", "ls", "free all"]
    assert segs[1].tokens[0].col == 20


def test_quotes_keep_spaces_and_hide_separators():
    (seg,) = split_commands('echo "a; b # c"')
    assert parse_segment(seg).args.get("TEXT") == "a; b # c"


def test_unterminated_quote_points_at_it():
    with pytest.raises(ShellError) as e:
        split_commands('echo "oops')
    assert e.value.col == 6


def parse(line):
    return parse_segment(split_commands(line)[0])


def test_keywords_are_case_insensitive_and_flags_any_order():
    cmd = parse("ALLOC Pinned 64MB WC Mapped as Staging")
    assert cmd.spec.name == "alloc"
    assert cmd.args.get("KIND") == "pinned" and cmd.args.get("SIZE") == 64 << 20
    assert cmd.args.flags == {"writecombined", "mapped"} and cmd.args.get("NAME") == "Staging"


def test_optional_direction():
    assert parse("memcpy h0 d0").args.get("DIR") is None
    cmd = parse("memcpy d2h d0 h0 4KB async stream 2")
    assert cmd.args.get("DIR") == "d2h" and cmd.args.get("SIZE") == 4096
    assert cmd.args.get("S") == "2" and "async" in cmd.args.flags


@pytest.mark.parametrize("line,code,col,hint", [
    ("memcopy h0 d0", "UNKNOWN_COMMAND", 1, "memcpy"),
    ("alloc pinned 64QB", "USAGE", 14, "KiB"),
    ("alloc pinned", "USAGE", 14, "usage: alloc"),
    ("alloc pinned 4KB as", "USAGE", 21, None),
    ("alloc lots 4KB", "USAGE", 7, "usage"),
    ("memcpy h0 d0 4KB extra", "USAGE", 18, "usage"),
    ("stream", "USAGE", 8, "stream create"),
    ("stream make", "USAGE", 8, "stream create"),
    ("fill h0 x dtype int32", "USAGE", 9, None),
    ("show h0 dtype float31", "USAGE", 15, "float32"),
])
def test_errors_carry_code_column_and_hint(line, code, col, hint):
    with pytest.raises(ShellError) as e:
        parse(line)
    assert (e.value.code, e.value.col) == (code, col)
    if hint:
        assert hint in e.value.hint


def test_every_spec_example_parses():
    from cudashell.language.registry import specs

    for spec in specs():
        assert parse(spec.example).spec.name == spec.name, spec.example

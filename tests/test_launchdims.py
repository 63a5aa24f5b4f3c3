"""2-D and 3-D launches: `grid X,Y[,Z] block X,Y[,Z]` parsed with the column of a bad part, the driver's limits
on the simulator (CUDA_ERROR_INVALID_VALUE, nothing changed), the elements a built-in computes, the JSON and
text of a launch, and the C that `explain` and `export c` write for it."""

from __future__ import annotations

import io

import pytest
from prompt_toolkit.document import Document

from cudashell.backends.sim import SimBackend
from cudashell.errors import ShellError
from cudashell.frontends.shell import Shell
from cudashell.language.argkinds import parse_dim3
from cudashell.language.suggest import suggest
from cudashell.model.launchdims import check_launch, default_grid, shape_text
from tests.fuzzing import snapshot

LAUNCH = "launch fill d 3 "


@pytest.mark.parametrize("text,dims", [("256", (256, 1, 1)), ("16,16", (16, 16, 1)), ("8,8,4", (8, 8, 4)),
                                       ("2^10,1K", (1024, 1024, 1)), ("0x10,2", (16, 2, 1)), ("0", (0, 1, 1))])
def test_a_shape_is_one_to_three_counts_missing_ones_are_1(text, dims):
    assert parse_dim3(text) == dims


@pytest.mark.parametrize("shape,at", [("16,x", 3), ("x", 0), ("16,16,", 6), ("16,", 3), (",16", 0),
                                      ("1,2,3,4", 6), ("2^32", 0), ("4,4294967296", 2), ("16,-1", 3)])
def test_a_bad_part_of_a_shape_is_a_usage_error_at_its_column(sim, shape, at):
    sim.ok("alloc device 4KB as d")
    err = sim.fails(f"{LAUNCH}grid {shape}")
    assert err["code"] == "USAGE" and err["col"] == len(LAUNCH) + len("grid ") + at + 1, err
    assert "launch shape" in err["hint"]


def test_a_space_after_the_comma_is_pointed_at(sim):
    sim.ok("alloc device 4KB as d")
    err = sim.fails(f"{LAUNCH}block 16, 16")
    assert err["code"] == "USAGE" and err["col"] == len(LAUNCH) + len("block 16,") + 1
    assert "without spaces" in err["hint"]


def test_help_and_the_reference_write_the_shape():
    from cudashell.language.registry import lookup

    assert "[grid X[,Y[,Z]]] [block X[,Y[,Z]]]" in lookup("launch").syntax()


# ------------------------------------------------------------------ the driver's limits, on the simulator
LIMITS = ["block 1025", "block 32,33", "block 8,8,17", "block 1,1,65", "block 1,1025", "block 0", "block 16,0",
          "grid 0", "grid 4,0,1", "grid 2^31", "grid 1,65536", "grid 1,1,65536", "shared 49KB block 16,16"]


@pytest.mark.parametrize("shape", LIMITS)
def test_a_shape_over_the_devices_limits_is_the_drivers_error_and_changes_nothing(sim, shape):
    sim.ok("alloc pinned 64KB as d; fill d 1; sync")
    session = sim.shell.session
    before = (snapshot(session), len(session.trace), sim.ok("checksum d")["checksums"], sim.buffer("d"),
              sim.ok("streams"))
    err = sim.fails(LAUNCH + shape)
    assert err["code"] == "CUDA_ERROR_INVALID_VALUE" and err["hint"], err
    assert (snapshot(session), len(session.trace), sim.ok("checksum d")["checksums"], sim.buffer("d"),
            sim.ok("streams")) == before


@pytest.mark.parametrize("grid,block", [((2**31 - 1, 65535, 65535), (1024, 1, 1)), ((1, 1, 1), (1, 1, 64)),
                                        ((1, 1, 1), (1024, 1, 1)), ((1, 1, 1), (32, 32, 1)), ((1, 1, 1), (16, 4, 16))])
def test_the_limits_themselves_are_allowed(grid, block):
    check_launch(grid, block, 48 << 10)


@pytest.mark.parametrize("grid,block,shared,static,word", [
    ((1, 1, 1), (32, 32, 2), 0, 0, "2048 threads"), ((1, 1, 1), (1, 1, 65), 0, 0, "65 threads in z"),
    ((1, 65536, 1), (1, 1, 1), 0, 0, "65536 blocks in y"), ((2**31, 1, 1), (1, 1, 1), 0, 0, "2^31-1"),
    ((1, 1, 0), (1, 1, 1), 0, 0, "0 blocks in z"), ((1, 1, 1), (1, 1, 1), 40 << 10, 9 << 10, "static")])
def test_each_limit_says_which_and_why(grid, block, shared, static, word):
    with pytest.raises(ShellError) as e:
        check_launch(grid, block, shared, static)
    assert e.value.code == "CUDA_ERROR_INVALID_VALUE" and word in e.value.message and e.value.hint


def test_the_default_grid_covers_n_with_the_blocks_threads():
    assert default_grid(4096, (16, 16, 1)) == (16, 1, 1) and default_grid(4097, (256, 1, 1)) == (17, 1, 1)
    assert default_grid(10, (0, 1, 1)) == (1, 1, 1)  # and the driver refuses the block
    assert default_grid(2**33, (1, 1, 1)) == (2**32 - 1, 1, 1)  # fits C's unsigned int, over the driver's limit


# ------------------------------------------------------------------ what a 2-D launch computes and says
def test_a_2d_launch_of_a_built_in_computes_one_element_a_thread(sim):
    sim.ok("alloc pinned 64KB as d; fill d 0 dtype float32")
    res = sim.ok("launch fill d 3 grid 4,4 block 16,16")
    assert res["grid"] == [4, 4, 1] and res["block"] == [16, 16, 1]
    assert res["computed"] == 4096 and res["n"] == 16384
    sim.ok("sync")
    values = sim.ok("show d dtype float32 offset 16376 count 4")["values"]  # bytes: elements 4094..4097
    assert values == [3.0, 3.0, 0.0, 0.0]
    three = sim.ok("launch increment d grid 2,2,2 block 8,8,2")
    assert three["computed"] == 1024 and three["grid"] == [2, 2, 2]
    sim.ok("sync")
    assert sim.ok("show d dtype float32 offset 4092 count 2")["values"] == [4.0, 3.0]


def test_a_1d_launch_keeps_its_shape_as_three_numbers(sim):
    sim.ok("alloc device 4KB as d")
    res = sim.ok("launch fill d 3")
    assert res["grid"] == [4, 1, 1] and res["block"] == [256, 1, 1] and res["computed"] == 1024
    assert sim.ok("launch spin 1")["block"] == [1, 1, 1]


def test_the_text_shows_dim3_where_a_shape_is_not_1d():
    out = io.StringIO()
    sh = Shell(SimBackend(), "t", out=out, err=out)
    sh.execute("alloc device 64KB as d; launch fill d 3; launch fill d 3 grid 4,4 block 16,16; "
               "launch fill d 3 grid 8 block 8,8,4")
    lines = [x for x in out.getvalue().splitlines() if x.startswith("launch")]
    assert lines[0].startswith("launch fill<<<64, 256>>>(d, 3.0, n=16384) on stream 0")
    assert lines[1].startswith("launch fill<<<dim3(4, 4), dim3(16, 16)>>>(d, 3.0, n=16384) (4096 computed")
    assert lines[2].startswith("launch fill<<<8, dim3(8, 8, 4)>>>")
    assert shape_text((16, 1, 1)) == "16" and shape_text((1, 1, 4)) == "dim3(1, 1, 4)"


def test_explain_and_export_write_dim3_for_a_2d_launch(sim, tmp_path):
    objs = sim.run("explain on; alloc device 64KB as d; launch fill d 3 grid 4,4 block 16,16; launch fill d 2; "
                   "launch scale d 2.0 block 8,8,4 stream 0")
    assert objs[2]["explain"] == {"c": "{\n    dim3 grid(4, 4); dim3 block(16, 16);\n"
                                       "    k_fill<<<grid, block, 0, 0>>>((float *)b_d, 3, 16384);\n}",
                                  "driver": "cuLaunchKernel"}
    assert objs[3]["explain"]["c"] == "k_fill<<<64, 256, 0, 0>>>((float *)b_d, 2, 16384);"
    assert "dim3 grid(64); dim3 block(8, 8, 4);" in objs[4]["explain"]["c"]
    sim.ok(f"export c {tmp_path / 's.cu'}")
    text = (tmp_path / "s.cu").read_text()
    assert text.count("dim3 grid(") == 2 and "k_fill<<<grid, block, 0, 0>>>((float *)b_d, 3, 16384);" in text
    assert "k_fill<<<64, 256, 0, 0>>>" in text


# ------------------------------------------------------------------ completion and highlighting
def test_completion_offers_shapes_and_squares_a_typed_dimension():
    sh = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    sh.execute("alloc device 4KB as d")

    def texts(line):
        return [s.text for s in suggest(line, sh.session)]
    assert texts("launch fill d 3 block ") == ["256", "16,16", "8,8,4"]
    assert texts("launch fill d 3 block 32,")[0] == "32,32" and texts("launch fill d 3 grid 8,8,")[0] == "8,8,8"
    assert "grid" in texts("launch fill d 3 block 16,16 ")
    sh.close()


def test_a_shape_is_highlighted_as_a_number():
    from cudashell.frontends.repl import ShellLexer

    sh = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    styles = dict((w, s) for s, w in ShellLexer(sh).lex_document(Document("launch spin 1 grid 16,16 block 8,x"))(0))
    assert styles["16,16"] == "class:number" and styles["8,x"] == ""
    sh.close()

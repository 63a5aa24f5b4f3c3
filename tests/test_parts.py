"""Parts of buffers — `p0[32MB:]`, `p0[1MB:+64KB]`, `p0[0:4KB]` — in memcpy, memset, launch, show and compare:
the bytes land where C's `p0 + offset` would put them, on both backends; a range that does not fit is refused
before any backend call; explain and export c write the pointer arithmetic."""

from __future__ import annotations

import pytest

from cudashell.errors import ShellError
from cudashell.language.argkinds import Part, parse_part

MB = 1 << 20


@pytest.mark.parametrize("text,part", [
    ("p0", Part("p0", col=1)),
    ("p0[32MB:]", Part("p0", 32 * MB, col=4)),
    ("p0[1MB:+64KB]", Part("p0", MB, None, 64 << 10, 4)),
    ("p0[:4KB]", Part("p0", 0, 4096, None, 4)),
    ("p0[1MB:2MB]", Part("p0", MB, 2 * MB, None, 4)),
    ("p0[0x10:+2^4]", Part("p0", 16, None, 16, 4)),
])
def test_part_syntax(text, part):
    assert parse_part(text, 1) == part


@pytest.mark.parametrize("text,col,says", [
    ("p0[2MB:1MB]", 8, "ends (1048576) before it starts"),  # the column of the end
    ("p0[1MB:+]", 9, "'+' needs a length"),
    ("p0[x:]", 4, "bad size 'x'"),
    ("p0[1MB]", 1, "bad range"),
    ("p0[0:4KB", 1, "bad range"),
])
def test_bad_parts_say_where(text, col, says):
    with pytest.raises(ShellError) as e:
        parse_part(text, 1)
    assert e.value.code == "USAGE" and e.value.col == col and says in e.value.message


def test_chunks_of_one_buffer_round_trip_byte_for_byte(cush):
    cush.ok("alloc pinned 4MB as h; alloc device 4MB as d; alloc pinned 4MB as back; fill h iota dtype uint32")
    copy = cush.ok("memcpy h[1MB:+1MB] d[3MB:] async")  # the length comes from the source's range
    assert (copy["bytes"], copy["src_offset"], copy["dst_offset"], copy["src_part"], copy["dst_part"]) == \
        (MB, MB, 3 * MB, "h[1MB:+1MB]", "d[3MB:+1MB]")
    cush.ok("memcpy d[3MB:+1MB] back[0:+1MB]; sync")
    assert cush.ok("compare h[1MB:+1MB] back[0:+1MB]")["equal"]
    shown = cush.ok("show back[0:+16] dtype uint32")
    assert shown["values"] == [262144, 262145, 262146, 262147] and shown["count"] == 4
    assert cush.ok("show back[1MB:] count 2 dtype uint32")["values"] == [0, 0]  # the rest was not touched
    assert cush.ok("compare back[1MB:] h[0:3MB]")["equal"] is False


def test_a_memset_and_a_kernel_on_a_part_touch_only_that_part(cush):
    cush.ok("alloc device 1MB as d; alloc pinned 1MB as h; memset d[256KB:+256KB] 7")
    cush.ok("launch fill d[512KB:+4KB] 2.0; memcpy d h; sync")
    raw = cush.ok("show h[256KB-4:+8] dtype uint8".replace("256KB-4", str(256 * 1024 - 4)))["values"]
    assert raw == [0, 0, 0, 0, 7, 7, 7, 7]
    launched = cush.ok("show h[512KB:+8KB] dtype float32 count 2048")["values"]
    assert launched[:1024] == [2.0] * 1024 and launched[1024] == 0.0  # n = the part's 1024 elements


@pytest.mark.parametrize("line,code,at", [  # `at`: the text the error's column points at
    ("memcpy h[5MB:] d", "OUT_OF_BOUNDS", "5MB:]"),
    ("memcpy h[0:+2MB] d[3MB:]", "OUT_OF_BOUNDS", "d[3MB:]"),
    ("memcpy h[0:+1MB] d[0:+2MB]", "USAGE", "d[0:+2MB]"),
    ("memcpy h[0:+1MB] d 2MB", "USAGE", "2MB"),
    ("memset d[4MB:+1] 0", "OUT_OF_BOUNDS", "4MB:+1]"),
    ("launch increment d[3MB:] n 300000", "OUT_OF_BOUNDS", "300000"),
    ("show h[0:+8] count 3 dtype uint32", "OUT_OF_BOUNDS", "3 dtype"),
    ("show h[4KB:] offset 4", "USAGE", "4"),
    ("compare h[0:+1MB] d[0:+2MB]", "USAGE", "d[0:+2MB]"),
    ("memcpy nosuch[0:] d", "NO_SUCH_BUFFER", "nosuch"),
])
def test_a_part_that_does_not_fit_is_refused_before_the_backend(sim, line, code, at):
    sim.ok("alloc pinned 4MB as h; alloc device 4MB as d")
    traced = len(sim.shell.session.trace)
    error = sim.fails(line)
    assert (error["code"], error["col"]) == (code, line.rindex(at) + 1), error
    assert len(sim.shell.session.trace) == traced  # nothing reached the backend


def test_explain_and_export_write_the_pointer_arithmetic(sim, tmp_path):
    objs = sim.run("explain on; alloc pinned 4MB as h; alloc device 4MB as d; memcpy h[1MB:+1MB] d[3MB:] async; "
                   "launch increment d[3MB:]; memset d[2MB:] 0 4KB")
    explained = [o.get("explain") for o in objs]
    assert explained[1] == {"c": "CHECK(cudaHostAlloc((void **)&b_h, 4194304, cudaHostAllocDefault));",
                            "driver": "cuMemHostAlloc"}  # not the zeroing the program adds to match the shell
    assert explained[3] == {"c": "CHECK(cudaMemcpyAsync(b_d + 3145728, b_h + 1048576, 1048576, "
                                 "cudaMemcpyHostToDevice, 0));", "driver": "cuMemcpyAsync"}
    assert explained[4]["c"] == "k_increment<<<1024, 256, 0, 0>>>((float *)(b_d + 3145728), 262144);"
    assert explained[5] == {"c": "CHECK(cudaMemset(b_d + 2097152, 0, 4096));", "driver": "cuMemsetD8_v2"}
    sim.ok(f"export c {tmp_path / 's.cu'}")
    text = (tmp_path / "s.cu").read_text()
    assert "CHECK(cudaMemcpyAsync(b_d + 3145728, b_h + 1048576, 1048576, cudaMemcpyHostToDevice, 0));" in text
    assert "(float *)(b_d + 3145728), 262144);" in text and "cudaMemset(b_d + 2097152, 0, 4096)" in text


def test_explain_names_the_driver_call_of_an_async_host_to_host_copy(sim):
    objs = sim.run("alloc pinned 1MB as a; alloc pageable 1MB as b; explain on; memcpy a b async")
    assert objs[-1]["explain"] == {"c": "CHECK(cudaMemcpyAsync(b_b, b_a, 1048576, cudaMemcpyHostToHost, 0));",
                                   "driver": "cuMemcpyAsync"}

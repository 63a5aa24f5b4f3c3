"""Pitched 2-D and 3-D memory (issue 35, item 3): the scenarios run unchanged on the simulator and on the GPU (the
`cush` fixture; the H100 is the truth) — the driver's pitch, bytes through 2-D and 3-D copies with the padding left
alone, the driver's refusal of a width over a pitch, a kernel given `img.pitch` — then what only the simulator
answers the same way every time (its timing model, advice, export, calibrate)."""

from __future__ import annotations

import pytest

from cudashell.errors import ShellError

# cudaMallocPitch on the H100 (design/memory-model-facts.md): the width rounded up to 512 B
H100_PITCH = {1: 512, 100: 512, 511: 512, 512: 512, 513: 1024, 1000: 1024, 4096: 4096, 4097: 4608, 65536: 65536}

MARK_ROWS = ("kernel define mark_rows <<< __global__ void mark_rows(unsigned char *img, size_t pitch, int width, "
             "int height) { int x = blockIdx.x * blockDim.x + threadIdx.x; int y = blockIdx.y; "
             "if (x < width && y < height) img[y * pitch + x] = (unsigned char)(y + 1); } >>>")


def values(cush, name: str, count: int) -> list[int]:
    return cush.ok(f"show {name} count {count}")["values"]


# ------------------------------------------------------------------ on both backends
@pytest.mark.parametrize("width", sorted(H100_PITCH))
def test_the_pitch_is_the_h100_drivers(cush, width):
    res = cush.ok(f"alloc pitched {width}x3 as img")
    shape = res["buffer"]["shape"]
    assert shape == {"width": width, "height": 3, "depth": 1, "pitch": H100_PITCH[width]}
    assert res["buffer"]["size"] == H100_PITCH[width] * 3 and res["call"] == "cudaMallocPitch"
    assert int(res["buffer"]["device_ptr"], 16) % 512 == 0
    assert cush.ok("info img")["shape"] == shape and cush.buffer("img")["shape"] == shape


def test_a_3d_allocation_is_pitched_rows_of_height_times_depth(cush):
    res = cush.ok("alloc pitched 4097x4x3 as vol")
    assert res["buffer"]["shape"] == {"width": 4097, "height": 4, "depth": 3, "pitch": 4608}
    assert res["buffer"]["size"] == 4608 * 12 and res["call"] == "cudaMalloc3D"


def test_a_2d_copy_round_trips_and_leaves_the_padding_alone(cush):
    cush.ok("alloc pitched 1000x4 as img; memset img 7; alloc pinned 4000 as h; fill h iota dtype uint8")
    cush.ok("memcpy2d h img 1000x4")
    cush.ok("alloc pinned 4096 as raw; memcpy img raw")
    raw, src = values(cush, "raw", 4096), values(cush, "h", 4000)
    for y in range(4):
        assert raw[y * 1024:y * 1024 + 1000] == src[y * 1000:(y + 1) * 1000]
        assert raw[y * 1024 + 1000:(y + 1) * 1024] == [7] * 24  # the padding: never written
    cush.ok("stream create as s; alloc pinned 4000 as back")
    res = cush.ok("memcpy2d img back 1000x4 async stream s")
    assert (res["src_pitch"], res["dst_pitch"], res["bytes"], res["direction"]) == (1024, 1000, 4000, "d2h")
    cush.ok("sync")
    assert values(cush, "back", 4000) == src


def test_a_part_picks_the_rectangles_origin(cush):
    cush.ok("alloc pitched 100x4 as img; alloc pinned 200 as h; fill h 9; memcpy2d h img[1024:] 100x2")
    cush.ok("alloc pinned 2048 as raw; memcpy img raw")
    raw = values(cush, "raw", 2048)
    assert raw[1024:1124] == [9] * 100 and raw[1536:1636] == [9] * 100 and raw[:1024] == [0] * 1024


def test_a_3d_copy_between_packed_and_pitched_memory(cush):
    cush.ok("alloc pitched 100x4x3 as vol; alloc pageable 1200 as lin; fill lin iota dtype uint8")
    res = cush.ok("memcpy3d lin vol 100x4x3")
    assert res["call"] == "cudaMemcpy3D" and res["bytes"] == 1200
    cush.ok("alloc pinned 6144 as raw; memcpy vol raw; alloc pageable 1200 as back; memcpy3d vol back 100x4x3")
    raw, src = values(cush, "raw", 6144), values(cush, "lin", 1200)
    for z in range(3):
        for y in range(4):
            row = (z * 4 + y) * 512
            assert raw[row:row + 100] == src[(z * 4 + y) * 100:(z * 4 + y + 1) * 100]
    assert values(cush, "back", 1200) == src


def test_a_width_over_a_pitch_is_the_drivers_invalid_value(cush):
    cush.ok("alloc pitched 1000x4 as img; alloc pinned 8000 as h")
    err = cush.fails("memcpy2d h img 1000x4 spitch 999")
    assert err["code"] == "CUDA_ERROR_INVALID_VALUE" and "h's pitch (999 B)" in err["message"]
    session = cush.shell.session
    img, h = session.buffers["img"], session.buffers["h"]
    with pytest.raises(ShellError) as refused:  # the driver itself, past the shell's check
        cush.backend.memcpy_shaped(h, 0, 1000, 4, img, 0, 1024, 4, 1025, 4, 1, None, False)
    assert refused.value.code == "CUDA_ERROR_INVALID_VALUE"


def test_a_kernel_gets_the_pitch_as_an_argument(cush):
    cush.ok("alloc pitched 100x8 as img; " + MARK_ROWS)
    res = cush.ok("launch mark_rows img img.pitch 100 8 grid 1,8 block 128; sync")
    cush.ok("alloc pinned 4096 as raw; memcpy img raw")
    raw = values(cush, "raw", 4096)
    for y in range(8):
        assert raw[y * 512:y * 512 + 100] == [y + 1] * 100 and raw[y * 512 + 100:(y + 1) * 512] == [0] * 412
    assert res is not None


@pytest.mark.parametrize("line, code, words", [
    ("memcpy2d h img 1001x4", "OUT_OF_BOUNDS", "needs 4004 B from h"),
    ("memcpy2d h img[100:] 1000x4", "OUT_OF_BOUNDS", "cross into the next row"),
    ("memcpy2d h img[2048:] 1000x3", "OUT_OF_BOUNDS", "destination's"),
    ("memcpy2d h img 1000x4 dpitch 900", "CUDA_ERROR_INVALID_VALUE", "img's pitch (900 B)"),
    ("memcpy2d h img 1000x4x2", "USAGE", "WIDTHxHEIGHT"),
    ("memcpy3d h img 1000x4", "USAGE", "WIDTHxHEIGHTxDEPTH"),
    ("memcpy3d h img 0x4x1", "USAGE", "copies nothing"),
    ("alloc pitched 0x4", "USAGE", "not the size 4"),  # hex, as a size is read first
    ("alloc pitched 64MB", "USAGE", "WIDTHxHEIGHT"),
    ("alloc device 4x4", "USAGE", "takes a size"),
    ("alloc pitched 0x4x1", "CUDA_ERROR_INVALID_VALUE", "holds no bytes"),
])
def test_bad_rectangles_are_refused_before_the_driver(sim, monkeypatch, line, code, words):
    sim.ok("alloc pitched 1000x4 as img; alloc pinned 4000 as h")
    monkeypatch.setattr(sim.backend, "memcpy_shaped", lambda *a: pytest.fail("the backend was asked"))
    monkeypatch.setattr(sim.backend, "alloc_pitched", lambda *a: pytest.fail("the backend was asked"))
    err = sim.fails(line)
    assert err["code"] == code and words in err["message"]


def test_a_linear_buffer_has_no_pitch_to_pass(sim):
    sim.ok("alloc device 4KB as d; " + MARK_ROWS)
    assert "not pitched memory" in sim.fails("launch mark_rows d d.pitch 100 8")["message"]


# ------------------------------------------------------------------ what the simulator models
def gbps(sim, width: int, rows: int = 4096) -> float:
    sim.ok(f"alloc pitched {width}x{rows} as d{width}; alloc pinned {width * rows} as h{width}")
    return sim.ok(f"memcpy2d h{width} d{width} {width}x{rows}")["gbps"]


def test_narrow_rows_are_slower_per_byte_as_on_the_h100(sim):
    """The H100, pinned → device, 4096 rows: 0.97, 29.9, 51.5, 54.5 GB/s for rows of 4, 64, 512, 4096 B."""
    rates = {w: gbps(sim, w) for w in (4, 64, 512, 4096)}
    assert rates[4] == pytest.approx(0.97, rel=0.1)
    assert rates[64] == pytest.approx(29.9, rel=0.25)
    assert rates[512] == pytest.approx(51.5, rel=0.1) and rates[4096] == pytest.approx(54.5, rel=0.05)
    assert rates[4] < rates[64] < rates[512] < rates[4096]


def test_a_2d_copy_shows_on_the_timeline_and_in_the_profile(sim):
    sim.ok("alloc pitched 1000x64 as img; alloc pinned 64000 as h; stream create as s")
    sim.ok("memcpy2d h img 1000x64 async stream s; sync")
    spans = sim.ok("timeline")["spans"]
    assert [s["op"] for s in spans] == ["memcpy2d h2d"] and spans[0]["engine"] == "copy H2D"
    profile = sim.ok("profile")
    assert [r["name"] for r in profile["gpu"]] == ["[CUDA memcpy HtoD]"]  # nvprof's name for every copy
    assert "cudaMemcpy2DAsync" in [r["name"] for r in profile["api"]]


def test_advice_says_narrow_rows_cost_per_row(sim):
    sim.ok("set advice on; alloc pitched 4x4096 as nr; alloc pinned 16KB as h")
    notes = [o["result"] for o in sim.run("memcpy2d h nr 4x4096") if o["kind"] == "note"]
    assert [n["rule"] for n in notes] == ["narrow-rows"] and "pays for each row" in notes[0]["note"]
    assert not [o for o in sim.run("alloc pitched 4096x64 as w; alloc pinned 256KB as b; memcpy2d b w 4096x64")
                if o["kind"] == "note"]


def test_export_c_allocates_pitched_and_copies_with_the_drivers_pitch(sim, tmp_path):
    sim.ok("alloc pitched 1000x64 as img; alloc pitched 100x8x4 as vol; alloc pinned 64000 as h; " + MARK_ROWS)
    sim.ok("memcpy2d h img 1000x64; memcpy3d h vol 100x8x4; launch mark_rows img img.pitch 1000 64 grid 8,64")
    sim.ok(f"export c {tmp_path}/p.cu")
    c = (tmp_path / "p.cu").read_text()
    assert "CHECK(cudaMallocPitch((void **)&b_img, &pitch_img, 1000, 64));" in c
    assert "cudaMalloc3D(&pp, make_cudaExtent(100, 8, 4))" in c
    assert "CHECK(cudaMemcpy2D(b_img, pitch_img, b_h, 1000, 1000, 64, cudaMemcpyHostToDevice));" in c
    assert "make_cudaPitchedPtr(b_vol, pitch_vol, 100, 8)" in c and "cudaMemcpy3D(&p)" in c
    assert "(any_ptr{b_img}, (uint64_t)pitch_img, (int32_t)1000, (int32_t)64)" in c


def test_calibrate_measures_the_narrow_row_cost(sim):
    assert sim.ok("calibrate")["profile"]["copy_narrow_row"] == pytest.approx(2.5e-9, rel=0.05)


def test_through_the_workers_pipe_the_pitch_and_the_rows_arrive(piped):
    """The cuda backend's path (the worker numbers the allocation; the pitch rides in its Allocation), the simulator
    behind it; a `repeat` plan records and reruns the 2-D copy."""
    assert piped.ok("alloc pitched 1000x4 as img")["buffer"]["shape"]["pitch"] == 1024
    piped.ok("alloc pinned 4000 as h; fill h iota dtype uint8; memcpy2d h img 1000x4; alloc pinned 4000 as b")
    piped.ok("stream create as s; memcpy3d img b 1000x4x1 async stream s; sync")
    assert piped.ok("compare h b")["equal"]
    piped.ok("repeat 3 <<< memcpy2d h img 1000x4 async >>>")
    assert piped.ok("calibrate")["profile"]["copy_narrow_row"] == pytest.approx(2.5e-9, rel=0.05)

"""Host data at memory speed (issue 38) with the same values, and its time modeled on the simulator (issue 37): the
checksum is the one `export c`'s C prints, `fill random` the SplitMix64 its C writes, `compare` finds the first
difference across pieces and offsets, and each command reports the host's time — measured on a GPU's host,
modeled from the profile's host rates on the simulator (so write-combined reads are as slow as the profile says)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace

import numpy as np
import pytest

from cudashell.backends import hostdata as H
from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.export.cemit import PRELUDE
from tests.conftest import Cush, text_run

MASK = (1 << 64) - 1


def c_checksum(data: bytes) -> int:
    """The C prelude's loop, as written there: s += b[i] * (i % 251 + 1), in uint64_t."""
    s = 0
    for i, b in enumerate(data):
        s = (s + b * (i % 251 + 1)) & MASK
    return s


def c_splitmix64(seed: int, i: int) -> int:
    """SplitMix64 of seed + (i + 1)·golden, one element as a scalar C loop makes it."""
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def splitmix_stream(seed: int, first: int, words: int) -> np.ndarray:
    """The little-endian bytes of words first, first + 1, … of the stream, from whole arrays at once (none of
    hostdata's runs, pieces or threads); c_splitmix64 vouches for it at its ends."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(first, first + words, dtype=np.uint64) + np.uint64(1)) * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    assert int(z[0]) == c_splitmix64(seed, first) and int(z[-1]) == c_splitmix64(seed, first + words - 1)
    return z.astype("<u8").view(np.uint8)


GOLDEN = 0x9E3779B97F4A7C15


def test_the_prelude_still_sums_and_draws_as_these_references_do():
    assert "s += (uint64_t)b[i] * (i % 251 + 1);" in PRELUDE and "splitmix64(seed, at / 8)" in PRELUDE
    assert "splitmix64(seed, i) >> 11" in PRELUDE


INTEGERS = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"]


@pytest.mark.parametrize("dtype", INTEGERS)
def test_an_integer_fill_random_is_the_bytes_of_the_splitmix64_words_in_order_from_any_start(dtype):
    """Element i of size s is bytes [i·s, i·s + s) of z_0 z_1 …, little-endian: a start mid-word, a count ending
    mid-word, and a fill large enough to be drawn by several threads, each from its own first word."""
    kind = np.dtype(dtype)
    threaded = 3 * H.RANDOM_RUN * 8 * H.CORES // kind.itemsize + 5
    for seed, start, count in ((0, 0, 1), (0, 0, 5), (9, 3, 70001), (MASK, 2 ** 40 + 1, 300), (7, 1, threaded)):
        first, end = start * kind.itemsize, (start + count) * kind.itemsize
        stream = splitmix_stream(seed, first // 8, -(-end // 8) - first // 8)
        want = stream[first % 8: first % 8 + end - first]
        out = np.empty(count, kind)
        H.fill_into(out, "random", start, seed)
        assert out.tobytes() == want.tobytes(), (seed, start, count)


def test_uint32_elements_are_the_halves_of_a_word_and_uint8_its_bytes():
    z = c_splitmix64(5, 0), c_splitmix64(5, 1)
    assert H.random_values(5, 0, 4, np.dtype(np.uint32)).tolist() == [z[0] & 0xFFFFFFFF, z[0] >> 32,
                                                                        z[1] & 0xFFFFFFFF, z[1] >> 32]
    assert H.random_values(5, 8 + 3, 2, np.dtype(np.uint8)).tolist() == [(z[1] >> 24) & 255, (z[1] >> 32) & 255]
    assert H.random_values(5, 0, 2, np.dtype(np.uint64)).tolist() == list(z)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_a_float_fill_random_is_one_splitmix64_word_an_element_from_any_start(dtype):
    kind = np.dtype(dtype)
    for seed, start, count in ((0, 0, 5), (9, 65530, 70000), (MASK, 2 ** 40, 300)):
        out = np.empty(count, kind)
        H.fill_into(out, "random", start, seed)
        z = [c_splitmix64(seed, start + k) for k in range(0, count, 997)]
        want = np.array([(v >> 11) * 2.0 ** -53 for v in z]).astype(kind)
        assert out[::997].tobytes() == want.tobytes(), (seed, start)


def test_iota_and_constants_are_what_numpy_casts_them_to():
    out = np.empty(1000, np.float16)
    H.fill_into(out, "iota", 65000, 0)
    with np.errstate(over="ignore"):  # past 65504 a float16 is inf
        assert out.tobytes() == np.arange(65000, 66000).astype(np.float16).tobytes()
    out = np.empty(7, np.int32)
    H.fill_into(out, -1, 0, 0)
    assert out.tolist() == [-1] * 7 and H.uniform_byte(-1, np.dtype(np.int32)) == 255
    assert H.uniform_byte(1, np.dtype(np.int32)) is None and H.uniform_byte(0.0, np.dtype(np.float32)) == 0


def test_the_first_difference_is_found_in_any_piece_against_data_or_zeros():
    a = np.random.default_rng(2).integers(1, 256, (3 << 20) + 5, dtype=np.uint8)
    for at in (0, 7, (1 << 20) - 1, 1 << 20, a.size - 1):
        b = a.copy()
        b[at] ^= 0x10
        pairs = ((pos, a[pos: pos + n], b[pos: pos + n]) for pos, n in H.piece_spans(0, a.size, 1 << 20))
        assert H.first_difference(pairs) == at
    assert H.first_difference((p, a[p: p + n], a[p: p + n]) for p, n in H.piece_spans(0, a.size)) is None
    z = np.zeros(100, np.uint8)
    z[42] = 1
    assert H.first_difference([(0, None, None), (100, None, z)]) == 142
    assert H.first_difference([(0, np.zeros(8, np.uint8), None)]) is None


# ------------------------------------------------------------------ the commands, on the simulator and through the pipe
def test_compare_across_chunks_at_different_offsets_finds_the_byte(sim):
    sim.ok("alloc pinned 4MB as a; alloc pageable 4MB as b; fill a random seed 3; memcpy a b")
    assert sim.ok("compare a[1048579:+2MB] b[1048579:+2MB]")["equal"]
    sim.ok("fill b 0")
    sim.ok("memcpy a[1048579:+2MB] b[7:+2MB]")  # b's copy starts 7 bytes in, across b's 1 MiB chunks
    r = sim.ok("compare a[1048579:+2MB] b[7:+2MB]")
    assert r["equal"] and r["bytes"] == 2 << 20
    sim.ok("fill b 0")
    r = sim.ok("compare a[1048579:+2MB] b[7:+2MB]")  # b is zeros now (its chunks were dropped)
    first = int(np.flatnonzero(H.random_values(3, (1 << 20) + 3, 64, np.dtype(np.uint8)))[0])
    assert r["offset"] == first and r["b_byte"] == 0


def test_checksums_through_the_worker_are_the_simulators_and_fill_zero_keeps_no_storage(piped, sim):
    for c in (piped, sim):
        c.ok("alloc pinned 3MB as p; fill p random seed 5 dtype float32; alloc device 3MB as d; memcpy p d")
    sums = piped.ok("checksum p d")["checksums"]
    assert sums == sim.ok("checksum p d")["checksums"] and sums["p"] == sums["d"]
    data = H.random_values(5, 0, (3 << 20) // 4, np.dtype(np.float32)).view(np.uint8)
    assert sums["p"] == H.checksum([(0, data)])
    sim.ok("alloc pinned 3MB as q; fill q 7")
    used = sim.backend.budget.used
    sim.ok("fill q 0")
    assert sim.backend.budget.used == used - (3 << 20) and sim.ok("checksum q")["checksums"]["q"] == 0


def test_host_work_is_modeled_from_the_profiles_host_rates_and_moves_the_clock():
    slow_wc = replace(Profile.load(None), host_read_writecombined=1e9, host_read_pinned=10e9, host_checksum=1e12)
    c = Cush(SimBackend(slow_wc))
    try:
        c.ok("alloc pinned 64MB as plain; alloc pinned 64MB writecombined as wc; alloc pinned 64MB as other")
        c.ok("fill plain 1; fill wc 1; fill other 1")
        t0 = c.backend.clock()
        plain = c.ok("compare plain other")
        assert c.backend.clock() - t0 == pytest.approx(plain["host_seconds"] + slow_wc.shell_overhead)
        wc = c.ok("compare wc other")
        n = 64 << 20
        assert plain["timing"] == wc["timing"] == "modeled"
        assert plain["host_seconds"] == pytest.approx(2 * n / 10e9)
        assert wc["host_seconds"] == pytest.approx(n / 1e9 + n / 10e9)
        summed = c.ok("checksum wc")
        assert summed["host_seconds"] == pytest.approx(n / 1e9 + n / 1e12) and summed["timing"] == "modeled"
        filled = c.ok("fill plain random dtype uint64")
        assert filled["host_seconds"] == pytest.approx(n / slow_wc.host_write_pinned + n / slow_wc.host_random)
        assert c.ok("fill plain random dtype uint8")["host_seconds"] == filled["host_seconds"]  # one word: 8 bytes
        floats = c.ok("fill plain random dtype float32")["host_seconds"]  # one word an element: twice the words
        assert floats == pytest.approx(n / slow_wc.host_write_pinned + 2 * n / slow_wc.host_random)
        assert c.ok("show plain count 4")["timing"] == "modeled"
    finally:
        c.shell.close()


def test_the_text_ends_with_the_host_time_as_the_default_profile_models_it():
    """16 MiB: written, each side of a compare read, and the checksum's sums, at the default profile's rates."""
    from cudashell.backends.profile import Profile
    from cudashell.output.render import fmt_seconds

    p, n = Profile.load(None), 16 << 20
    text = text_run(["alloc pinned 16MB as a", "alloc pinned 16MB as b", "fill a 1", "fill b 1", "compare a b",
                     "checksum a"])
    assert f"a: 16777216 uint8 elements ← 1 — host {fmt_seconds(n / p.host_write_pinned)} (modeled)" in text
    assert f"a == b (16 MiB (16777216 B)) — host {fmt_seconds(2 * n / p.host_read_pinned)} (modeled)" in text
    summed = n / p.host_read_pinned + n / p.host_checksum
    assert f"\nchecksum a {c_checksum_of_ones(n)}\nhost time {fmt_seconds(summed)} (modeled)" in text


def c_checksum_of_ones(n: int) -> int:
    rows, tail = divmod(n, 251)
    return rows * 251 * 252 // 2 + tail * (tail + 1) // 2


def test_both_backends_fill_compare_and_checksum_alike_and_say_how_the_time_is_known(cush):
    """On a GPU the work runs in the worker, over its host buffers in place (device memory through a copy), and the
    time is its host's clock; on the simulator, the profile's."""
    cush.ok("alloc pinned 5MB writecombined as w; alloc pageable 5MB as h; alloc device 5MB as d")
    cush.ok("fill w random seed 4 dtype uint32; memcpy w d; memcpy d h")
    want = H.checksum([(0, H.random_values(4, 0, (5 << 20) // 4, np.dtype(np.uint32)).view(np.uint8))])
    sums = cush.ok("checksum w h d")
    label = "modeled" if cush.backend.capabilities.models_time else "measured"
    assert sums["checksums"] == {"w": want, "h": want, "d": want} and sums["timing"] == label
    same = cush.ok("compare w h")
    assert same["equal"] and same["timing"] == label and same["host_seconds"] > 0
    cush.ok("fill h 9 dtype uint16")
    differ = cush.ok("compare h[2:] w[2:]")
    assert (differ["offset"], differ["a_byte"]) == (0, 9) and cush.ok("show h count 2")["values"] == [9, 9]


def test_zeros_fill_a_buffer_past_the_storage_budget_and_other_bytes_are_refused(sim):
    """A fill of zeros keeps no storage on the simulator, so the budget has nothing to refuse; a fill of any other
    byte must hold every byte, and the budget refuses it before anything changes."""
    sim.ok("alloc pinned 40GB as h; fill h 0")
    assert sim.fails("fill h 1")["code"] == "SIM_BUDGET"
    assert sim.ok(f"show h[{(40 << 30) - 4}:] count 4")["values"] == [0, 0, 0, 0]


def test_integer_fills_of_any_size_write_the_same_bytes_on_both_backends(cush):
    """`dtype uint8`, `int16` and `uint32` of one seed are the same bytes (a buffer of 1 MiB + 6: uint32 leaves the
    last 2 bytes as they were), across the chunks and pieces the backends fill in."""
    n = (1 << 20) + 6
    want = splitmix_stream(11, 0, -(-n // 8))[:n]
    cush.ok(f"alloc pinned {n}B as a; alloc pageable {n}B as b; alloc pinned {n}B as c")
    cush.ok("fill a random seed 11 dtype uint8; fill b 255; fill b random seed 11 dtype int16")
    cush.ok("fill c 255; fill c random seed 11 dtype uint32")
    sums = cush.ok("checksum a b c")["checksums"]
    assert sums["a"] == sums["b"] == H.checksum([(0, want)])
    assert sums["c"] == H.checksum([(0, np.concatenate([want[:n - 2], [255, 255]]).astype(np.uint8))])
    assert cush.ok(f"compare a[:{n - 2}] c[:{n - 2}]")["equal"]
    assert cush.ok(f"show a[{n - 9}:] dtype uint8")["values"] == want[n - 9:].tolist()


CXX = shutil.which("g++") or shutil.which("clang++")


@pytest.mark.skipif(CXX is None, reason="no host C++ compiler")
def test_the_exported_c_fills_and_sums_the_shells_bytes_for_every_dtype(sim, tmp_path):
    """`export c`'s fill_random and checksum, built by the host's compiler (they need no GPU): its own prelude
    functions and the fills the exporter wrote, over a buffer of 1003 bytes (each dtype leaves its odd bytes as
    they were), print the checksums the shell printed."""
    dtypes = INTEGERS + ["float16", "float32", "float64"]
    for k, dtype in enumerate(dtypes):
        sim.ok(f"alloc pageable 1003B as b{k}; fill b{k} 171; fill b{k} random seed {k * 7919} dtype {dtype}")
    sums = sim.ok("checksum " + " ".join(f"b{k}" for k in range(len(dtypes))))["checksums"]
    sim.ok(f"export c {tmp_path / 's.cu'}")
    body = [line for line in (tmp_path / "s.cu").read_text().split("int main() {")[1].splitlines()
            if "CHECK(" not in line]
    host = PRELUDE[PRELUDE.index("static uint64_t splitmix64("): PRELUDE.index("static void CUDART_CB host_print")]
    summing = PRELUDE[PRELUDE.index("static uint64_t checksum("):]
    program = "#include <cstdio>\n#include <cstdlib>\n#include <cstdint>\n#include <cstring>\n" + host + summing
    (tmp_path / "host.cpp").write_text(program + "int main() {" + "\n".join(body) + "\n")
    subprocess.run([CXX, "-O1", "-o", str(tmp_path / "host"), str(tmp_path / "host.cpp")], check=True, timeout=120)
    out = subprocess.run([str(tmp_path / "host")], capture_output=True, text=True, timeout=60, check=True).stdout
    assert {m[0]: int(m[1]) for m in re.findall(r"^checksum (\S+) (\d+)$", out, re.M)} == sums

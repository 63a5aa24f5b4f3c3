"""Host data at memory speed (issue 38) with the same values, and its time modeled on the simulator (issue 37): the
checksum is the one `export c`'s C prints, `fill random` the SplitMix64 its C writes, `compare` finds the first
difference across pieces and offsets, and each command reports the host's time — measured on a GPU's host,
modeled from the profile's host rates on the simulator (so write-combined reads are as slow as the profile says)."""

from __future__ import annotations

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


def test_the_prelude_still_sums_and_draws_as_these_references_do():
    assert "s += (uint64_t)b[i] * (i % 251 + 1);" in PRELUDE and "splitmix64(seed, i)" in PRELUDE


@pytest.mark.parametrize("piece", [H.PIECE, 1 << 20, 1000, 251])
def test_the_checksum_is_the_c_loops_for_any_length_and_any_pieces(piece):
    data = np.random.default_rng(1).integers(0, 256, 5 * 251 * 8 + 123, dtype=np.uint8)
    for n in (0, 1, 250, 251, 252, 2009, data.size):
        got = H.checksum((pos, data[pos: pos + k]) for pos, k in H.piece_spans(0, n, piece))
        assert got == c_checksum(data[:n].tobytes()), (n, piece)


def test_the_checksum_wraps_at_2_to_the_64_as_uint64_t_does():
    """64 MiB of 255s passes 2^64 only with weights this large: the vectorised sum as the C loop, mod 2^64."""
    n = 64 << 20
    data = np.full(n, 255, np.uint8)
    rows, tail = divmod(n, 251)
    exact = 255 * (rows * 251 * 252 // 2 + tail * (tail + 1) // 2)
    assert H.checksum((pos, data[pos: pos + k]) for pos, k in H.piece_spans(0, n)) == exact & MASK


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "int64", "uint64", "float16", "float32", "float64"])
def test_fill_random_is_splitmix64_element_by_element_from_any_start(dtype):
    kind = np.dtype(dtype)
    for seed, start, count in ((0, 0, 5), (9, 65530, 70000), (MASK, 2 ** 40, 300)):
        out = np.empty(count, kind)
        H.fill_into(out, "random", start, seed)
        z = [c_splitmix64(seed, start + k) for k in range(0, count, 997)]
        got = out[::997]
        if kind.kind == "f":
            want = np.array([(v >> 11) * 2.0 ** -53 for v in z]).astype(kind)
        else:
            want = np.array(z, np.uint64).astype(kind)
        assert got.tobytes() == want.tobytes(), (seed, start)


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

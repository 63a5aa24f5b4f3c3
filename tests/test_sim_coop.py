"""Cooperative groups, the block-level part: each kernel's output bytes against numpy references that combine
values in the order cooperative_groups' own code does (so float sums are bit-exact), on the simulator and, where
a GPU is present, on it too; racecheck and the divergent-barrier check over block and tile syncs; what stays
refused (a grid-wide sync) said by name."""

from __future__ import annotations

import numpy as np
import pytest

HEAD = "#include <cooperative_groups.h>\n#include <cooperative_groups/reduce.h>\n#include <cooperative_groups/scan.h>\n"


def load(c, tmp_path, name: str, source: str) -> None:
    path = tmp_path / f"{name}.cu"
    path.write_text(HEAD + source)
    c.ok(f'kernel load "{path}" as {name}')


def raw(c, name: str, dtype: str, count: int) -> np.ndarray:
    """A managed buffer's elements, read back as bytes (NaN and -0.0 kept)."""
    size = np.dtype(dtype).itemsize * count
    return np.frombuffer(bytes(c.ok(f"show {name} dtype uint8 count {size}")["values"]), dtype)


def outputs(c, name: str, dtype: str, count: int) -> np.ndarray:
    c.ok("sync")
    return raw(c, name, dtype, count)


def warnings_of(c, line: str) -> list[str]:
    c.ok(line)
    return [w for o in c.run("sync") if o["cmd"] == "(kernel output)" for w in o["result"].get("warnings", [])]


def butterfly(values: np.ndarray, width: int, op) -> np.ndarray:
    """A tile's cg::reduce: shfl_xor from half the tile down to 1, `op(own, partner)`; every rank ends equal."""
    t = values.reshape(-1, width).copy()
    ranks = np.arange(width)
    mask = width >> 1
    while mask:
        t = op(t, t[:, ranks ^ mask])
        mask >>= 1
    return t[:, 0]


def hillis_steele(values: np.ndarray, op) -> np.ndarray:
    """A scan over one group's values by rank, as cg::inclusive_scan combines them."""
    t = values.copy()
    i = 1
    while i < len(t):
        t = np.concatenate([t[:i], op(t[i:], t[:-i])])
        i <<= 1
    return t


# ------------------------------------------------------------------ reductions and scans
REDUCE = """
namespace cg = cooperative_groups;
extern "C" __global__ void tileReduce(const float *in, float *sums, const int *keys, int *mins, int *maxs, int *xors)
{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = cg::reduce(tile, in[i], cg::plus<float>());
    int k = keys[i];
    int lo = cg::reduce(tile, k, cg::less<int>());
    int hi = cg::reduce(tile, k, cg::greater<int>());
    int x = cg::reduce(tile, k, cg::bit_xor<int>());
    if (tile.thread_rank() == 0) {
        int w = i / 32;
        sums[w] = s; mins[w] = lo; maxs[w] = hi; xors[w] = x;
    }
}
"""


def test_cg_reduce_over_tiles_of_32_gives_the_butterflys_float_bits_and_exact_min_max_xor(cush, tmp_path):
    load(cush, tmp_path, "red", REDUCE)
    cush.ok("alloc managed 4096B as a; fill a random dtype float32 seed 5; alloc managed 4096B as k; "
            "fill k random dtype int32 seed 6")
    cush.ok("alloc managed 128B as s; alloc managed 128B as lo; alloc managed 128B as hi; alloc managed 128B as x")
    cush.ok("launch red.tileReduce a s k lo hi x grid 4 block 256")
    a, k = raw(cush, "a", "float32", 1024), raw(cush, "k", "int32", 1024)
    assert outputs(cush, "s", "float32", 32).tobytes() == butterfly(a, 32, np.add).tobytes()
    assert np.array_equal(raw(cush, "lo", "int32", 32), k.reshape(-1, 32).min(1))
    assert np.array_equal(raw(cush, "hi", "int32", 32), k.reshape(-1, 32).max(1))
    assert np.array_equal(raw(cush, "x", "int32", 32), np.bitwise_xor.reduce(k.reshape(-1, 32), axis=1))
    sequential = a.reshape(-1, 32).cumsum(1, dtype=np.float32)[:, -1]
    assert not np.array_equal(sequential, raw(cush, "s", "float32", 32))  # the order shows in the bits


TILES = """
using namespace cooperative_groups;

__device__ int shuffleScan(const thread_block_tile<16> &t, int v)
{
    for (int d = 1; d < t.size(); d *= 2) {
        int up = t.shfl_up(v, d);
        if (t.thread_rank() >= d)
            v += up;
    }
    return v;
}

extern "C" __global__ void tileInfo(const int *in, int *out, const float *f, float *fscan)
{
    namespace cg = cooperative_groups;
    thread_block block = this_thread_block();
    thread_group g8 = tiled_partition(block, 8);
    thread_block_tile<8> t8 = tiled_partition<8>(block);
    thread_block_tile<16> t16 = cg::tiled_partition<16>(block);
    thread_block_tile<4> t4 = tiled_partition<4>(t16);
    int r = block.thread_rank();
    int i = blockIdx.x * blockDim.x + r;
    int v = in[i] & 127;
    int *o = out + i * 16;
    o[0] = g8.thread_rank();
    o[1] = g8.size();
    o[2] = t8.meta_group_rank();
    o[3] = t8.meta_group_size();
    o[4] = t4.meta_group_rank();
    o[5] = t4.meta_group_size();
    o[6] = t8.ballot(v & 1);
    o[7] = t8.any(v > 90);
    o[8] = t8.all(v > 5);
    o[9] = t8.match_any(v % 3);
    o[10] = t16.shfl_xor(v, 5);
    o[11] = t16.shfl_down(v, 3);
    o[12] = shuffleScan(t16, v);
    o[13] = cg::inclusive_scan(t16, v);
    o[14] = cg::exclusive_scan(t16, v, cg::greater<int>());
    o[15] = t8.shfl(v, 9) + 1000 * (int)block.size() + 100000 * (int)block.group_index().x;
    fscan[i] = cg::inclusive_scan(t16, f[i], cg::plus<float>());
    g8.sync();
    cg::sync(t4);
}
"""


def tile_reference(v: np.ndarray, f: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(v)
    out = np.zeros((n, 16), np.int64)
    fscan = np.zeros(n, np.float32)
    for i in range(n):
        r = i % block
        b8, b16 = i - i % 8, i - i % 16
        t8, t16 = v[b8:b8 + 8], v[b16:b16 + 16]
        ballot = sum(1 << j for j in range(8) if t8[j] & 1)
        match = sum(1 << j for j in range(8) if t8[j] % 3 == v[i] % 3)
        inc = hillis_steele(t16, np.add)
        greater = hillis_steele(t16, np.maximum)
        rk = i % 16
        out[i] = [r % 8, 8, r // 8, block // 8, rk // 4, 4, ballot, int((t8 > 90).any()), int((t8 > 5).all()), match,
                  t16[rk ^ 5], t16[rk + 3] if rk + 3 < 16 else v[i], inc[rk], inc[rk],
                  greater[rk - 1] if rk else 0, t8[1] + 1000 * block + 100000 * (i // block)]
        fscan[i] = hillis_steele(f[b16:b16 + 16], np.add)[rk]
    return out.astype(np.int32), fscan


def test_tiles_rank_partition_vote_shuffle_and_scan_as_the_reference_says(cush, tmp_path):
    load(cush, tmp_path, "tiles", TILES)
    cush.ok("alloc managed 512B as vi; fill vi random dtype int32 seed 9; alloc managed 8192B as o; "
            "alloc managed 512B as f; fill f random dtype float32 seed 10; alloc managed 512B as fs")
    v = raw(cush, "vi", "int32", 128) & 127
    cush.ok("launch tiles.tileInfo vi o f fs grid 2 block 64")
    want, fscan = tile_reference(v, raw(cush, "f", "float32", 128), 64)
    got = outputs(cush, "o", "int32", 128 * 16).reshape(128, 16)
    for col in range(16):
        assert np.array_equal(got[:, col], want[:, col]), col
    assert raw(cush, "fs", "float32", 128).tobytes() == fscan.tobytes()


COALESCED = """
namespace cg = cooperative_groups;
extern "C" __global__ void picked(const float *in, float *sums, int *info)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
    sums[i] = -1.0f;
    info[2 * i] = -1;
    info[2 * i + 1] = -1;
    if (i < 96 ? i % 3 == 0 || i % 7 == 0 || (i >= 64 && i % 2 == 0) : i % 4 == 0) {  // the last warp: 8 of 32
        cg::coalesced_group g = cg::coalesced_threads();
        sums[i] = cg::reduce(g, v, cg::plus<float>());
        info[2 * i] = g.thread_rank() + 100 * g.size();
        info[2 * i + 1] = g.shfl(i, 1) + 1000 * g.ballot(v > 0.5f);
    }
}
"""


def coalesced_sum(vals: np.ndarray) -> np.float32:
    """cg::reduce over a coalesced group: a shfl_down tree when its size is a power of two, else a scan's last."""
    n = len(vals)
    if n & (n - 1) == 0:
        t = vals.copy()
        off = n >> 1
        while off:
            t = np.concatenate([t[:n - off] + t[off:], t[n - off:] + t[n - off:]])
            off >>= 1
        return t[0]
    return hillis_steele(vals, np.add)[-1]


def test_coalesced_threads_in_a_branch_rank_the_lanes_that_came_and_reduce_over_them(cush, tmp_path):
    load(cush, tmp_path, "co", COALESCED)
    cush.ok("alloc managed 512B as a; fill a random dtype float32 seed 12; alloc managed 512B as s; "
            "alloc managed 1024B as info")
    cush.ok("launch co.picked a s info grid 1 block 128")
    a = raw(cush, "a", "float32", 128)
    sums = outputs(cush, "s", "float32", 128)
    info = raw(cush, "info", "int32", 256).reshape(128, 2)
    for w in range(4):
        lanes = [i for i in range(32 * w, 32 * w + 32)
                 if (i % 3 == 0 or i % 7 == 0 or (i >= 64 and i % 2 == 0) if i < 96 else i % 4 == 0)]
        ballot = sum(1 << r for r, i in enumerate(lanes) if a[i] > 0.5)
        total = coalesced_sum(a[lanes])
        for r, i in enumerate(lanes):
            assert sums[i].tobytes() == total.tobytes(), i
            assert info[i, 0] == r + 100 * len(lanes)
            assert info[i, 1] == np.uint32((lanes[1] + 1000 * ballot) % (1 << 32)).view(np.int32), i
    assert sums[1] == -1.0 and info[1, 0] == -1
    assert len(lanes) == 8  # a power of two: the shfl_down tree, where the other warps take the scan


# ------------------------------------------------------------------ barriers: block.sync(), tiles', racecheck
TRANSPOSE = """
namespace cg = cooperative_groups;
#define T 32
extern "C" __global__ void transposeCg(float *out, const float *in, int w, int h)
{
    __shared__ float tile[T][T + 1];
    cg::thread_block block = cg::this_thread_block();
    int x = blockIdx.x * T + threadIdx.x, y = blockIdx.y * T + threadIdx.y;
    for (int j = 0; j < T; j += 8)
        if (x < w && y + j < h)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
#ifndef NO_SYNC
    cg::this_thread_block().sync();
#endif
    x = blockIdx.y * T + threadIdx.x;
    y = blockIdx.x * T + threadIdx.y;
    for (int j = 0; j < T; j += 8)
        if (x < h && y + j < w)
            out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
    cg::sync(block);
}
"""


def test_a_tiled_transpose_synchronised_by_the_thread_block_is_exact_and_racecheck_quiet(cush, tmp_path):
    load(cush, tmp_path, "tr", TRANSPOSE)
    cush.ok("alloc managed 28000B as tin; fill tin random dtype float32 seed 21; alloc managed 28000B as tout")
    said = warnings_of(cush, "launch tr.transposeCg tout tin 100 70 grid 4,3 block 32,8")
    src = raw(cush, "tin", "float32", 7000).reshape(70, 100)
    assert raw(cush, "tout", "float32", 7000).tobytes() == src.T.copy().tobytes()
    assert not said


def test_racecheck_names_the_hazard_when_the_block_sync_is_missing(sim, tmp_path):
    load(sim, tmp_path, "tr", "#define NO_SYNC\n" + TRANSPOSE)
    sim.ok("alloc managed 28000B as tin; alloc managed 28000B as tout")
    said = warnings_of(sim, "launch tr.transposeCg tout tin 100 70 grid 4,3 block 32,8")
    assert said and "racecheck: shared-memory read-after-write hazard" in said[0], said
    assert "with no __syncthreads() between" in said[0]


EXCHANGE = """
namespace cg = cooperative_groups;
extern "C" __global__ void neighbours(int *out)
{
    __shared__ int s[128];
    cg::thread_block_tile<8> t = cg::tiled_partition<8>(cg::this_thread_block());
    int r = threadIdx.x;
    s[r] = r * 3;
    SYNC;
    int base = r - t.thread_rank();
    out[r] = s[base + (t.thread_rank() + 1) % 8];
    SYNC;
    s[r] = 7;
}
"""


@pytest.mark.parametrize("sync", ["t.sync()", "cg::sync(t)", "__syncwarp()"])
def test_a_tile_sync_orders_the_tiles_own_shared_accesses_for_racecheck(sim, tmp_path, sync):
    load(sim, tmp_path, "ex", f"#define SYNC {sync}\n" + EXCHANGE)
    sim.ok("alloc managed 512B as o")
    assert warnings_of(sim, "launch ex.neighbours o grid 1 block 128") == []
    r = np.arange(128)
    assert np.array_equal(raw(sim, "o", "int32", 128), (r - r % 8 + (r % 8 + 1) % 8) * 3)


def test_without_the_tile_sync_racecheck_names_the_hazard(sim, tmp_path):
    load(sim, tmp_path, "ex", "#define SYNC\n" + EXCHANGE)
    sim.ok("alloc managed 512B as o")
    said = warnings_of(sim, "launch ex.neighbours o grid 1 block 128")
    assert said and "read-after-write hazard" in said[0]


def test_a_tile_sync_does_not_order_another_tiles_accesses(sim, tmp_path):
    crossing = EXCHANGE.replace("(t.thread_rank() + 1) % 8", "8 + t.thread_rank()").replace("s[128]", "s[136]")
    load(sim, tmp_path, "ex", "#define SYNC t.sync()\n" + crossing)
    sim.ok("alloc managed 512B as o")
    said = warnings_of(sim, "launch ex.neighbours o grid 1 block 64")
    assert said and "read-after-write hazard" in said[0]


def test_a_block_sync_some_threads_skip_is_a_divergent_barrier(sim, tmp_path):
    load(sim, tmp_path, "half", """
namespace cg = cooperative_groups;
extern "C" __global__ void half(int *a)
{
    cg::thread_block block = cg::this_thread_block();
    if (threadIdx.x < 16) {
        block.sync();
    }
    a[threadIdx.x] = 1;
}
""")
    sim.ok("alloc device 256B as d")
    err = sim.fails("launch half.half d grid 1 block 64")
    assert err["code"] == "DIVERGENT_BARRIER" and "half.cu:10:" in err["message"], err
    assert "thread_block::sync() reached by only some threads of a block" in err["message"]
    sim.ok("sync")


def test_a_tile_sync_some_of_the_tiles_threads_skip_is_a_divergent_barrier(sim, tmp_path):
    load(sim, tmp_path, "part", """
namespace cg = cooperative_groups;
extern "C" __global__ void part(int *a)
{
    cg::thread_block_tile<16> t = cg::tiled_partition<16>(cg::this_thread_block());
    if (t.thread_rank() < 15)
        t.sync();
    a[threadIdx.x] = 1;
}
""")
    sim.ok("alloc device 256B as d")
    err = sim.fails("launch part.part d grid 1 block 32")
    assert err["code"] == "DIVERGENT_BARRIER" and "a tile of 16 threads" in err["message"], err


# ------------------------------------------------------------------ what stays outside
@pytest.mark.parametrize("body, said", [
    ("cg::this_grid().sync();", "grid-wide sync needs a cooperative launch (cudaLaunchCooperativeKernel)"),
    ("cg::grid_group g = cg::this_grid(); cg::sync(g);", "grid-wide sync needs a cooperative launch"),
    ("a[0] = cg::reduce(cg::this_thread_block(), 1, cg::plus<int>());", "cg::reduce over a cg::thread_block"),
    ("a[0] = cg::tiled_partition<64>(cg::this_thread_block()).thread_rank();", "tiled_partition<64>"),
])
def test_what_the_simulator_does_not_run_is_refused_by_name_with_its_line(sim, tmp_path, body, said):
    path = tmp_path / "grid.cu"
    path.write_text(HEAD + "namespace cg = cooperative_groups;\n"
                    "extern \"C\" __global__ void k(int *a)\n{\n    " + body + "\n}\n")
    err = sim.fails(f'kernel load "{path}"')
    assert err["code"] == "NOT_SUPPORTED_ON_SIM" and said in err["message"], err
    assert "grid.cu:7:" in err["message"], err


def test_grid_rank_and_size_need_no_cooperative_launch(cush, tmp_path):
    load(cush, tmp_path, "gr", """
namespace cg = cooperative_groups;
extern "C" __global__ void ranks(unsigned long long *out)
{
    cg::grid_group g = cg::this_grid();
    out[g.thread_rank()] = g.thread_rank() + 1000 * g.size() + 1000000 * g.block_rank() + 100000000ull * g.num_blocks();
}
""")
    cush.ok("alloc managed 1536B as o")
    cush.ok("launch gr.ranks o grid 3,2 block 32")
    i = np.arange(192, dtype=np.uint64)
    assert np.array_equal(outputs(cush, "o", "uint64", 192), i + 1000 * 192 + 1000000 * (i // 32) + 100000000 * 6)


# ------------------------------------------------------------------ groups in the user's own functions
PASSED = """
using cooperative_groups::thread_block;
using cooperative_groups::this_thread_block;

__device__ float tileSum(const cooperative_groups::thread_block_tile<32> &t, float v)
{
    for (int o = t.size() / 2; o > 0; o /= 2)
        v += t.shfl_down(v, o);
    return v;
}

template <typename Group> __device__ int rankOf(const Group &g)
{
    return g.thread_rank();
}

__device__ int viaGroup(cooperative_groups::thread_group g)
{
    g.sync();
    return g.thread_rank() * 10 + g.size();
}

extern "C" __global__ void passed(const float *in, float *sums, int *info)
{
    using namespace cooperative_groups;
    thread_block block = this_thread_block();
    thread_block_tile<32> w = tiled_partition<32>(block);
    int i = block.thread_rank() + blockIdx.x * block.num_threads();
    float s = tileSum(w, in[i]);
    if (w.thread_rank() == 0)
        sums[i / 32] = s;
    info[4 * i] = rankOf(w) + 100 * cooperative_groups::thread_rank(block) + 0 * cooperative_groups::group_size(w);
    info[4 * i + 1] = block.dim_threads().x * 1000 + block.group_dim().y;
    info[4 * i + 2] = viaGroup(tiled_partition(block, 4));
    info[4 * i + 3] = viaGroup(block);
}
"""


def test_groups_pass_to_device_functions_by_value_by_reference_and_into_templates(cush, tmp_path):
    load(cush, tmp_path, "ps", PASSED)
    cush.ok("alloc managed 512B as a; fill a random dtype float32 seed 31; alloc managed 64B as s; "
            "alloc managed 2048B as info")
    cush.ok("launch ps.passed a s info grid 2 block 64")
    a = raw(cush, "a", "float32", 128)
    assert outputs(cush, "s", "float32", 4).tobytes() == butterfly(a, 32, np.add).tobytes()  # lane 0 of the tree
    r = np.arange(128) % 64
    want = np.stack([r % 32 + 100 * r, np.full(128, 64001), r % 4 * 10 + 4, r * 10 + 64], axis=1)
    assert np.array_equal(raw(cush, "info", "int32", 512).reshape(128, 4), want)



@pytest.mark.parametrize("body, said", [
    ("cg::thread_block b = cg::this_thread_block(); a[0] = b.is_valid();", "thread_group::is_valid"),
    ("a[0] = cg::binary_partition(cg::coalesced_threads(), a[1] > 0).size();", "'binary_partition'"),
    ("int p; auto t = cg::tiled_partition<32>(cg::this_thread_block()); a[0] = t.match_all(a[1], p);",
     "thread_block_tile::match_all"),
    ("a[0] = cg::tiled_partition<4>(cg::coalesced_threads()).size();", "tiled_partition of a coalesced_group"),
    ("cg::invoke_one(cg::coalesced_threads(), [] {});", "'invoke_one'"),
    ("\n#include <cooperative_groups/memcpy_async.h>\n    cg::memcpy_async(cg::this_thread_block(), a, a + 4, 4);",
     "'memcpy_async'"),
    ("auto t = cg::tiled_partition<32>(cg::this_thread_block()); a[0] = cg::reduce(t, 1, [](int x, int y) "
     "{ return x + y; });", "cg::reduce with the operator"),
])
def test_the_rest_of_the_cooperative_groups_api_is_refused_by_name(sim, tmp_path, body, said):
    path = tmp_path / "rest.cu"
    path.write_text(HEAD + "namespace cg = cooperative_groups;\n"
                    "extern \"C\" __global__ void k(int *a)\n{\n    " + body + "\n}\n")
    err = sim.fails(f'kernel load "{path}"')
    assert err["code"] == "NOT_SUPPORTED_ON_SIM" and said in err["message"], err


def test_a_tile_leaders_writes_read_by_its_tile_between_tile_syncs_are_no_race(sim, tmp_path):
    load(sim, tmp_path, "lead", """
namespace cg = cooperative_groups;
extern "C" __global__ void lead(int *out)
{
    __shared__ int slot[8];
    cg::thread_block_tile<8> t = cg::tiled_partition<8>(cg::this_thread_block());
    int sum = 0;
    for (int round = 0; round < 3; ++round) {
        if (t.thread_rank() == 0)
            slot[t.meta_group_rank()] = round * 10 + t.meta_group_rank();
        t.sync();
        sum += slot[t.meta_group_rank()];
        if (t.thread_rank() == 1)
            sum += slot[t.meta_group_rank()];
        t.sync();
    }
    out[threadIdx.x] = sum;
}
""")
    sim.ok("alloc managed 256B as o")
    assert warnings_of(sim, "launch lead.lead o grid 1 block 64") == []
    g = np.arange(64) // 8
    assert np.array_equal(raw(sim, "o", "int32", 64), (30 + 3 * g) * np.where(np.arange(64) % 8 == 1, 2, 1))


def test_tiles_of_one_thread_and_tiles_of_a_2d_block_follow_the_threads_linear_rank(cush, tmp_path):
    load(cush, tmp_path, "ones", """
extern "C" __global__ void ones(int *out)
{
    using cooperative_groups::thread_block_tile;
    namespace cg = cooperative_groups;
    thread_block_tile<1> one = cg::tiled_partition<1>(cg::this_thread_block());
    thread_block_tile<32> w = cg::tiled_partition<32>(cg::this_thread_block());
    int r = cg::this_thread_block().thread_rank();
    out[r] = one.thread_rank() + 10 * one.size() + 100 * cg::reduce(one, r, cg::plus<int>()) + 100000 * w.meta_group_rank();
    one.sync();
}
""")
    cush.ok("alloc managed 256B as o")
    cush.ok("launch ones.ones o grid 1 block 16,4")
    r = np.arange(64)
    assert np.array_equal(outputs(cush, "o", "int32", 64), 10 + 100 * r + 100000 * (r // 32))


def test_a_part_of_cooperative_groups_the_simulator_lacks_is_refused_by_name(sim):
    err = sim.fails("kernel define big <<< #include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
                    "__global__ void big(int *o) { __shared__ cg::block_tile_memory<256> scratch; o[0] = 1; } >>>")
    assert err["code"] == "NOT_SUPPORTED_ON_SIM" and "cooperative groups' block_tile_memory" in err["message"]
    assert ":3:" in err["message"]  # its line

"""Launch shapes (dim3) and the driver's limits on them. Pure, no CUDA: the simulator refuses what cuLaunchKernel
refuses on the H100, by the same name, through `check_launch`; the shell, the renderers and `export c` write
shapes through here, so a 1-D launch reads `<<<16, 256>>>` everywhere and a 2-D one `dim3(16, 16)`."""

from __future__ import annotations

from ..errors import ShellError

Dim3 = tuple[int, int, int]

INVALID = "CUDA_ERROR_INVALID_VALUE"
C_UINT_MAX = 0xFFFFFFFF  # cuLaunchKernel's dimensions are unsigned ints: past it a number is no shape at all
MAX_THREADS = 1024  # the H100's maxThreadsPerBlock
MAX_BLOCK = (1024, 1024, 64)  # maxBlockDimX..Z
MAX_GRID = ((1 << 31) - 1, 65535, 65535)  # maxGridDimX..Z
SHARED_DEFAULT = 48 << 10  # what a kernel gets without cudaFuncSetAttribute(MaxDynamicSharedMemorySize)
AXES = "xyz"


def dim3(value) -> Dim3:
    """A shape from a number (x) or a tuple of 1–3 numbers; missing dimensions are 1, as C's dim3."""
    if isinstance(value, int):
        return (value, 1, 1)
    dims = tuple(int(v) for v in value)
    return (dims + (1, 1, 1))[:3]  # type: ignore[return-value]


def volume(d: Dim3) -> int:
    """Threads in a block, or blocks in a grid."""
    return d[0] * d[1] * d[2]


def is_1d(d: Dim3) -> bool:
    return d[1] == 1 and d[2] == 1


def c_dims(d: Dim3) -> str:
    """`16, 16` — the dimensions C's dim3 constructor needs (trailing 1s left out)."""
    n = 3 if d[2] != 1 else 2 if d[1] != 1 else 1
    return ", ".join(str(v) for v in d[:n])


def shape_text(d: Dim3) -> str:
    """`256` for a 1-D shape, `dim3(16, 16)` otherwise: how C writes it inside <<< >>>."""
    return str(d[0]) if is_1d(d) else f"dim3({c_dims(d)})"


def default_grid(count: int, block: Dim3) -> Dim3:
    """Enough blocks in x to cover `count` elements, one a thread (a block of 0 threads: one block, and the
    driver refuses the block). Past C's unsigned int it stops there: still over the limit, the driver's to refuse."""
    threads = volume(block)
    return (min(C_UINT_MAX, max(1, -(-count // threads))) if threads else 1, 1, 1)


def computed(count: int, grid: Dim3, block: Dim3) -> int:
    """The elements a built-in computes: one a thread, at most `count`."""
    return min(count, volume(grid) * volume(block))


def check_launch(grid: Dim3, block: Dim3, shared: int, static_shared: int = 0) -> None:
    """Raise the driver's CUDA_ERROR_INVALID_VALUE for a launch the H100 refuses: a dimension of 0, a block
    over 1024 threads or over 1024×1024×64, a grid over (2^31-1)×65535×65535, or more than 48 KiB of shared
    memory (dynamic plus the kernel's static) without opting in."""
    for what, d, unit in (("grid", grid, "blocks"), ("block", block, "threads")):
        if 0 in d:
            raise ShellError(INVALID, f"{what} {shape_text(d)}: 0 {unit} in {AXES[d.index(0)]}",
                             "every dimension is at least 1")
    for axis, v, top in zip(AXES, block, MAX_BLOCK):
        if v > top:
            raise ShellError(INVALID, f"block {shape_text(block)}: {v} threads in {axis}, over the limit of {top}",
                             "a block is at most 1024 × 1024 × 64, and 1024 threads in all")
    if volume(block) > MAX_THREADS:
        raise ShellError(INVALID, f"block {shape_text(block)} is {volume(block)} threads, over the "
                         f"{MAX_THREADS} a block may have", "use fewer threads a block and more blocks")
    for axis, v, top, word in zip(AXES, grid, MAX_GRID, ("2^31-1", "65535", "65535")):
        if v > top:
            raise ShellError(INVALID, f"grid {shape_text(grid)}: {v} blocks in {axis}, over the limit of {word}",
                             "use fewer, larger blocks" if axis == "x" else
                             "y and z take at most 65535 blocks: put the long dimension in x (up to 2^31-1)")
    if shared + static_shared > SHARED_DEFAULT:
        static = f" (and {static_shared} B static)" if static_shared else ""
        raise ShellError(INVALID, f"{shared} B of dynamic shared memory{static} is over the "
                         f"{SHARED_DEFAULT >> 10} KiB a kernel gets without opting in",
                         f"ask for {max(0, SHARED_DEFAULT - static_shared)} B or less" if static_shared
                         else "ask for 48 KiB or less")

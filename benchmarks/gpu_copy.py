"""Issues 3 and 6's benchmark, for one device run: a plain-CUDA-C reference (compiled here with nvcc) and
cudashell — single `memcpy` commands, and `bench memcpy` — measure pinned and pageable H2D/D2H at 32 MiB
and 256 MiB in the same run; each ratio is printed. Target: pinned ≥ 0.98 of the C reference (kept since
issue 3). Small copies and the command path are benchmarks/small_sizes.py's."""

from __future__ import annotations

import io
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import bind, run

from cudashell.backends.cuda import CudaBackend
from cudashell.frontends.shell import Shell

SIZES = (32 << 20, 256 << 20)
REPS = 30
HERE = Path(__file__).resolve().parent


def c_reference() -> tuple[dict, float]:
    exe = Path(tempfile.mkdtemp()) / "ref_copy"
    subprocess.run(["nvcc", "-O2", "-o", str(exe), str(HERE / "ref_copy.cu")], check=True)
    out = subprocess.run([str(exe), *map(str, SIZES)], check=True, capture_output=True, text=True).stdout
    rates, small = {}, None
    for line in out.splitlines():
        kind, direction, nbytes, value = line.split()
        if kind == "small":
            small = float(value) * 1e-6
        else:
            rates[(kind, direction, int(nbytes))] = float(value)
    return rates, small


def shell_rates(shell: Shell, out: io.StringIO) -> dict:
    rates = {}
    for nbytes in SIZES:
        run(shell, out, f"alloc pinned {nbytes} as p; alloc pageable {nbytes} as h; alloc device {nbytes} as d")
        run(shell, out, "fill p 1; fill h 1")
        for kind, host in (("pinned", "p"), ("pageable", "h")):
            for direction, line in (("h2d", f"memcpy h2d {host} d"), ("d2h", f"memcpy d2h d {host}")):
                g = [run(shell, out, line)["gbps"] for _ in range(REPS + 2)][2:]
                rates[(kind, direction, nbytes)] = statistics.median(g)
        run(shell, out, "free p h d")
    return rates


def bench_command(shell: Shell, out: io.StringIO) -> dict:
    """The same points through `bench memcpy` (copies issued on the GPU side, gated, rotated buffers)."""
    rates = {}
    sizes = ",".join(str(n) for n in SIZES)
    for direction in ("h2d", "d2h"):
        for row in run(shell, out, f"bench memcpy {direction} pinned pageable sizes {sizes} reps 7")["rows"]:
            rates[(row["kind"], direction, row["size"])] = row["gbps"]
    return rates


def main() -> int:
    print(bind())
    ref, c_small = c_reference()
    out = io.StringIO()
    backend = CudaBackend()
    shell = Shell(backend, out=out, err=sys.stderr, json_mode=True)
    try:
        print(f"device: {backend.info.name}")
        mine = shell_rates(shell, out)
        benched = bench_command(shell, out)
    finally:
        shell.close()
    ok = True
    print(f"{'kind':<9}{'dir':<5}{'size':>9}{'C GB/s':>9}{'memcpy GB/s':>12}{'ratio':>7}{'bench GB/s':>11}"
          f"{'ratio':>7}  target")
    for key in sorted(ref):
        kind, direction, nbytes = key
        ratio, bratio = mine[key] / ref[key], benched[key] / ref[key]
        target = "≥ 0.98" if kind == "pinned" else "(info)"
        if kind == "pinned" and min(ratio, bratio) < 0.98:
            ok = False
            target += " MISSED"
        print(f"{kind:<9}{direction:<5}{nbytes >> 20:>6} MiB{ref[key]:9.2f}{mine[key]:12.2f}{ratio:7.3f}"
              f"{benched[key]:11.2f}{bratio:7.3f}  {target}")
    print(f"4-byte H2D from pinned, C cudaMemcpy: {c_small * 1e6:.1f} µs (the shell's small-copy figures: "
          "benchmarks/small_sizes.py)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

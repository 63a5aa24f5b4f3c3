"""Issue 14's benchmark, on a machine with two or more GPUs: `bench peer` (every ordered pair, peer access off
and on, cudaMemcpyPeerAsync × REPS of SIZE) against the same copies in plain C (ref_peer.cu, built here with
nvcc) in the same run. Prints the matrix and each ratio shell / C; the target is within 5%.
With --sim it prints the simulator's modeled matrix (two-h200 profile) instead."""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import bind, run

from cudashell.backends.choice import open_backend
from cudashell.frontends.shell import Shell

SIZE, REPS = 256 << 20, 10
HERE = Path(__file__).resolve().parent


def c_reference() -> dict[tuple[int, int, bool], float]:
    exe = Path(tempfile.mkdtemp()) / "ref_peer"
    subprocess.run(["nvcc", "-O2", "-o", str(exe), str(HERE / "ref_peer.cu")], check=True)
    out = subprocess.run([str(exe), str(SIZE), str(REPS)], check=True, capture_output=True, text=True).stdout
    return {(int(a), int(b), p == "1"): SIZE / float(s) / 1e9 for a, b, p, s in (l.split() for l in out.splitlines())}


def main() -> None:
    sim = "--sim" in sys.argv
    print(bind() if not sim else "simulator: profile two-h200")
    backend, reason = open_backend("sim" if sim else "cuda", "two-h200" if sim else None)
    out = io.StringIO()
    shell = Shell(backend, reason, out=out, err=out, json_mode=True)
    try:
        print("devices:", [(d["ordinal"], d["name"], d["pci_bus_id"], d["numa_node"])
                           for d in run(shell, out, "devices")["devices"]])
        rows = run(shell, out, f"bench peer {SIZE} reps {REPS}")["rows"]
    finally:
        shell.close()
    ref = {} if sim else c_reference()
    print(f"{'copy':<14} {'peer':<5} {'shell GB/s':>10} {'C GB/s':>8} {'ratio':>6}")
    for r in rows:
        key = (r["src"], r["dst"], r["peer"])
        c = ref.get(key)
        ratio = f"{r['gbps'] / c:.3f}" if c else "-"
        print(f"GPU {r['src']} → {r['dst']:<5} {'on' if r['peer'] else 'off':<5} {r['gbps']:>10.1f} "
              f"{c if c else float('nan'):>8.1f} {ratio:>6}")


if __name__ == "__main__":
    main()

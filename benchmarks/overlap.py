"""Issue 4's benchmark, for one device run: copy/compute overlap with 1, 2, 4 and 8 streams, through
the shell and in plain C (compiled here with nvcc) in the same run, on the same workload: CHUNKS pinned
chunks, each copied in, worked on by a kernel that spins SPIN_US on every SM, and copied out, chunk c
on stream c % S, issued while the streams are held (`hold` … `release`, as C's gate kernel does), so the
events time the GPU and not the pace of issuing. Prints each speedup over one stream; the shell's should agree
with C's within 10% (issue 11's target).
With --sim it prints the simulator's modeled figures instead (no GPU needed)."""

from __future__ import annotations

import io
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import bind

from cudashell.frontends.shell import Shell

CHUNKS, BYTES, SPIN_US, GRID = 8, 16 << 20, 300, 264
STREAMS = (1, 2, 4, 8)
HERE = Path(__file__).resolve().parent


def c_reference() -> dict[int, float]:
    exe = Path(tempfile.mkdtemp()) / "ref_overlap"
    subprocess.run(["nvcc", "-O2", "-o", str(exe), str(HERE / "ref_overlap.cu")], check=True)
    out = subprocess.run([str(exe), str(CHUNKS), str(BYTES), str(SPIN_US), str(GRID)], check=True,
                         capture_output=True, text=True).stdout
    return {int(s): float(ms) for s, ms in (line.split() for line in out.splitlines())}


def shell_times(shell: Shell, out: io.StringIO) -> dict[int, float]:
    def run(line: str) -> list[dict]:
        start = out.tell()
        shell.execute(line)
        out.seek(start)
        objs = [json.loads(x) for x in out.read().splitlines()]
        assert all(o["ok"] for o in objs), objs
        return objs

    for c in range(CHUNKS):
        run(f"alloc pinned {BYTES} as h{c}; alloc device {BYTES} as d{c}")
    for _ in STREAMS[-1:]:
        run("; ".join("stream create" for _ in range(STREAMS[-1])))
    times = {}
    for s in STREAMS:
        work = "; ".join(f"memcpy h{c} d{c} async stream {c % s + 1}; launch spin {SPIN_US} grid {GRID} block 256 "
                         f"stream {c % s + 1}; memcpy d{c} h{c} async stream {c % s + 1}" for c in range(CHUNKS))
        ms = []
        for rep in range(6):
            run(f"hold; event record a; {work}; event record b; release; event sync b")
            if rep:
                ms.append(run("elapsed a b")[-1]["result"]["ms"])
        times[s] = statistics.median(ms)
    return times


def main() -> int:
    print(bind())
    sim = "--sim" in sys.argv
    out = io.StringIO()
    if sim:
        from cudashell.backends.sim import SimBackend

        backend = SimBackend()
    else:
        from cudashell.backends.cuda import CudaBackend

        backend = CudaBackend()
    shell = Shell(backend, out=out, err=sys.stderr, json_mode=True)
    try:
        mine = shell_times(shell, out)
    finally:
        shell.close()
    ref = mine if sim else c_reference()
    print(f"device: {backend.info.name}; {CHUNKS} chunks of {BYTES >> 20} MiB, kernel spins {SPIN_US} µs on "
          f"{GRID} blocks ({backend.timing_label})")
    print(f"{'streams':>7} {'C ms':>8} {'shell ms':>9} {'C speedup':>10} {'shell speedup':>14} {'agree':>7}")
    ok = True
    for s in STREAMS:
        c_up, my_up = ref[1] / ref[s], mine[1] / mine[s]
        agree = my_up / c_up
        ok = ok and abs(agree - 1) <= 0.10
        print(f"{s:>7} {ref[s]:8.3f} {mine[s]:9.3f} {c_up:10.2f} {my_up:14.2f} {agree:7.2f}")
    print("speedups agree within 10%" if ok else "speedups DISAGREE by more than 10%")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

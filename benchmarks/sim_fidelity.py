"""How close the simulator's modeled `elapsed` figures come to the GPU's measured ones, on a profile
calibrated on that GPU in the same run. Run on a GPU machine:

    python benchmarks/sim_fidelity.py [--profile FILE] [--target 0.25]

It calibrates (`calibrate out FILE`), runs every shipped demo with an `elapsed` on the GPU and on the
simulator with that profile, and prints each figure, the ratio modeled/measured, and whether it is within
the target (±25% by default). Exit status 1 when a figure misses it."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

DEMOS = ("pinned-vs-pageable", "memory-api", "zero-copy", "streams")


def cush(*args: str) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "cudashell", "--json", *args], capture_output=True, text=True,
                       timeout=600)
    objs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    failed = [o for o in objs if not o["ok"]]
    if r.returncode or failed:
        sys.exit(f"cudashell {' '.join(args)} failed (rc {r.returncode}): {failed[:1] or r.stderr[-500:]}")
    return objs


def elapsed(objs: list[dict]) -> dict[str, float]:
    return {o["cmd"]: o["result"]["ms"] for o in objs if o["cmd"].startswith("elapsed ")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", help="where to write the calibrated profile (default: a temporary file)")
    ap.add_argument("--target", type=float, default=0.25)
    opts = ap.parse_args()
    profile = Path(opts.profile or Path(tempfile.mkdtemp()) / "calibrated.json")
    cush("--backend", "cuda", "-c", f"calibrate out {profile}")
    print(f"profile calibrated on this GPU: {profile}")
    print(f"{'demo':<20} {'figure':<22} {'GPU ms':>9} {'sim ms':>9} {'sim/GPU':>8}  within ±{opts.target:.0%}")
    missed = 0
    for demo in DEMOS:
        gpu = elapsed(cush("--backend", "cuda", "-c", f"demo {demo}"))
        sim = elapsed(cush("--backend", "sim", "--sim-profile", str(profile), "-c", f"demo {demo}"))
        for figure, measured in gpu.items():
            modeled = sim[figure]
            ratio = modeled / measured
            ok = abs(ratio - 1) <= opts.target
            missed += not ok
            print(f"{demo:<20} {figure:<22} {measured:>9.3f} {modeled:>9.3f} {ratio:>8.2f}  {'yes' if ok else 'NO'}")
    print("every figure within target" if not missed else f"{missed} figure(s) missed the target")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

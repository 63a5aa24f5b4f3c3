"""How long `cudashell -c ls` takes to start and end, and where the time goes: median of 5 runs of the whole
command on each backend (with the GPU worker started before the shell's imports, and without), the shell's own
imports, and the GPU worker's start to its first answer. Target (issue 23): the cuda backend within 0.6 s on the
H100. `python benchmarks/startup.py`."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

RUNS = 5


def command(backend: str, prestart: bool = True) -> float:
    env = {**os.environ, "CUDASHELL_PRESTART": "on" if prestart else "off"}
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "cudashell", "--backend", backend, "--quiet", "-c", "ls"],
                           capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise SystemExit(f"{backend}: {r.stderr.strip()}")
    return statistics.median(times)


def in_a_fresh_process(setup: str, timed: str) -> float:
    """Seconds `timed` takes in a new interpreter, after `setup`."""
    code = f"import time\n{setup}\nt0 = time.perf_counter()\n{timed}\nprint(time.perf_counter() - t0)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def main() -> int:
    imports = statistics.median(in_a_fresh_process("", "import cudashell.frontends.cli") for _ in range(RUNS))
    print(f"the shell's imports (cudashell.frontends.cli):         {imports:.3f} s")
    print(f"`cudashell --backend sim -c ls`:             {command('sim'):.3f} s")
    from cudashell.backends.packages import gpu_packages_missing

    why = gpu_packages_missing()
    if why:
        print(f"no GPU side here ({why})")
        return 0
    worker = statistics.median(in_a_fresh_process("from cudashell.backends.cuda import CudaBackend",
                                                  "b = CudaBackend()") for _ in range(RUNS))
    print(f"the GPU worker, start to first answer:       {worker:.3f} s")
    late = command("cuda", prestart=False)
    early = command("cuda")
    print(f"`cudashell --backend cuda -c ls`, worker started after the imports: {late:.3f} s")
    print(f"`cudashell --backend cuda -c ls`, worker started first:            {early:.3f} s  (target 0.6 s: "
          f"{'met' if early <= 0.6 else 'missed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

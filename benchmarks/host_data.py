"""Host data at memory speed (issue 38): `checksum`, `compare` and `fill … random` over 256 MiB, in GB/s, beside NumPy's
own `sum` and `array_equal` of the same bytes in the same run — the shell's host loop (backends/hostdata.py) alone,
then whole commands through the shell on the simulator (its storage, its chunks), and on a GPU where there is one
(the worker's host buffers, timed there). Targets: each ≥ 1 GB/s and ≥ 0.5 of NumPy. `python benchmarks/host_data.py`."""

from __future__ import annotations

import io
import json
import time

import numpy as np

SIZE = 256 << 20
REPS = 3


def best(fn) -> float:
    """The fastest of REPS runs, in seconds: the machine's speed, not its other tenants'."""
    runs = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return min(runs)


def gbps(seconds: float, nbytes: int = SIZE) -> float:
    return nbytes / seconds / 1e9


def loop_figures(x: np.ndarray, y: np.ndarray) -> list[tuple[str, float, float | None]]:
    """(what, GB/s, NumPy's GB/s on the same bytes or None) for the host loop alone."""
    from cudashell.backends import hostdata as H

    def pieces(a):
        return ((pos, a[pos: pos + n]) for pos, n in H.piece_spans(0, a.size))

    rows = [("checksum", gbps(best(lambda: H.checksum(pieces(x)))), gbps(best(lambda: np.sum(x)))),
            ("compare (equal)", gbps(best(lambda: H.first_difference(
                (pos, a, b) for (pos, a), (_, b) in zip(pieces(x), pieces(y))))), gbps(best(lambda: np.array_equal(x, y))))]
    out = np.empty(SIZE, np.uint8)
    for dtype in ("uint8", "uint32", "float32", "uint64"):
        view = out.view(dtype)

        def fill(view=view):
            for pos, n in H.piece_spans(0, SIZE):
                H.fill_into(view[pos // view.itemsize: (pos + n) // view.itemsize], "random", pos // view.itemsize, 1)
        rows.append((f"fill random {dtype}", gbps(best(fill)), None))
    rows.append(("(NumPy's own random bytes, PCG64)", gbps(best(lambda: np.random.default_rng(1).bytes(SIZE))), None))
    return rows


def command_figures(backend_name: str) -> list[tuple[str, float, float | None]]:
    """Whole commands through the shell: what a user waits for, and the time the command reports (measured on a
    GPU's host, modeled on the simulator)."""
    from cudashell.backends.choice import open_backend
    from cudashell.frontends.shell import Shell

    backend, _ = open_backend(backend_name, None)
    out = io.StringIO()
    shell = Shell(backend, out=out, err=out, json_mode=True)
    rows = []
    try:
        for kind in ("pageable", "pinned", "pinned writecombined"):
            shell.execute(f"free all; alloc {kind.split()[0]} 256MB {' '.join(kind.split()[1:])} as a; "
                          "alloc pageable 256MB as b; fill a random seed 1; fill b random seed 1")
            for line, what in (("checksum a", "checksum"), ("compare a b", "compare (equal)"),
                               ("fill a random seed 2", "fill random uint8"),
                               ("fill a random seed 2 dtype uint64", "fill random uint64")):
                waits, reported = [], []
                for _ in range(REPS):
                    out.seek(0)
                    out.truncate()
                    t0 = time.perf_counter()
                    shell.execute(line)
                    waits.append(time.perf_counter() - t0)
                    result = json.loads(out.getvalue().splitlines()[-1])["result"]
                    reported.append((result["host_seconds"], result["timing"]))
                seconds, label = min(reported)
                rows.append((f"{backend_name} {kind}: {what} (waited)", gbps(min(waits)), None))
                rows.append((f"{backend_name} {kind}: {what} (reported, {label})", gbps(seconds), None))
    finally:
        shell.close()
    return rows


def main() -> int:
    x = np.random.default_rng(7).integers(0, 256, SIZE, dtype=np.uint8)
    y = x.copy()
    rows = loop_figures(x, y)
    del x, y
    rows += command_figures("sim")
    from cudashell.backends.cuda import cuda_unavailable_reason

    if cuda_unavailable_reason() is None:
        rows += command_figures("cuda")
    print(f"{'256 MiB':<52} {'GB/s':>7} {'NumPy':>7} {'ratio':>6}")
    met = True
    for what, rate, numpy_rate in rows:
        ratio = rate / numpy_rate if numpy_rate else None
        target = "" if "(" in what and "waited" not in what else \
            ("  ok" if rate >= 1 and (ratio is None or ratio >= 0.5) else "  BELOW TARGET")
        met &= not target.endswith("TARGET")
        print(f"{what:<52} {rate:7.2f} {numpy_rate or float('nan'):7.2f} {ratio or float('nan'):6.2f}{target}")
    print("targets (≥ 1 GB/s, ≥ 0.5 of NumPy):", "met" if met else "not all met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

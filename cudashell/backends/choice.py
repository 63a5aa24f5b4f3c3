"""Backend choice (`open_backend`): `cuda` when PyCUDA and NVIDIA's bindings import, a GPU answers and the GPU worker starts, else
the simulator — and why."""

from __future__ import annotations

from ..errors import ShellError
from .base import Backend
from .profile import Profile


def open_backend(choice: str = "auto", sim_profile: str | None = None) -> tuple[Backend, str]:
    """Return the backend and one line saying which it is and why."""
    if choice not in ("auto", "sim", "cuda"):
        raise ShellError("USAGE", f"unknown backend '{choice}'", "choose auto, sim or cuda")
    if choice in ("auto", "cuda"):
        try:
            from .cuda import CudaBackend, cuda_unavailable_reason
        except ImportError as e:
            why = "PyCUDA is not installed" if (e.name or "").startswith("pycuda") else f"no cuda backend ({e})"
        else:
            why = cuda_unavailable_reason()
            if why is None:
                try:
                    backend = CudaBackend()
                except (ShellError, RuntimeError) as e:  # the worker refused to start, or died starting
                    why = f"the GPU worker could not start: {start_failure(e)}"
                else:
                    return backend, f"cuda on {backend.info.name} — timings are measured"
        if choice == "cuda":
            raise ShellError("NO_GPU", f"the cuda backend cannot start: {why}",
                             "install the `cuda` extra on a machine with an NVIDIA GPU, or use --backend sim")
        sim = _simulator(sim_profile)
        return sim, f"sim ({why}) — {sim.info.name}; timings are modeled"
    sim = _simulator(sim_profile)
    return sim, f"sim (asked for) — {sim.info.name}; timings are modeled"


def _simulator(profile: str | None) -> Backend:
    """Imported here: the simulator (and numpy, 0.3 s on the H100 machine) is not on the GPU side's start path."""
    from .sim import SimBackend

    return SimBackend(Profile.load(profile))


def start_failure(e: BaseException) -> str:
    """One line for why the GPU worker did not start: the driver's or the shell's refusal, or the last line of the
    traceback of a failure inside it."""
    if isinstance(e, ShellError):
        return f"{e.code}: {e.message}"
    lines = [line for line in str(e).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(e).__name__

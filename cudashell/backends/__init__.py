"""Backend choice: `cuda` when PyCUDA imports and a GPU answers, else the simulator — and why."""

from __future__ import annotations

from ..errors import ShellError
from .base import Backend
from .profile import Profile
from .sim import SimBackend


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
                backend = CudaBackend()
                return backend, f"cuda on {backend.info.name} — timings are measured"
        if choice == "cuda":
            raise ShellError("NO_GPU", f"the cuda backend cannot start: {why}",
                             "install the `cuda` extra on a machine with an NVIDIA GPU, or use --backend sim")
        sim = SimBackend(Profile.load(sim_profile))
        return sim, f"sim ({why}) — {sim.info.name}; timings are modeled"
    sim = SimBackend(Profile.load(sim_profile))
    return sim, f"sim (asked for) — {sim.info.name}; timings are modeled"

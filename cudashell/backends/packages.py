"""Whether the packages the GPU worker needs are installed, found without importing them (importing PyCUDA costs
0.35 s on the H100 machine, and whether a GPU answers is the worker's to find out). Standard library only: the
command's entry asks before anything else is imported."""

from __future__ import annotations

from importlib.util import find_spec


def _missing(name: str) -> bool:
    try:
        return find_spec(name) is None
    except ImportError:  # its parent package is not there either
        return True


def gpu_packages_missing() -> str | None:
    """None when PyCUDA and NVIDIA's cuda-bindings are installed; else which is missing, in a few words."""
    if _missing("pycuda"):
        return "PyCUDA is not installed"
    if _missing("cuda.bindings"):
        return "NVIDIA's cuda-bindings is not installed (pip install cuda-bindings, of the driver's CUDA major version)"
    return None

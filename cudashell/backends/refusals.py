"""The driver's refusals that both sides decide the same way, written once: registering memory that is not
plain pageable memory, and a kernel reaching another GPU's memory. (What a GPU answers by itself — a device
pointer for host memory in a given context — the GPU side asks its driver, and the simulator models.)"""

from __future__ import annotations

from ..errors import ShellError
from .base import Reach


def refuse_register(name: str, kind: str, registered: bool) -> None:
    """cuMemHostRegister pins pageable memory once: memory already page-locked (pinned, or `registered` as the side
    knows it: the GPU side lets its driver say so) is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, anything else not
    host memory CUDA_ERROR_INVALID_VALUE."""
    if kind == "pinned" or registered:
        raise ShellError("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", f"{name} is already page-locked",
                         "a range can be registered once; `unregister` it first")
    if kind != "pageable":
        raise ShellError("CUDA_ERROR_INVALID_VALUE", f"{name} is not host memory", "register pageable host buffers")


def across_gpus(ptr: int, owner: int, device: int, primary: bool, peers: set) -> Reach:
    """The address a kernel on GPU `device` uses for GPU `owner`'s memory: reachable from a primary context once
    `peer enable` gave that pair access (peer access is a primary context's), else NO_PEER_ACCESS."""
    return Reach(ptr) if primary and (device, owner) in peers else Reach.refused("NO_PEER_ACCESS")

"""Several GPUs: `devices` (what the driver says of each GPU and each pair) and `peer enable|disable` (let one GPU
reach another's memory). Memory on another GPU is `alloc device SIZE on N`; copies between GPUs are `memcpy`."""

from __future__ import annotations

from ..grammar import Arg
from ..registry import command
from ..results import Result, timing_data


@command("devices", "session", "every GPU, and how each pair is joined: peer access, NVLink or PCIe, native atomics",
         "devices", "cuDeviceGetCount, cuDeviceGetPCIBusId, cuDeviceCanAccessPeer, cuDeviceGetP2PAttribute "
         "(+ nvidia-smi topo -m for the link's name)", exported=False,
         details="The session works on one GPU (`*`); `bench peer` copies between each pair. Bus id and NUMA "
                 "node say which CPU socket a GPU hangs off; on the simulator the profile's GPUs "
                 "(`--sim-profile two-h200` has two). `enabled` lists the peer access `peer enable` gave.")
def devices(session, backend, args):
    return Result("devices", {**backend.devices(), "current": backend.info.ordinal,
                              "enabled": sorted(session.peers), "timing": backend.timing_label})


@command("peer", "memory", "let one GPU reach another's memory directly, or stop it", "peer enable 0 1",
         "cudaDeviceEnablePeerAccess / cudaDeviceDisablePeerAccess (cuCtxEnablePeerAccess in GPU A's context)",
         args=(Arg("SWITCH", choices=("enable", "disable")), Arg("A", "int"), Arg("B", "int")),
         details="After `peer enable A B` a kernel on GPU A may read and write GPU B's memory, and copies between "
                 "them go over the link instead of through the host; one direction each (`peer enable 1 0` for "
                 "the other). The driver refuses twice (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED), a pair that "
                 "cannot (…_UNSUPPORTED), or a GPU that is not there (CUDA_ERROR_INVALID_DEVICE).")
def peer(session, backend, args):
    a, b, enable = args.get("A"), args.get("B"), args.get("SWITCH") == "enable"
    t = backend.peer_access(a, b, enable)
    (session.peers.add if enable else session.peers.discard)((a, b))
    return Result("peer", {"src": a, "dst": b, "enabled": enable,
                           "call": "cudaDeviceEnablePeerAccess" if enable else "cudaDeviceDisablePeerAccess",
                           **timing_data(t)})

"""Several GPUs: `devices` (what the driver says of each GPU and each pair) and `peer enable|disable` (let one GPU
reach another's memory). Memory on another GPU is `alloc device SIZE on N`; copies between GPUs are `memcpy`."""

from __future__ import annotations

from typing import TypedDict

from ..language.grammar import Arg
from ..language.registry import c_writer, command
from ..output.render import fit
from ..output.results import Result, TimingData, timing_data
from ..sizes import format_size


@command("devices", "session", "every GPU, and how each pair is joined: peer access, NVLink or PCIe, native atomics",
         "devices", "cuDeviceGetCount, cuDeviceGetPCIBusId, cuDeviceGetAttribute, cuDeviceCanAccessPeer, "
         "cuDeviceGetP2PAttribute (+ nvidia-smi topo -m for the link's name)", exported=False,
         details="The session works on one GPU (`*`); `bench peer` copies between each pair. Bus id and NUMA "
                 "node say which CPU socket a GPU hangs off; on the simulator the profile's GPUs "
                 "(`--sim-profile two-h200` has two). Under the table each GPU's asyncEngineCount (1: copies to and "
                 "from it take turns on one engine) and pageableMemoryAccess (1: a kernel may read malloc'd memory, "
                 "as on HMM-enabled hosts and Grace Hopper). `enabled` lists the peer access `peer enable` gave.")
def devices(session, backend, args):
    return DeviceList({**backend.devices(), "current": backend.info.ordinal,
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
    return PeerAccess({"src": a, "dst": b, "enabled": enable,
                           "call": "cudaDeviceEnablePeerAccess" if enable else "cudaDeviceDisablePeerAccess",
                           **timing_data(t)})


@c_writer("peer")
def c_peer(w, a, i, text):
    src, dst, on = a.get("A"), a.get("B"), a.get("SWITCH") == "enable"
    call = f"cudaDeviceEnablePeerAccess({dst}, 0)" if on else f"cudaDeviceDisablePeerAccess({dst})"
    w.devices |= {src, dst}
    (w.peers.add if on else w.peers.discard)((src, dst))
    w.emit(f"{w.switch(f'gpu{src}')} CHECK({call}); {w.switch(w.ctx)}", i,
           "cuCtxEnablePeerAccess" if on else "cuCtxDisablePeerAccess")


# ------------------------------------------------------------------ the results of these commands
class DevicesDataDevicesItem(TypedDict):
    ordinal: int
    name: str
    pci_bus_id: str
    numa_node: int | None  # None where sysfs does not say (the GPU side)
    total_mem: int
    compute_capability: str
    async_engine_count: int  # copy engines (asyncEngineCount): 1 means H2D and D2H copies take turns
    pageable_memory_access: bool  # pageableMemoryAccess: whether a kernel may read malloc'd memory


class DevicesDataPeersItem(TypedDict):
    src: int
    dst: int
    access: bool
    link: str
    atomics: bool


class DevicesData(TypedDict):
    devices: list[DevicesDataDevicesItem]
    peers: list[DevicesDataPeersItem]
    link_source: str
    memory_nodes: list[int]
    current: int
    enabled: list[list[int]]
    timing: str


class DeviceList(Result, kind="devices"):
    Data = DevicesData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        rows = [[("* " if g["ordinal"] == d["current"] else "  ") + str(g["ordinal"]), g["name"], g["pci_bus_id"],
                 "-" if g["numa_node"] is None else g["numa_node"], format_size(g["total_mem"]),
                 "sm_" + g["compute_capability"].replace(".", "")] for g in d["devices"]]
        out = [fit(rows, ["GPU", "name", "bus id", "NUMA", "memory", "compute"], tablefmt, width)] + _attributes(d)
        if d["peers"]:
            enabled = {tuple(p) for p in d["enabled"]}
            yes = {True: "yes", False: "no"}
            pairs = [[f"GPU {p['src']} → GPU {p['dst']}", yes[p["access"]], p["link"], yes[p["atomics"]],
                      yes[(p["src"], p["dst"]) in enabled]] for p in d["peers"]]
            out += ["", fit(pairs, ["pair", "peer access", "link", "native atomics", "enabled"], tablefmt, width),
                    f"(* the session's device; links from {d['link_source']})"]
        else:
            out.append("(one GPU: nothing to copy between; `--sim-profile two-h200` models a pair)")
        return out


def _attributes(d: dict) -> list[str]:
    """One line for the GPUs that share their copy engines and pageable access: what a copy or a kernel may count on."""
    groups: dict[tuple, list[str]] = {}
    for g in d["devices"]:
        groups.setdefault((g["async_engine_count"], g["pageable_memory_access"]), []).append(str(g["ordinal"]))
    out = []
    for (engines, pageable), gpus in groups.items():
        copies = "each direction has its own" if engines >= 2 else "copies both ways take turns on it"
        reach = "a kernel may read malloc'd memory" if pageable else "a kernel cannot read malloc'd memory"
        out.append(f"GPU {', '.join(gpus)}: asyncEngineCount {engines} ({engines} copy engine{'s' * (engines != 1)}: "
                   f"{copies}), pageableMemoryAccess {int(pageable)} ({reach})")
    return out


class PeerData(TimingData):
    src: int
    dst: int
    enabled: bool
    call: str


class PeerAccess(Result, kind="peer"):
    Data = PeerData

    def text(self):
        d = self.data
        return ([f"peer access GPU {d['src']} → GPU {d['dst']} {'enabled' if d['enabled'] else 'disabled'}: "
                f"{d['call']} ({d['timing']})"])

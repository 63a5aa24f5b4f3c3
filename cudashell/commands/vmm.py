"""Virtual memory management (the driver API): `vmm granularity|reserve|create|map|access|unmap|release|free`.
A reservation is a device buffer whose mapped, accessible parts copies, `show`, `fill` and kernels use; the
parts that are not are refused by the driver (CUDA_ERROR_INVALID_VALUE for a copy, a fault for a kernel)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ..errors import ShellError, held_error, usage
from ..export.cemit import HELPERS, ident
from ..language.grammar import Arg, Opt
from ..language.registry import c_writer, command
from ..model.session import Buffer
from ..model.vmm import ACCESS_MODES, GRANULARITY, Mapping, Reservation, VmmHandle
from ..output.results import Result, hexptr
from ..sizes import format_size
from .checks import check_name, check_new_name, region

VMM = frozenset({"vmm"})  # the flag that marks a reservation among the buffers


def _reservations(buf, words) -> bool:
    return "vmm" in buf.flags


def _handle_names(session, words, index):
    return [(n, f"vmm handle, {format_size(h.size)}") for n, h in session.vmm.handles.items()]


def _granular(size: int, call: str, col) -> None:
    """The driver's refusal of a size that is not a multiple of the granularity, said before it is called."""
    if size <= 0 or size % GRANULARITY:
        raise ShellError("CUDA_ERROR_INVALID_VALUE", f"{call}: {size} bytes is not a multiple of the allocation "
                         f"granularity ({format_size(GRANULARITY)})",
                         "`vmm granularity` says it; round the size up to a multiple of it", col)


def _reservation(session, name: str, col) -> tuple[Buffer, Reservation]:
    buf = session.buffer(name, col)
    res = session.vmm.reservations.get(buf.name)
    if res is None:
        raise ShellError("KIND_MISMATCH", f"{buf.name} is {buf.kind} memory, not a `vmm reserve` range",
                         "`vmm reserve SIZE as VA` makes one", col)
    return buf, res


def _handle(session, name: str, col) -> VmmHandle:
    h = session.vmm.handles.get(name)
    if h is None:
        raise usage(f"no vmm handle named '{name}'" + (" (it was released)" if session.gone.get("vmm " + name) else ""),
                    col, "`vmm create SIZE as H` makes one; `ls` lists them")
    return h


def _change(action: str, call: str, text: str, named: str | None = None, **extra) -> VmmChange:
    return VmmChange({"action": action, "call": call, "text": text, **extra}, named=named)


@command("vmm granularity", "memory", "the allocation granularity of pinned device memory",
         "vmm granularity", "cuMemGetAllocationGranularity (MINIMUM and RECOMMENDED)",
         opts=(Opt("on", Arg("GPU", "int")),),
         details="Every size `vmm reserve`, `vmm create` and `vmm map` take is a multiple of it (2 MiB each on the "
                 "H100).")
def vmm_granularity(session, backend, args):
    gpu = args.get("GPU", session.context.device)
    minimum, recommended = backend.vmm_granularity(gpu)
    return Granularity({"device": gpu, "minimum": minimum, "recommended": recommended})


@command("vmm reserve", "memory", "reserve a range of device addresses, with no memory behind it yet",
         "vmm reserve 64MB as va", "cuMemAddressReserve",
         args=(Arg("SIZE", "size"),), opts=(Opt("as", Arg("NAME", "newname")),),
         details="The range is a buffer (kind device, flag vmm): copies, `show`, `fill` and kernels may use the parts "
                 "`vmm map` put memory behind and `vmm access` opened; anywhere else a copy is the driver's "
                 "CUDA_ERROR_INVALID_VALUE and a kernel's access faults. Names default to va0, va1, …")
def vmm_reserve(session, backend, args):
    size = args.get("SIZE")
    _granular(size, "cuMemAddressReserve", args.col("SIZE"))
    name = args.get("NAME") or next(f"va{n}" for n in range(len(session.buffers) + 1)
                                    if f"va{n}" not in session.buffers)
    check_new_name(session, name, args.col("NAME"))
    ctx = session.context
    allocation, _t = backend.vmm_reserve(size, ctx.handle)
    buf = Buffer(name, "device", size, VMM, None, allocation.device_ptr, allocation.handle, device=ctx.device,
                 context=ctx.name)
    session.add_buffer(buf)
    session.vmm.reservations[name] = Reservation(name, size, ctx.device)
    return _change("reserve", "cuMemAddressReserve", f"reserved {name}: {format_size(size)} of addresses at "
                   f"{hexptr(buf.device_ptr)}, nothing mapped", named=name, reservation=name, size=size,
                   address=hexptr(buf.device_ptr))


@command("vmm create", "memory", "make physical device memory (a handle) to map into reservations",
         "vmm create 2MB as mem", "cuMemCreate (CU_MEM_ALLOCATION_TYPE_PINNED, on a device)",
         args=(Arg("SIZE", "size"),), opts=(Opt("on", Arg("GPU", "int")), Opt("as", Arg("NAME", "newname"))),
         details="The memory has no address until `vmm map` puts it in a reservation — at one address or several "
                 "(aliases: one set of bytes). Names default to mem0, mem1, …")
def vmm_create(session, backend, args):
    size = args.get("SIZE")
    _granular(size, "cuMemCreate", args.col("SIZE"))
    gpu = args.get("GPU", session.context.device)
    name = args.get("NAME") or session.vmm.next_handle_name()
    check_name(name, args.col("NAME"), "a vmm handle")
    if name in session.vmm.handles:
        raise ShellError("NAME_TAKEN", f"a vmm handle named '{name}' exists", "pick another name", args.col("NAME"))
    number = backend.vmm_create(size, gpu)
    session.vmm.handles[name] = VmmHandle(name, size, gpu, number)
    session.gone.pop("vmm " + name, None)
    return _change("create", "cuMemCreate", f"created {name}: {format_size(size)} of device memory on GPU {gpu}",
                   named=name, handle=name, size=size)


@command("vmm map", "memory", "map a handle's memory into a reservation at an offset",
         "vmm map mem va[2MB:]", "cuMemMap (the handle's whole size, offset 0 in it)",
         args=(Arg("H", complete=_handle_names), Arg("VA", "part", accepts=_reservations)),
         details="`va[OFFSET:]` says where (a multiple of the granularity); a new mapping has no access: "
                 "`vmm access` opens it. One handle may be mapped at several addresses: they alias.")
def vmm_map(session, backend, args):
    h = _handle(session, args.get("H"), args.col("H"))
    part = args.get("VA")
    buf, res = _reservation(session, part.name, args.col("VA"))
    offset = part.start
    if offset % GRANULARITY or offset + h.size > res.size or res.overlapping(offset, h.size):
        raise ShellError("CUDA_ERROR_INVALID_VALUE", f"cuMemMap: {format_size(h.size)} at offset {offset} of "
                         f"{buf.name} is not a free, granularity-aligned part of the reservation",
                         f"map at a free multiple of {format_size(GRANULARITY)} inside {buf.name} (`ls` shows what "
                         "is mapped)", args.col("VA"))
    backend.vmm_map(buf, offset, h.handle)
    m = Mapping(buf.name, offset, h)
    res.mappings = sorted(res.mappings + [m], key=lambda x: x.offset)
    h.mappings.append(m)
    return _change("map", "cuMemMap", f"mapped {h.name} at {buf.name}+{format_size(offset)} "
                   f"({hexptr(buf.device_ptr + offset)}): no access yet", reservation=buf.name, handle=h.name,
                   offset=offset, size=h.size, address=hexptr(buf.device_ptr + offset))


@command("vmm access", "memory", "let a GPU read and write (or read, or not touch) what is mapped in a reservation",
         "vmm access va rw", "cuMemSetAccess (CU_MEM_ACCESS_FLAGS_PROT_READWRITE / READ / NONE)",
         args=(Arg("VA", "buffer", accepts=_reservations), Arg("MODE", choices=ACCESS_MODES, noun="access")),
         opts=(Opt("on", Arg("GPU", "int")),),
         details="Over every mapping in the reservation, one cuMemSetAccess each. Until it is given, a copy into the "
                 "range is CUDA_ERROR_INVALID_VALUE (as on the H100).")
def vmm_access(session, backend, args):
    buf, res = _reservation(session, args.get("VA"), args.col("VA"))
    if not res.mappings:
        raise ShellError("CUDA_ERROR_INVALID_VALUE", f"cuMemSetAccess: nothing is mapped in {buf.name}",
                         f"`vmm map HANDLE {buf.name}[OFFSET:]` first", args.col("VA"))
    mode, gpu = args.get("MODE"), args.get("GPU", res.device)
    for m in res.mappings:
        backend.vmm_access(buf, m.offset, m.size, mode, gpu)
        m.access = mode
    return _change("access", "cuMemSetAccess", f"{buf.name}: {len(res.mappings)} mapping(s) now {mode} for GPU {gpu}",
                   reservation=buf.name, access=mode, device=gpu)


@command("vmm unmap", "memory", "unmap whole mappings from a reservation", "vmm unmap va[2MB:+2MB]",
         "cuMemUnmap",
         args=(Arg("VA", "part", accepts=_reservations),),
         details="The range is whole mappings (all of them without a range); a part of a mapping is the driver's "
                 "CUDA_ERROR_INVALID_VALUE. The memory of a released handle is freed with its last mapping.")
def vmm_unmap(session, backend, args):
    part = args.get("VA")
    buf, res = _reservation(session, part.name, args.col("VA"))
    r = region(session, part, args.col("VA"))
    ms = res.covering(r.offset, r.nbytes) if r.explicit else list(res.mappings)
    if not ms:
        raise ShellError("CUDA_ERROR_INVALID_VALUE", f"cuMemUnmap: {r.label()} is not whole mappings",
                         "name whole mappings (`ls` shows them), or the reservation for all", args.col("VA"))
    if session.held is not None:
        raise held_error("cuMemUnmap, which waits for the device,").at(args.col("VA"))
    for m in ms:
        backend.vmm_unmap(buf, m.offset, m.size)
        res.mappings.remove(m)
        m.handle.mappings.remove(m)
    return _change("unmap", "cuMemUnmap", f"unmapped {len(ms)} mapping(s) from {buf.name}", reservation=buf.name,
                   handles=[m.handle.name for m in ms])


@command("vmm release", "memory", "release a handle: its memory goes once nothing maps it", "vmm release mem",
         "cuMemRelease", args=(Arg("H", complete=_handle_names),),
         details="Mappings of it stay usable; the memory is freed when the last one is unmapped.")
def vmm_release(session, backend, args):
    h = _handle(session, args.get("H"), args.col("H"))
    backend.vmm_release(h.handle)
    h.released = True
    del session.vmm.handles[h.name]
    session.gone["vmm " + h.name] = "was released"
    still = len(h.mappings)
    return _change("release", "cuMemRelease", f"released {h.name}" + (
        f": its memory lives while {still} mapping(s) of it do" if still else ": its memory is freed"),
        handle=h.name, mapped=still)


@command("vmm free", "memory", "give a reservation's addresses back", "vmm free va", "cuMemAddressFree",
         args=(Arg("VA", "buffer", accepts=_reservations),),
         details="Nothing may be mapped in it any more: `vmm unmap` first (the H100 refuses a range still mapped: "
                 "CUDA_ERROR_INVALID_VALUE).")
def vmm_free(session, backend, args):
    buf, res = _reservation(session, args.get("VA"), args.col("VA"))
    if res.mappings:  # the H100 answered cuMemAddressFree of a range still mapped so; checked before the driver
        raise ShellError("CUDA_ERROR_INVALID_VALUE", f"cuMemAddressFree: {buf.name} still has {len(res.mappings)} "
                         f"mapping(s)", f"`vmm unmap {buf.name}` first", col=args.col("VA"))
    backend.vmm_free(buf)
    del session.buffers[buf.name]
    del session.vmm.reservations[buf.name]
    session.gone[buf.name] = "was freed (vmm free)"
    return _change("free", "cuMemAddressFree", f"freed {buf.name}'s addresses", reservation=buf.name)


# ---------------------------------------------------------------- results

class GranularityData(TypedDict):
    device: int
    minimum: int
    recommended: int


class Granularity(Result, kind="vmm_granularity"):
    Data = GranularityData

    def text(self):
        d = self.data
        return [(f"GPU {d['device']}: allocation granularity {format_size(d['minimum'])} minimum, "
                 f"{format_size(d['recommended'])} recommended (cuMemGetAllocationGranularity)")]


class VmmData(TypedDict):
    action: str
    call: str
    text: str
    reservation: NotRequired[str]
    handle: NotRequired[str]
    handles: NotRequired[list[str]]
    size: NotRequired[int]
    offset: NotRequired[int]
    address: NotRequired[str | None]
    access: NotRequired[str]
    device: NotRequired[int]
    mapped: NotRequired[int]


class VmmChange(Result, kind="vmm"):
    Data = VmmData
    prose = True

    def text(self):
        return [f"{self.data['text']} — {self.data['call']}"]


# ---------------------------------------------------------------- export c, explain

HELPERS["vmm"] = r"""
// Virtual memory management (`vmm …`): the driver's cuMem* calls, reached through the runtime as above.
static struct {
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*addressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*addressFree)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*setAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
} vmm;
static CUmemAllocationProp vmm_prop(int device) {  // pinned device memory on one GPU
    CUmemAllocationProp p = {}; p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = device; return p; }
static void vmm_init() {
    if (vmm.map) return;
    driver_init();
    vmm.granularity = (decltype(vmm.granularity))driver_call("cuMemGetAllocationGranularity", 10020);
    vmm.addressReserve = (decltype(vmm.addressReserve))driver_call("cuMemAddressReserve", 10020);
    vmm.addressFree = (decltype(vmm.addressFree))driver_call("cuMemAddressFree", 10020);
    vmm.create = (decltype(vmm.create))driver_call("cuMemCreate", 10020);
    vmm.release = (decltype(vmm.release))driver_call("cuMemRelease", 10020);
    vmm.map = (decltype(vmm.map))driver_call("cuMemMap", 10020);
    vmm.unmap = (decltype(vmm.unmap))driver_call("cuMemUnmap", 10020);
    vmm.setAccess = (decltype(vmm.setAccess))driver_call("cuMemSetAccess", 10020); }
static unsigned char *vmm_reserve(size_t size) {
    vmm_init(); CUdeviceptr p; CU(vmm.addressReserve(&p, size, 0, 0, 0)); return (unsigned char *)p; }
static CUmemGenericAllocationHandle vmm_create(size_t size, int device) {
    vmm_init(); CUmemAllocationProp p = vmm_prop(device); CUmemGenericAllocationHandle h;
    CU(vmm.create(&h, size, &p, 0)); return h; }
struct vmm_range { unsigned char *base; size_t size; int n; size_t off[64], len[64]; };  // what is mapped where
static void vmm_map_at(vmm_range &r, size_t off, CUmemGenericAllocationHandle h, size_t size) {
    CU(vmm.map((CUdeviceptr)(r.base + off), size, 0, h, 0)); r.off[r.n] = off; r.len[r.n++] = size; }
static void vmm_access_all(vmm_range &r, CUmemAccess_flags flags, int device) {  // one call a mapping
    CUmemAccessDesc d = {}; d.location.type = CU_MEM_LOCATION_TYPE_DEVICE; d.location.id = device; d.flags = flags;
    for (int k = 0; k < r.n; k++) CU(vmm.setAccess((CUdeviceptr)(r.base + r.off[k]), r.len[k], &d, 1)); }
static void vmm_unmap_range(vmm_range &r, size_t from, size_t to) {  // the whole mappings inside [from, to)
    CHECK(cudaDeviceSynchronize());  // as the shell does: cuMemUnmap does not wait for work still using the range
    for (int k = 0; k < r.n;)
        if (r.off[k] >= from && r.off[k] + r.len[k] <= to) {
            CU(vmm.unmap((CUdeviceptr)(r.base + r.off[k]), r.len[k]));
            r.n--; r.off[k] = r.off[r.n]; r.len[k] = r.len[r.n];
        } else k++; }
"""


def _c_ready(w) -> None:
    """The driver's VMM calls, reached through the runtime as contexts' are (no -lcuda)."""
    w.helper("driver")
    w.helper("vmm")


@c_writer("vmm granularity")
def c_vmm_granularity(w, a, i, text):
    _c_ready(w)
    gpu = a.get("GPU") if a.get("GPU") is not None else 0
    w.emit(f"{{ vmm_init(); CUmemAllocationProp p = vmm_prop({gpu}); size_t g = 0; "
           f"CU(vmm.granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM)); "
           f'printf("granularity %zu\\n", g); }}', i, "cuMemGetAllocationGranularity")


@c_writer("vmm reserve")
def c_vmm_reserve(w, a, i, text):
    _c_ready(w)
    name, size = w.named(a, text), a.get("SIZE")
    var, rec = ident("b", name), ident("vr", name)
    w.declare(f"unsigned char *{var} = nullptr;")
    w.declare(f"vmm_range {rec} = {{}};")
    w.emit(f"{var} = vmm_reserve({size}); {rec} = {{{var}, {size}, 0}};", i, "cuMemAddressReserve")
    w.buffers[name] = ("device", size)
    w.unchecked.add(name)  # only its mapped parts can be read: no checksum of the whole at the end


@c_writer("vmm create")
def c_vmm_create(w, a, i, text):
    _c_ready(w)
    name, size = w.named(a, text), a.get("SIZE")
    w.declare(f"CUmemGenericAllocationHandle {ident('h', name)} = 0;")
    w.declare(f"size_t {ident('hs', name)} = 0;")
    w.emit(f"{ident('h', name)} = vmm_create({size}, {a.get('GPU') if a.get('GPU') is not None else w.device}); "
           f"{ident('hs', name)} = {size};", i, "cuMemCreate")


@c_writer("vmm map")
def c_vmm_map(w, a, i, text):
    part, h = a.get("VA"), a.get("H")
    w.emit(f"vmm_map_at({ident('vr', part.name)}, {part.start}, {ident('h', h)}, {ident('hs', h)});", i, "cuMemMap")


@c_writer("vmm access")
def c_vmm_access(w, a, i, text):
    flags = {"rw": "CU_MEM_ACCESS_FLAGS_PROT_READWRITE", "read": "CU_MEM_ACCESS_FLAGS_PROT_READ",
             "none": "CU_MEM_ACCESS_FLAGS_PROT_NONE"}[a.get("MODE")]
    gpu = a.get("GPU") if a.get("GPU") is not None else w.device
    w.emit(f"vmm_access_all({ident('vr', a.get('VA'))}, {flags}, {gpu});", i, "cuMemSetAccess")


@c_writer("vmm unmap")
def c_vmm_unmap(w, a, i, text):
    part = a.get("VA")
    end = (part.start + part.length if part.length is not None else part.stop if part.stop is not None
           else w.buffers[part.name][1])
    w.emit(f"vmm_unmap_range({ident('vr', part.name)}, {part.start}, {end});", i, "cuMemUnmap")


@c_writer("vmm release")
def c_vmm_release(w, a, i, text):
    w.emit(f"CU(vmm.release({ident('h', a.get('H'))}));", i, "cuMemRelease")


@c_writer("vmm free")
def c_vmm_free(w, a, i, text):
    name = a.get("VA")
    var, size = ident("b", name), w.buffers.pop(name)[1]
    w.unchecked.discard(name)
    w.emit(f"CU(vmm.addressFree((CUdeviceptr){var}, {size})); {var} = nullptr;", i, "cuMemAddressFree")

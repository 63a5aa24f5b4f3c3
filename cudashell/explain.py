"""`explain on`: the CUDA runtime C a command stands for, and the driver call the backend made, from the
command's result — so what the shell did can be pasted into a .cu file."""

from __future__ import annotations

HOST_ALLOC_FLAGS = {"portable": "cudaHostAllocPortable", "mapped": "cudaHostAllocMapped",
                    "writecombined": "cudaHostAllocWriteCombined"}
REGISTER_FLAGS = {"portable": "cudaHostRegisterPortable", "mapped": "cudaHostRegisterMapped",
                  "readonly": "cudaHostRegisterReadOnly"}
MEMCPY_KIND = {"h2d": "cudaMemcpyHostToDevice", "d2h": "cudaMemcpyDeviceToHost",
               "d2d": "cudaMemcpyDeviceToDevice", "h2h": "cudaMemcpyHostToHost"}


def _flags(words, table, default="0") -> str:
    return " | ".join(table[w] for w in sorted(words) if w in table) or default


def _stream(d) -> str:
    return "0" if d.get("stream", "0") == "0" else f"stream_{d['stream']}"


def explain(kind: str, d: dict) -> list[str]:
    """(C line, driver line) for a result, or nothing when the command calls no CUDA."""
    if kind == "alloc":
        b = d["buffer"]
        name, size = b["name"], b["size"]
        c = {"pageable": f"{name} = malloc({size});",
             "pinned": f"cudaHostAlloc(&{name}, {size}, {_flags(b['flags'], HOST_ALLOC_FLAGS, 'cudaHostAllocDefault')});",
             "device": f"cudaMalloc(&{name}, {size});",
             "managed": f"cudaMallocManaged(&{name}, {size}, "
                        f"{'cudaMemAttachHost' if 'host' in b['flags'] else 'cudaMemAttachGlobal'});"}[b["kind"]]
        drv = {"pageable": "mmap (pageable pages)", "pinned": "cuMemHostAlloc", "device": "cuMemAlloc_v2",
               "managed": "cuMemAllocManaged"}[b["kind"]]
        return [c, drv]
    if kind == "buffer":
        b = d["buffer"]
        if d["call"] == "cudaHostRegister":
            return [f"cudaHostRegister({b['name']}, {b['size']}, "
                    f"{_flags(b['registered'] or [], REGISTER_FLAGS, 'cudaHostRegisterDefault')});", "cuMemHostRegister_v2"]
        return [f"cudaHostUnregister({b['name']});", "cuMemHostUnregister"]
    if kind == "copy":
        args = f"{d['dst']}, {d['src']}, {d['bytes']}, {MEMCPY_KIND[d['direction']]}"
        if d["async"]:
            return [f"cudaMemcpyAsync({args}, {_stream(d)});", "cuMemcpyAsync (unified addressing: any pair)"]
        return [f"cudaMemcpy({args});", "cuMemcpy (unified addressing: any pair)"]
    if kind == "memset":
        if d["async"]:
            return [f"cudaMemsetAsync({d['name']}, {d['value']}, {d['bytes']}, {_stream(d)});", "cuMemsetD8Async"]
        return [f"cudaMemset({d['name']}, {d['value']}, {d['bytes']});", "cuMemsetD8_v2"]
    if kind == "launch":
        args = list(map(str, d["args"])) + ([str(d["n"])] if d["builtin"] and d["kernel"] != "spin" else [])
        return [f"{d['kernel']}<<<{d['grid']}, {d['block']}, {d['shared']}, {_stream(d)}>>>({', '.join(args)});",
                "cuLaunchKernel"]
    if kind == "free":
        return ["; ".join(("cudaHostUnregister(%s); " % f["name"] if f["unregistered"] else "")
                          + {"pageable": f"free({f['name']})", "pinned": f"cudaFreeHost({f['name']})",
                             "device": f"cudaFree({f['name']})", "managed": f"cudaFree({f['name']})"}[f["kind"]]
                          for f in d["freed"]) + ";", "cuMemFreeHost / cuMemFree_v2"] if d["freed"] else []
    if kind == "stream":
        flags = "cudaStreamNonBlocking" if d["nonblocking"] else "cudaStreamDefault"
        return [f"cudaStreamCreateWithPriority(&stream_{d['name']}, {flags}, {d['priority']});",
                "cuStreamCreateWithPriority"]
    if kind == "event":
        return [f"cudaEventRecord(event_{d['name']}, {_stream(d)});", "cuEventRecord"]
    if kind == "sync":
        what = d["what"]
        if what == "device":
            return ["cudaDeviceSynchronize();", "cuCtxSynchronize"]
        if what.startswith("stream"):
            name = what.split()[1]
            return [f"cudaStreamSynchronize({'0' if name == '0' else 'stream_' + name});", "cuStreamSynchronize"]
        return [f"cudaEventSynchronize(event_{what.split()[1]});", "cuEventSynchronize"]
    if kind == "prefetch":
        where = "0" if d["to"] == "device" else "cudaCpuDeviceId"
        return [f"cudaMemPrefetchAsync({d['name']}, {d['bytes']}, {where}, {_stream(d)});", "cuMemPrefetchAsync_v2"]
    return []

"""Which calls hold the host, and how long: the CUDA driver API's "API synchronization behavior" as one
table that both backends read. The simulator obeys it; the cuda backend reports what it observed, and a
GPU test checks the two agree. Each rule says what the host waits for:

- ``none``: the call returns once the work is queued;
- ``staged``: the driver copies the pageable source into a pinned staging buffer and returns before the
  DMA has run (the source is read now, at issue time), without waiting for the GPU;
- ``queue``: as ``staged``, but the call first waits for the work queued before it (synchronous copies);
- ``complete``: the call returns when the work itself (and so everything before it) has finished;
- ``device``: the call first waits for the whole device (cudaFree, cudaHostUnregister).

Measured on the H100 (driver 580, CUDA 13) with the stream held by a 40 ms kernel: every entry below."""

from __future__ import annotations

from dataclasses import dataclass

STAGING_BYTES = 2 << 20  # pageable H2D copies up to this size are staged without waiting (4 MiB blocks)


@dataclass(frozen=True)
class Rule:
    wait: str  # none | staged | queue | complete | device
    why: str

    @property
    def blocks(self) -> bool:
        """Whether the host waits for GPU work (of this call or queued before it)."""
        return self.wait not in ("none", "staged")

    @property
    def stages(self) -> bool:
        """Whether the host copies the source into staging memory, reading it at issue time."""
        return self.wait in ("staged", "queue")


def memory_class(kind: str, registered: bool = False) -> str:
    """pageable | pinned (allocated or registered) | device | managed: what the rules distinguish."""
    return "pinned" if kind == "pageable" and registered else kind


def memcpy_rule(src: str, dst: str, async_: bool, nbytes: int) -> Rule:
    """src/dst: memory classes. The rules of cuMemcpy* (sync) and cuMemcpy*Async."""
    host = ("pageable", "pinned")
    if nbytes == 0:
        return Rule("none", "a zero-byte copy returns at once and queues nothing")
    if src in host and dst in host:
        return Rule("complete", "host-to-host copies are fully synchronous with respect to the host")
    if not async_:
        if src == "device" and dst == "device":
            return Rule("none", "device-to-device copies perform no host-side synchronization")
        if src == "pageable" and nbytes <= STAGING_BYTES:
            return Rule("queue", "pageable→device: waits for the stream, returns once the source is staged "
                        "for DMA (the DMA may not have finished)")
        return Rule("complete", "a synchronous copy to or from host (or managed) memory returns when it has "
                    "completed")
    if dst == "pageable":
        return Rule("complete", "an async copy into pageable memory is synchronous: the driver copies out of its "
                    "staging buffer after the DMA")
    if src == "pageable":
        if nbytes <= STAGING_BYTES:
            return Rule("staged", f"pageable→device async up to {STAGING_BYTES >> 20} MiB: staged into pinned "
                        "memory at issue, returns without waiting for the GPU")
        return Rule("complete", f"pageable→device async over {STAGING_BYTES >> 20} MiB: the staging waits for "
                    "the stream, so the call is synchronous")
    return Rule("none", "async copies between pinned, device and managed memory are fully asynchronous")


BATCH_ORDERS = ("stream", "during-call", "any")  # CUmemcpySrcAccessOrder: STREAM, DURING_API_CALL, ANY
_STRENGTH = ("none", "staged", "queue", "complete", "device")


def batch_copy_rule(src: str, dst: str, order: str, nbytes: int) -> Rule:
    """One copy of cuMemcpyBatchAsync, as the H100 ran it (CUDA 13, 4 KiB, the stream held 30 ms by a kernel): the
    source-access order decides, not the async copy's rules — a pageable destination does not make it synchronous."""
    if src == "pageable":
        if order == "stream":
            return Rule("queue", "a batch reading pageable memory in stream order: the call waits for the stream, "
                        "then stages the source and returns")
        return Rule("staged", "a batch reading pageable memory out of stream order: the source is staged during "
                    "the call, which does not wait for the stream")
    if src in ("pinned", "device", "managed") and dst in ("pinned", "device", "managed", "pageable"):
        if order == "during-call":
            return Rule("complete", "a batch whose sources must be read during the call (DURING_API_CALL): with "
                        "work queued ahead, the call waits for the stream and for the copies")
        return Rule("none", "a batch of copies from pinned, device or managed memory is queued; the call returns "
                    "at once (into pageable memory too)")
    return memcpy_rule(src, dst, True, nbytes)


def batch_rule(copies: list[tuple[str, str, int]], order: str) -> Rule:
    """cuMemcpyBatchAsync: one call for many copies ((src class, dst class, bytes) each), so the host waits as long
    as its most waiting copy's rule says."""
    return max((batch_copy_rule(s, d, order, n) for s, d, n in copies), key=lambda r: _STRENGTH.index(r.wait))


def memset_rule(target: str, async_: bool, nbytes: int) -> Rule:
    if nbytes == 0:
        return Rule("none", "a zero-byte memset returns at once")
    if async_:
        return Rule("none", "async memsets are fully asynchronous")
    if target in ("pinned", "managed"):
        return Rule("complete", "a synchronous memset of pinned host memory or a unified (managed) region is "
                    "synchronous")
    return Rule("none", "a synchronous memset of device memory is asynchronous with respect to the host")


QUEUED = Rule("none", "queued on the stream; the call returns at once")


def prefetch_rule(where: str, populates: bool) -> Rule:
    """cuMemPrefetchAsync, as the H100 runs it (driver 580, CUDA 13): a prefetch to the device of managed pages the
    host wrote, which the device does not hold yet, holds the host until the pages have moved (4 MiB: 0.43 ms of
    host time around 0.47 ms on the engine; 64 MiB: 1.51 around 1.53 ms; the issue's first run, in a fresh process,
    59 ms around 5.4 ms). Once they have been to the host and back, or when the host never touched them, or to the
    host, it returns at once."""
    if where == "device" and populates:
        return Rule("complete", "the first prefetch of host-written managed pages to the device holds the host "
                    "until they have moved (as the H100 does)")
    return Rule("none", "a prefetch of pages the device held before (or to the host) is queued; the call returns "
                "at once")
BETWEEN_GPUS = Rule("complete", "a copy to or from another GPU's memory is timed whole, on the host: the shell waits "
                                "for both GPUs (one GPU's events would time only its own part)")
FREE_SYNCS = Rule("device", "cudaFree / cudaFreeHost synchronize the device first")
HOST_ONLY = Rule("none", "host memory only: no GPU work involved")

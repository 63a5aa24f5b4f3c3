"""Virtual memory management (`vmm …`, the driver's cuMem* calls): the same scenarios on the simulator and on the GPU
(the `cush` fixture's cuda case is @pytest.mark.gpu) — the granularity, a copy's round trip through a mapped range,
the driver's refusal of a copy before cuMemSetAccess, one handle's two mappings aliasing, and the order of unmap,
release and free — then what the simulator alone is asked (the pipe, kernels, `ls`, reset, bad input)."""

from __future__ import annotations

import pytest

MIB = 1 << 20
SETUP = "vmm reserve 4MB as va; vmm create 2MB as mem; vmm map mem va; vmm map mem va[2MB:]"


def read(cush, part: str, n: int, dtype: str = "uint8") -> list:
    """The bytes of a device range, through a pinned buffer (a reservation is device memory: show cannot read it)."""
    if not any(b["name"] == "back" for b in cush.ok("ls")["buffers"]):
        cush.ok("alloc pinned 2MB as back")
    cush.ok(f"memcpy {part} back[0:+{n}]")
    return cush.ok(f"show back[0:+{n}] dtype {dtype}")["values"]


# ------------------------------------------------------------------ both backends
def test_the_granularity_is_2_mib_minimum_and_recommended(cush):
    # H100, CUDA 13: ../shared/design/memory-model-facts.md, "Virtual memory management"
    g = cush.ok("vmm granularity")
    assert (g["minimum"], g["recommended"]) == (2 * MIB, 2 * MIB)


def test_a_mapped_accessible_range_takes_a_copy_and_gives_it_back(cush):
    cush.ok(f"{SETUP}; vmm access va rw; alloc pinned 2MB as src; fill src iota dtype uint32")
    cush.ok("memcpy src va[0:+2MB]")
    assert read(cush, "va[0:+16]", 16, "uint32") == [0, 1, 2, 3]
    assert read(cush, "va[1MB:+8]", 8, "uint32") == [MIB // 4, MIB // 4 + 1]


def test_a_copy_before_access_is_the_drivers_invalid_value(cush):
    # H100: cuMemsetD8 before cuMemSetAccess → CUDA_ERROR_INVALID_VALUE
    cush.ok(SETUP)
    assert cush.fails("memset va[0:+1MB] 7")["code"] == "CUDA_ERROR_INVALID_VALUE"
    cush.ok("alloc pinned 1MB as src")
    assert cush.fails("memcpy src va[0:+1MB]")["code"] == "CUDA_ERROR_INVALID_VALUE"
    cush.ok("vmm access va rw; memset va[0:+1MB] 7")  # the same memset, once access is given
    assert read(cush, "va[0:+4]", 4) == [7, 7, 7, 7]


def test_one_handle_at_two_addresses_is_one_set_of_bytes(cush):
    # H100: a byte written at va reads back at va + 2 MiB
    cush.ok(f"{SETUP}; vmm access va rw; memset va[0:+1] 42")
    assert read(cush, "va[2MB:+4]", 4) == [42, 0, 0, 0]
    cush.ok("alloc pinned 4KB as src; fill src 9; memcpy src va[2MB:+4KB]")
    assert read(cush, "va[0:+4]", 4) == [9, 9, 9, 9]


def test_a_kernel_writes_through_one_mapping_and_the_other_reads_it(cush):
    cush.ok(f"{SETUP}; vmm access va rw")
    cush.ok("kernel define put <<< __global__ void put(int *a) { a[threadIdx.x] = threadIdx.x + 1; } >>>")
    cush.ok("launch put va grid 1 block 4; sync")
    assert read(cush, "va[2MB:+16]", 16, "int32") == [1, 2, 3, 4]


def test_unmap_then_the_range_is_refused_and_release_keeps_the_memory_while_mapped(cush):
    cush.ok(f"{SETUP}; vmm access va rw; memset va[0:+4] 5; vmm unmap va[2MB:+2MB]")
    assert cush.fails("memset va[2MB:+4] 1")["code"] == "CUDA_ERROR_INVALID_VALUE"  # the range is a reservation again
    cush.ok("vmm release mem")  # still mapped at va: the memory lives
    assert read(cush, "va[0:+4]", 4) == [5, 5, 5, 5]
    cush.ok("vmm unmap va; vmm free va")
    assert [b["name"] for b in cush.ok("ls")["buffers"]] == ["back"]


def test_a_read_only_range_gives_its_bytes_and_refuses_a_write_and_none_refuses_both(cush):
    """The H100 (benchmarks/ref_batch.cu): with PROT_READ a copy out and a kernel's read work, a copy in and a memset
    are CUDA_ERROR_INVALID_VALUE; with PROT_NONE a copy out is refused too."""
    cush.ok(f"{SETUP}; vmm access va rw; memset va[0:+4] 6; vmm access va read")
    assert read(cush, "va[0:+4]", 4) == [6, 6, 6, 6]
    assert cush.fails("memcpy back[0:+4] va[0:+4]")["code"] == "CUDA_ERROR_INVALID_VALUE"
    assert cush.fails("memset va[0:+4] 1")["code"] == "CUDA_ERROR_INVALID_VALUE"
    cush.ok("kernel define peek <<< __global__ void peek(const int *a, int *o) { *o = *a; } >>>")
    cush.ok("alloc device 4 as o; launch peek va o grid 1 block 1; sync; memcpy o back[0:+4]")
    assert cush.ok("show back[0:+4] dtype int32")["values"] == [0x06060606]
    cush.ok("vmm access va none")
    assert cush.fails("memcpy va[0:+4] back[0:+4]")["code"] == "CUDA_ERROR_INVALID_VALUE"


def test_free_before_unmap_and_a_part_of_a_mapping_are_refused_before_the_driver(cush):
    cush.ok(SETUP)
    assert cush.fails("vmm free va")["code"] == "CUDA_ERROR_INVALID_VALUE"  # as the H100 answered cuMemAddressFree
    assert cush.fails("vmm unmap va[0:+1MB]")["code"] == "CUDA_ERROR_INVALID_VALUE"
    assert cush.fails("vmm map mem va[1MB:]")["code"] == "CUDA_ERROR_INVALID_VALUE"  # not on the granularity
    assert cush.fails("vmm map mem va")["code"] == "CUDA_ERROR_INVALID_VALUE"  # already mapped there
    assert cush.fails("free va")["code"] == "USAGE"  # cudaFree does not free a reservation


@pytest.mark.parametrize("line", ["vmm reserve 3MB", "vmm create 1MB", "vmm reserve 0"])
def test_a_size_off_the_granularity_is_invalid_value_before_the_driver(cush, line):
    assert cush.fails(line)["code"] == "CUDA_ERROR_INVALID_VALUE"


# ------------------------------------------------------------------ the simulator, and the pipe
def test_the_worker_pipe_carries_reservations_and_handles(piped):
    piped.ok(f"{SETUP}; vmm access va rw; memset va[0:+1] 3")
    assert read(piped, "va[2MB:+1]", 1) == [3]
    piped.ok("vmm unmap va; vmm release mem; vmm free va")


def test_a_kernel_faults_where_nothing_is_accessible(sim):
    sim.ok("vmm reserve 4MB as va; vmm create 2MB as mem; vmm map mem va")
    sim.ok("kernel define put <<< __global__ void put(int *a) { a[threadIdx.x] = 1; } >>>")
    sim.ok("launch put va grid 1 block 4")
    assert sim.fails("sync")["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"


def test_ls_shows_reservations_mappings_and_handles(sim):
    sim.ok(f"{SETUP}; vmm access va read; vmm create 2MB as spare; vmm release mem")
    ls = sim.ok("ls")
    assert ls["reservations"] == [{"name": "va", "size": 4 * MIB, "mappings": [
        {"offset": 0, "size": 2 * MIB, "handle": "mem", "released": True, "access": "read"},
        {"offset": 2 * MIB, "size": 2 * MIB, "handle": "mem", "released": True, "access": "read"}]}]
    assert {h["name"]: h["mapped_at"] for h in ls["vmm_handles"]} == {"spare": [], "mem": ["va[0:]", "va[2MB:]"]}
    assert ls["totals"]["device"] == 4 * MIB  # two handles' memory; the reservation's addresses are not memory


def test_read_access_refuses_a_write_and_allows_a_read(sim):
    sim.ok(f"{SETUP}; vmm access va read")
    assert sim.fails("memset va[0:+4] 1")["code"] == "CUDA_ERROR_INVALID_VALUE"
    assert read(sim, "va[0:+4]", 4) == [0, 0, 0, 0]


def test_memory_of_a_released_handle_goes_with_its_last_mapping(sim):
    sim.ok("vmm reserve 2MB as va; vmm create 2MB as mem; vmm map mem va; vmm release mem")
    assert sim.ok("ls")["totals"]["device"] == 2 * MIB
    sim.ok("vmm unmap va")
    assert sim.ok("ls")["totals"]["device"] == 0
    assert sim.backend.device_used == 0 and not sim.backend.vmm_handles
    assert sim.fails("vmm map mem va")["code"] == "USAGE"  # released: the name is gone


def test_reset_makes_reservations_handles_mappings_and_access_again(sim):
    sim.ok(f"{SETUP}; vmm access va rw; reset; memset va[0:+1] 6")
    assert read(sim, "va[2MB:+1]", 1) == [6]  # aliased again, device contents lost as ever


def test_completion_offers_handles_and_reservations(sim):
    from cudashell.language.suggest import suggest

    sim.ok("vmm reserve 4MB as va; vmm create 2MB as mem; alloc device 2MB as d")
    session = sim.shell.session
    assert "mem" in [s.text for s in suggest("vmm map ", session)]
    places = [s.text for s in suggest("vmm map mem ", session)]
    assert "va" in places and "d" not in places


def test_free_all_gives_virtual_memory_back_in_the_drivers_order(sim):
    sim.ok(f"{SETUP}; vmm access va rw; vmm create 64GB as big; alloc device 1MB as d")
    freed = sim.ok("free all")["freed"]
    assert [f["name"] for f in freed] == ["va", "d"]
    assert sim.ok("ls") == {"buffers": [], "totals": {"pageable": 0, "pinned": 0, "device": 0, "managed": 0}}
    assert sim.backend.device_used == 0 and not sim.backend.vmm_handles and not sim.backend.live


@pytest.mark.parametrize("line", ["vmm granularity on 64", "vmm create 2MB on 64"])
def test_a_gpu_that_is_not_there_is_invalid_device(cush, line):
    assert cush.fails(line)["code"] == "CUDA_ERROR_INVALID_DEVICE"


def test_the_driver_calls_a_mapped_reservation_device_memory(cush):
    # H100: cuPointerGetAttribute(MEMORY_TYPE) of a mapped, accessible VMM range → device
    cush.ok(f"{SETUP}; vmm access va rw")
    assert cush.ok("info va")["driver"]["memory_type"] == "device"

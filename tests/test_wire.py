"""The worker's pipe gives back what was sent: the fast form (marshal) only where it is exact, pickle elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from cudashell.backends import wire
from cudashell.backends.base import LaunchOptions, Timing
from cudashell.backends.kernel_report import Access, KernelReport, MemoryTraffic
from cudashell.model.kernels import BUILTINS
from cudashell.model.session import Buffer, Region


def _buf(name="p", handle=7, registered=None):
    return Buffer(name, "pinned", 4096, frozenset({"mapped"}), 0x7F0000001000, 0x7F0000001000, handle=handle,
                  registered=registered)


def test_a_copy_request_goes_fast_and_its_buffers_come_back_as_references():
    data = wire.request("memcpy", (_buf("p", 3), 0, _buf("d", 4, frozenset({"portable"})), 8, 4, None, True))
    assert data[:1] == wire.MARSHALLED
    method, args = wire.read_request(data)
    assert method == "memcpy" and args[1:2] == (0,) and args[3:] == (8, 4, None, True)
    src, dst = args[0], args[2]
    assert isinstance(src, wire.BufRef) and (src.handle, src.name, src.size, src.host_ptr) == (3, "p", 4096, 0x7F0000001000)
    assert dst.registered == frozenset({"portable"}) and dst.handle == 4


@pytest.mark.parametrize("odd", [np.arange(6, dtype=np.int32), np.int64(3), np.float32(1.5), bytearray(b"ab")])
def test_values_marshal_would_turn_into_bytes_go_by_pickle_and_keep_their_type(odd):
    data = wire.request("write", (_buf(), 0, odd))
    assert data[:1] == wire.PICKLED
    _, args = wire.read_request(data)
    assert type(args[2]) is type(odd) and np.array_equal(np.asarray(args[2]), np.asarray(odd))
    assert isinstance(args[0], wire.BufRef) and args[0].handle == 7


def test_regions_kernels_and_launch_options_cross_as_the_worker_reads_them():
    kernel = BUILTINS["increment"]
    data = wire.request("launch", (kernel, [Region(_buf(), 16, 64, False), 5], 64, (1, 1, 1), (32, 1, 1), 0, None,
                                   LaunchOptions(show_access=True)))
    _, args = wire.read_request(data)
    region = args[1][0]
    assert isinstance(region.buf, wire.BufRef) and (region.offset, region.nbytes) == (16, 64)
    assert args[0].name == "increment" and args[0].sim is None and args[1][1] == 5
    assert args[-1] == LaunchOptions(show_access=True)


def test_a_timing_reply_comes_back_equal_with_the_news_beside_it():
    t = Timing(None, 3.2e-6, False, "measured", 17, rule="as documented", basis="rule", tag=17, issued=1.25)
    news = ([{"text": "cb", "stream": "1", "at": 0.5}], {16: (0.1, 0.2)}, [18])
    data = wire.reply(("ok", t, *news))
    assert data[:1] == wire.MARSHALLED
    assert wire.read_reply(data) == ("ok", t, *news)


@pytest.mark.parametrize("value", [True, None, {3: (1.0, 2.0)}, [1, "two"], ("CUDA_ERROR_X", "why", None)])
def test_plain_replies_come_back_as_they_were(value):
    data = wire.reply(("ok", value, [], {}, []))
    assert data[:1] == wire.MARSHALLED and wire.read_reply(data) == ("ok", value, [], {}, [])


def test_a_reply_holding_an_array_keeps_it():
    arr = np.arange(10, dtype=np.uint8)
    data = wire.reply(("ok", arr, [], {}, []))
    assert data[:1] == wire.PICKLED
    status, back, *_ = wire.read_reply(data)
    assert back.dtype == np.uint8 and np.array_equal(back, arr)


def test_a_timing_with_a_kernel_report_goes_by_pickle_and_comes_back_whole():
    report = KernelReport({"device": MemoryTraffic(4, 16, 256)}, 2, 2, 0, 0, 0, 40,
                          (Access("a", 3, 4, "b1:3", True),))
    data = wire.reply(("ok", Timing(1e-3, 1e-3, True, "modeled", report=report), [], {}, []))
    assert data[:1] == wire.PICKLED
    status, back, *_ = wire.read_reply(data)
    assert back.seconds == 1e-3 and back.report == report and back.report.moved == 512

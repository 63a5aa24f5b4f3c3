"""Each backend is made of mixins by concern (memory, host work, pools, …): a method two of them define is one
silently shadowing the other (a host-work helper once hid the GPU side's `_host_timing`, and every allocation on the
GPU failed). Checked here, without a GPU: the GPU side imports without one."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("module, name", [("cudashell.backends.gpu", "GpuSide"), ("cudashell.backends.sim", "SimBackend")])
def test_no_two_mixins_of_a_backend_define_the_same_method(module, name):
    cls = getattr(importlib.import_module(module), name)
    where: dict[str, list[str]] = {}
    for mixin in cls.__mro__[1:]:
        if mixin.__module__.startswith("cudashell.backends") and mixin.__name__ != "Backend":
            for attr, value in vars(mixin).items():
                if callable(value) and not attr.startswith("__"):
                    where.setdefault(attr, []).append(mixin.__name__)
    assert {attr: mixins for attr, mixins in where.items() if len(mixins) > 1} == {}

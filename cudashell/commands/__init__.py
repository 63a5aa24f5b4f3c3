"""Command handlers: each takes (session, backend, parsed args) and returns a Result."""

from . import calibrate, copies, data, kernels, memory, meta, streams  # noqa: F401  (each registers its specs)

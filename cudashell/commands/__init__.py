"""Command handlers: each takes (session, backend, parsed args) and returns a Result."""

from . import bench, calibrate, contexts, copies, data, doctor, events, export, gpus, hold, kernels, memory, meta, recovery, streams, timeline  # noqa: F401  (each registers its specs)

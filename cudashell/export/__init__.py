"""The session as CUDA C: `explain on` and `export c`."""

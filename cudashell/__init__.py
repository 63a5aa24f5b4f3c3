"""cudashell: an interactive shell for seeing how CUDA host and device memory behave."""

__version__ = "0.1.0"

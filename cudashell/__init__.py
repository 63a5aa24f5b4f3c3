"""cudashell: an interactive shell for seeing how CUDA host and device memory behave."""

__version__ = "0.1.0"


def load_ipython_extension(ipython):
    """`%load_ext cudashell` in Jupyter or Colab (cudashell/notebook.py; needs IPython, as a notebook has)."""
    from .frontends.notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    from .frontends.notebook import unload_ipython_extension as unload

    unload(ipython)

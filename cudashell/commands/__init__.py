"""Command handlers: each takes (session, backend, parsed args) and returns a Result. Every module here is imported
(each registers its specs and its results): a new command is a new module, or a handler in one of these."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

"""jaxkit.kernels: the functional core. Pure, jit/vmap-able functions and their state
pytrees; no I/O, no printing, no imports from the rest of jaxkit.

Kernel families load on first access (``jaxkit.kernels.ica`` works after ``import
jaxkit``); ``dir(jaxkit.kernels)`` lists them."""


def _families() -> list[str]:
    """The public kernel families (modules and subpackages found on disk)."""
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def __getattr__(name: str):
    """``jaxkit.kernels.NAME``: the family NAME, imported on first access (PEP 562)."""
    if name.startswith("_") or name not in _families():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return importlib.import_module(f"{__name__}.{name}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_families()})

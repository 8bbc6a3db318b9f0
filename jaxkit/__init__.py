"""jaxkit: JAX-accelerated numerical toolkit for research code.

Submodules load on first access, so ``import jaxkit`` stays light and
``jaxkit.kernels.ica``, ``jaxkit.stats`` or ``jaxkit.pooled_lingam`` work without an import
of their own; ``dir(jaxkit)`` lists them."""

__version__ = "0.1.0"


def _submodules() -> list[str]:
    """The public subpackages and modules of jaxkit (found on disk, imported by none)."""
    import pkgutil

    found = {m.name for m in pkgutil.iter_modules(__path__)}
    found.add("kernels")  # kernels/, installed as jaxkit.kernels (a source checkout maps it)
    return sorted(n for n in found if not n.startswith("_"))


def __getattr__(name: str):
    """``jaxkit.NAME``: the submodule NAME, imported on first access (PEP 562)."""
    if name.startswith("_") or name not in _submodules():
        raise AttributeError(f"module 'jaxkit' has no attribute {name!r}")
    import importlib

    return importlib.import_module(f"{__name__}.{name}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_submodules()})

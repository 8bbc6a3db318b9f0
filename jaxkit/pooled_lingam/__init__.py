"""Pooled LiNGAM: causal discovery pooled over environments (Shimizu et al.); the
``jaxkit lingam`` commands and the ``pooled-lingam`` pipeline."""

from __future__ import annotations

import importlib

# Public names, imported on first use (``jaxkit lingam`` stays free of the pipeline's
# imports): name -> submodule.
_EXPORTS = {
    "Config": "config", "QUICK": "config", "FULL": "config",
    "TrialConfig": "data", "simulate_batch": "data",
    "METHODS": "methods", "LABELS": "methods", "gies_fit": "methods",
    "evaluate": "sweeps", "sweep": "sweeps", "run_sweep": "sweeps",
    "run_ablations": "sweeps",
    "theory_check": "theory",
    "sachs_eval": "sachs",
    "run": "pipeline",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

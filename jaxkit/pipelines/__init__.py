"""Legacy home of the pipelines, during their move into paper packages
``jaxkit/<paper>/``: the modules here still register with :func:`register`, and the
names below are re-exported from :mod:`jaxkit.registry` and :mod:`jaxkit.report`,
where they now live.
"""

from __future__ import annotations

from collections.abc import Callable

from ..registry import RunContext, names, register
from ..registry import get as _get
from ..report import PipelineResult

__all__ = ["RunContext", "PipelineResult", "register", "get", "names"]


def get(name: str) -> Callable[[RunContext], PipelineResult]:
    """The ``run`` function of pipeline ``name`` (legacy; :func:`jaxkit.registry.get`
    returns the whole entry, with its configurations)."""
    return _get(name).run

"""Pipeline registry. A pipeline is a short composition of kernels plus data and
reporting; ``jaxkit run NAME`` looks it up here, ``jaxkit run all`` runs every one.

A pipeline is a function ``run(ctx: RunContext) -> PipelineResult`` registered with
:func:`register`. It writes its figures (PNG) into ``ctx.out_dir`` and returns a
Markdown section that :func:`jaxkit.report.write_report` assembles into ``report.md``.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RunContext", "PipelineResult", "register", "get", "names"]

# Modules that define pipelines; imported lazily so `jaxkit info` stays fast.
_MODULES = ["jaxkit.pipelines.pooled_lingam", "jaxkit.pipelines.ballad",
            "jaxkit.pipelines.amgenc", "jaxkit.pipelines.actflow", "jaxkit.pipelines.tempbench"]


@dataclass
class RunContext:
    out_dir: Path
    quick: bool = False
    seed: int = 0
    mesh: Any = None  # jax.sharding.Mesh with a "data" axis, or None for the default
    progress: Any = None  # rich.progress.Progress, or None when silent
    resume: bool = True  # reuse stages a previous (killed) run of the same config saved
    reloaded: list[str] = field(default_factory=list)  # stages reloaded, not recomputed

    def stage(self, name: str, fn: Callable[[], Any], *, config: Any = None) -> Any:
        """Run one stage of a pipeline, or reload it from an earlier run.

        The result is pickled to ``out_dir/.stages/NAME-HASH.pkl`` (HASH over ``name``,
        ``config``, ``seed`` and ``quick``), written to a temporary file and renamed, so
        a file is either complete or absent. A run killed part-way restarts at its first
        unfinished stage; a changed configuration never reuses a stale result.
        """
        digest = hashlib.sha256(repr((name, config, self.seed, self.quick)).encode())
        path = Path(self.out_dir) / ".stages" / f"{name}-{digest.hexdigest()[:16]}.pkl"
        if self.resume and path.is_file():
            with path.open("rb") as fh:
                result = pickle.load(fh)
            self.reloaded.append(name)
            return result
        result = fn()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        with tmp.open("wb") as fh:
            pickle.dump(result, fh)
        tmp.replace(path)
        return result

    def track(self, iterable, description: str, total: int | None = None):
        """Iterate with a progress bar when a Progress is attached."""
        if self.progress is None:
            yield from iterable
            return
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        task = self.progress.add_task(description, total=total)
        for item in iterable:
            yield item
            self.progress.advance(task)
        self.progress.remove_task(task)


@dataclass
class PipelineResult:
    name: str
    title: str
    markdown: str  # the report section (without the title heading)
    figures: list[Path] = field(default_factory=list)  # PNGs inside out_dir
    metrics: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable numbers
    warnings: list[str] = field(default_factory=list)


_REGISTRY: dict[str, Callable[[RunContext], PipelineResult]] = {}


def register(name: str):
    def deco(fn: Callable[[RunContext], PipelineResult]):
        _REGISTRY[name] = fn
        return fn

    return deco


def _load():
    for m in _MODULES:
        importlib.import_module(m)


def names() -> list[str]:
    _load()
    return sorted(_REGISTRY)


def get(name: str) -> Callable[[RunContext], PipelineResult]:
    _load()
    if name not in _REGISTRY:
        raise KeyError(f"unknown pipeline {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]

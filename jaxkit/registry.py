"""Pipeline registry and run context. ``jaxkit run NAME`` looks pipelines up here.

A pipeline is a function ``run(ctx: RunContext) -> PipelineResult`` registered with
:func:`register`, normally with its paper's ``QUICK`` and ``FULL`` configurations::

    @register("pooled-lingam", quick=QUICK, full=FULL, title="Pooled LiNGAM")
    def run(ctx: RunContext) -> PipelineResult:
        cfg = ctx.config
        data = ctx.stage("data", lambda: make_data(ctx.key("data"), cfg))
        ...

Pipelines are found without a hand-kept list: every subpackage ``jaxkit/<paper>/``
with a ``pipeline.py`` is imported.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import pickle
import pkgutil
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import PipelineConfig
from .io import atomic_open
from .report import PipelineResult

__all__ = ["RunContext", "PipelineResult", "Entry", "register", "get", "names"]

RESERVED = ("all", "claims")  # `jaxkit run all`; the claims key of metrics.json


@functools.cache
def code_version() -> str:
    """SHA-256 (16 hex digits) over the path and bytes of every ``.py`` file of the
    ``jaxkit`` and ``jaxkit.kernels`` packages as they lie on disk (read once per
    process, a fraction of a second)."""
    import importlib.util

    h = hashlib.sha256()
    for pkg in ("jaxkit", "jaxkit.kernels"):
        spec = importlib.util.find_spec(pkg)
        for root in (spec.submodule_search_locations or []) if spec else []:
            base = Path(root)
            for f in sorted(base.rglob("*.py")):
                if "__pycache__" in f.parts:
                    continue
                h.update(f"{pkg}/{f.relative_to(base).as_posix()}".encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class RunContext:
    """What a pipeline run gets: where to write, its configuration and its randomness.

    Attributes:
        out_dir: folder for figures and the stage cache (a ``Path``; a string is
            converted).
        config: the resolved configuration (the paper's ``Config``).
        quick: the small configuration was asked for (``--quick``).
        seed: the base seed; every random stream comes from :meth:`key`.
        mesh: a ``jax.sharding.Mesh`` with a "data" axis, or None for the default.
        progress: a ``rich.progress.Progress``, or None when silent.
        resume: reuse stages a previous (killed) run of the same configuration saved.
        reloaded: the stages reloaded rather than recomputed, in order.
        resumed: one dictionary per training that restored a checkpoint or removed
            stale ones (:func:`jaxkit.training.record_resumes`), in order.
        started: ``time.perf_counter()`` when the context was made (the run's start).
        log: ``log(line)`` is told as each stage starts, ends or reloads (a worker of
            ``run all --jobs`` writes these lines to the pipeline's log); None: silent.
    """

    out_dir: Path
    config: PipelineConfig | None = None
    quick: bool = False
    seed: int = 0
    mesh: Any = None
    progress: Any = None
    resume: bool = True
    reloaded: list[str] = field(default_factory=list)
    resumed: list[dict] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter, repr=False, compare=False)
    log: Callable[[str], None] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        self.out_dir = Path(self.out_dir)

    def elapsed(self) -> float:
        """Seconds since the run started (:attr:`started`)."""
        return time.perf_counter() - self.started

    # -- randomness -------------------------------------------------------------------

    def key(self, name: str):
        """The typed JAX PRNG key of the stream ``name``:
        ``fold_in(key(seed), crc32(name))``. Distinct names give independent streams;
        the same seed and name always give the same key."""
        import jax

        return jax.random.fold_in(jax.random.key(self.seed), zlib.crc32(name.encode()))

    def rng(self, name: str):
        """A ``numpy.random.Generator`` for host-side code, seeded from the key data of
        :meth:`key` (``name``), so NumPy and JAX streams share one derivation."""
        from .stats import as_generator

        return as_generator(self.key(name))

    # -- stages -----------------------------------------------------------------------

    def stage_path(self, name: str, *, config: Any = None) -> Path:
        """The cache file of stage ``name``: ``out_dir/.stages/NAME-HASH.pkl``, HASH
        over the stage name, the whole configuration (its digest; ``quick`` when the
        context has none), the seed, ``jaxkit.__version__``, the source's digest
        (:func:`code_version`: a stage computed by other code is never reloaded) and the
        ``config`` argument of :meth:`stage`."""
        import jaxkit

        resolved = self.config.digest() if self.config is not None else ("quick", self.quick)
        key = repr((name, resolved, config, self.seed, jaxkit.__version__, code_version()))
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        return self.out_dir / ".stages" / f"{name}-{digest}.pkl"

    def code_version(self) -> str:
        """A digest of jaxkit's source (every ``.py`` file of ``jaxkit`` and
        ``jaxkit.kernels``): stages and checkpoints of other code are never reused."""
        return code_version()

    def fingerprint(self) -> str:
        """What ties this run's checkpoints to it: a digest of the configuration (its
        digest; ``quick`` when the context has none), the seed and ``jaxkit.__version__``.
        The command line installs it (:func:`jaxkit.training.use_fingerprint`) while the
        pipeline runs, so a changed configuration never resumes another's training."""
        import jaxkit

        resolved = self.config.digest() if self.config is not None else ("quick", self.quick)
        key = repr(("fit", resolved, self.seed, jaxkit.__version__, code_version()))
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def stage(self, name: str, fn: Callable[[], Any], *, config: Any = None) -> Any:
        """Run one stage of a pipeline, or reload it from an earlier run.

        The result is pickled to :meth:`stage_path` atomically (temporary file, fsync,
        rename), so a file is either complete or absent. A run killed part-way
        restarts at its first unfinished stage; a changed configuration, seed or
        jaxkit version never reuses a stale result.

        Args:
            name: the stage name (unique within the pipeline).
            fn: computes the stage's result (picklable).
            config: extra key material mixed into the cache key.

        Returns:
            ``fn()``, or the saved result when resuming.
        """
        path = self.stage_path(name, config=config)
        if self.resume and path.is_file():
            with path.open("rb") as fh:
                result = pickle.load(fh)
            self.reloaded.append(name)
            self._say(f"stage {name}: reloaded from {path.name}")
            return result
        self._say(f"stage {name}: started")
        t0 = time.perf_counter()
        result = fn()
        with atomic_open(path, "wb") as fh:
            pickle.dump(result, fh)
        self._say(f"stage {name}: done in {time.perf_counter() - t0:.1f}s")
        return result

    def _say(self, line: str) -> None:
        if self.log is not None:
            self.log(f"[{self.elapsed():7.1f}s] {line}")

    def track(self, iterable: Iterable, description: str, total: int | None = None):
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


@dataclass(frozen=True)
class Entry:
    """A registered pipeline: ``run(ctx)``, its configurations and its title."""

    name: str
    run: Callable[[RunContext], PipelineResult]
    quick: PipelineConfig | None = None
    full: PipelineConfig | None = None
    title: str | None = None
    module: str = ""

    def config(self, quick: bool) -> PipelineConfig:
        """The base configuration of a quick or full run."""
        return self.quick if quick else self.full

    def __call__(self, ctx: RunContext) -> PipelineResult:
        """Run the pipeline with its checkpoints tied to ``ctx`` (its fingerprint) and
        its resumed trainings recorded in ``ctx.resumed``."""
        from .training import record_resumes, use_fingerprint

        with use_fingerprint(ctx.fingerprint()), record_resumes(ctx.resumed):
            return self.run(ctx)


_REGISTRY: dict[str, Entry] = {}
_LOADED = False


def register(name: str, *, quick: PipelineConfig, full: PipelineConfig,
             title: str | None = None):
    """Decorator registering ``run(ctx) -> PipelineResult`` as pipeline ``name``.

    Args:
        name: the name of ``jaxkit run NAME`` (not "all" or "claims").
        quick: the configuration of ``--quick`` runs.
        full: the configuration of full runs.
        title: the report section title (default: the result's own).

    Returns:
        The decorator; it returns ``run`` unchanged.
    """
    if name in RESERVED:
        raise ValueError(f"`name` {name!r} is reserved")
    if not isinstance(quick, PipelineConfig) or not isinstance(full, PipelineConfig):
        raise ValueError(f"pipeline {name!r}: `quick` and `full` must be PipelineConfig "
                         f"instances; got {type(quick).__name__} and {type(full).__name__}")
    if type(quick) is not type(full):
        raise ValueError(f"pipeline {name!r}: `quick` and `full` must be the same Config "
                         f"class; got {type(quick).__name__} and {type(full).__name__}")

    def deco(fn: Callable[[RunContext], PipelineResult]):
        entry = Entry(name, fn, quick, full, title, getattr(fn, "__module__", "") or "")
        old = _REGISTRY.get(name)
        if old is not None and old.module != entry.module:
            raise ValueError(f"pipeline {name!r} registered twice: by {old.module} "
                             f"and {entry.module}")
        _REGISTRY[name] = entry
        return fn

    return deco


def _load() -> None:
    """Import every ``jaxkit.<pkg>.pipeline`` module."""
    global _LOADED
    if _LOADED:
        return
    import jaxkit

    mods = []
    for info in pkgutil.iter_modules(jaxkit.__path__):
        if info.ispkg and any(
                (Path(p) / info.name / "pipeline.py").is_file() for p in jaxkit.__path__):
            mods.append(f"jaxkit.{info.name}.pipeline")
    for m in mods:
        importlib.import_module(m)
    _LOADED = True


def names() -> list[str]:
    """The registered pipeline names, sorted."""
    _load()
    return sorted(_REGISTRY)


def get(name: str) -> Entry:
    """The :class:`Entry` of pipeline ``name``; KeyError listing the names otherwise."""
    _load()
    if name not in _REGISTRY:
        raise KeyError(f"unknown pipeline {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]

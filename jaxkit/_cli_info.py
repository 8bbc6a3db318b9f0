"""``jaxkit info``: what this environment is (jaxkit, JAX and the devices, the compilation
cache, the malloc tunables, thread settings, jaxkit's dependencies and optional packages)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.markup import escape

from . import malloc

# packages jaxkit uses when present, beyond its declared dependencies
OPTIONAL = {
    "pyarrow": "Parquet tables (jaxkit.io)",
    "platformdirs": "the user cache folder (non-Linux)",
    "scikit-learn": "baselines and test references",
    "hypothesis": "property tests",
    "chex": "no-retracing tests",
    "mkdocs": "the API reference site",
    "mkdocstrings": "the API reference site",
}

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "NUMBA_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "JAX_NUM_CPU_DEVICES")


def _dist_version(name: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"


def _source_requirements() -> list[str] | None:
    """The requirements in the source checkout's pyproject.toml (newer than an editable
    install's metadata), as metadata-style strings; None outside a checkout."""
    import tomllib

    path = Path(__file__).resolve().parents[1] / "pyproject.toml"
    try:
        proj = tomllib.loads(path.read_text())["project"]
    except (OSError, ValueError, KeyError):
        return None
    if proj.get("name") != "jaxkit":
        return None
    reqs = list(proj.get("dependencies", []))
    for extra, deps in proj.get("optional-dependencies", {}).items():
        reqs += [f'{d}; extra == "{extra}"' for d in deps]
    return reqs


def _dependencies() -> tuple[list[tuple[str, str]], dict[str, list[tuple[str, str]]]]:
    """(required, {extra: [...]}) from jaxkit's installed metadata: (name, version)."""
    import importlib.metadata as md
    import re

    reqs = _source_requirements()
    if reqs is None:  # an installed wheel: its metadata
        try:
            reqs = md.requires("jaxkit") or []
        except md.PackageNotFoundError:
            reqs = []
    required, extras = [], {}
    for r in reqs:
        name = re.match(r"[A-Za-z0-9_.\-]+", r).group(0)
        m = re.search(r"extra\s*==\s*[\"']([^\"']+)", r)
        row = (name, _dist_version(name))
        (extras.setdefault(m.group(1), []) if m else required).append(row)
    seen = {n.lower() for n, _ in required} | {n.lower() for v in extras.values() for n, _ in v}
    extras["optional"] = [(n, _dist_version(n)) for n in OPTIONAL if n.lower() not in seen]
    return required, extras


def _threads() -> list[tuple[str, str]]:
    import os
    import re

    rows = [("os.cpu_count", str(os.cpu_count()))]
    if hasattr(os, "sched_getaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        rows.append(("CPU affinity", f"{len(cpus)} cores"
                     + (f" ({cpus[0]}-{cpus[-1]})" if cpus and len(cpus) == cpus[-1] - cpus[0] + 1
                        else f" ({','.join(map(str, cpus[:16]))})")))
    flags = os.environ.get("XLA_FLAGS", "")
    rows.append(("XLA_FLAGS", flags or "(unset)"))
    m = re.search(r"intra_op_parallelism_threads=(\d+)", flags)
    eig = re.search(r"xla_cpu_multi_thread_eigen=(\w+)", flags)
    rows.append(("XLA intra-op threads", (m.group(1) if m else "default (all cores)")
                 + (f"; multi-thread Eigen {eig.group(1)}" if eig else "")))
    rows += [(v, os.environ.get(v, "(unset)")) for v in THREAD_VARS]
    try:
        from threadpoolctl import threadpool_info

        pools = [f"{p.get('internal_api')} {p.get('num_threads')}" for p in threadpool_info()]
        rows.append(("BLAS / OpenMP pools", ", ".join(pools) or "none loaded"))
    except Exception:  # threadpoolctl missing or a library it cannot read
        pass
    return rows


def info_table():
    """The ``jaxkit info`` table (a ``rich`` Table)."""
    import jax
    from rich.table import Table

    from . import __version__
    from .config import compile_cache_dir, compile_cache_disabled, compile_cache_in_use

    devs = jax.devices()
    t = Table(title="jaxkit environment", show_header=False)
    t.add_row("jaxkit", __version__)
    t.add_row("jax / jaxlib", f"{jax.__version__} / {jax.lib.__version__}")
    t.add_row("python", sys.version.split()[0])
    t.add_row("backend", jax.default_backend())
    t.add_row("devices", f"{len(devs)} x {devs[0].device_kind} "
                         f"({jax.local_device_count()} local)")
    kinds: dict[str, list] = {}  # "platform: kind" -> its devices
    for d in devs:
        kinds.setdefault(f"{d.platform}: {d.device_kind}", []).append(d)
    for k, group in kinds.items():
        c, mem = len(group), ""
        try:  # the memory of a device of this kind (not of the first device)
            stats = group[0].memory_stats() or {}
            if stats.get("bytes_limit"):
                mem = f", {stats['bytes_limit'] / 2**30:.1f} GiB each"
        except Exception:  # CPU devices have no memory stats
            pass
        if mem or len(kinds) > 1:
            t.add_row("", f"{c} x {k}{mem}")
    t.add_row("processes", f"{jax.process_count()} (this is {jax.process_index()})")
    t.add_row("x64", str(jax.config.jax_enable_x64))
    used = compile_cache_in_use()
    state = (f"on: {used}" if used else
             f"off (JAXKIT_NO_COMPILE_CACHE; would be {compile_cache_dir()})"
             if compile_cache_disabled() else f"off (would be {compile_cache_dir()})")
    t.add_row("compile cache", state)
    m = malloc.state()
    t.add_row("malloc", (f"GLIBC_TUNABLES={m['glibc_tunables']}"
                         + (" (set by jaxkit, jaxkit/malloc.py)" if m["set_by_jaxkit"] else "")
                         if m["glibc_tunables"] else "system default"))
    for k, v in _threads():
        t.add_row(k, v)
    required, extras = _dependencies()
    t.add_row("dependencies", ", ".join(f"{n} {v}" for n, v in required))
    for extra, rows in extras.items():
        t.add_row(escape(f"[{extra}]") if extra != "optional" else "optional",
                  ", ".join(f"{n} {v}" for n, v in rows))
    return t

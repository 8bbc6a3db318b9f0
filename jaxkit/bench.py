"""Benchmark harness shared by the kernel families (``benchmarks/bench_*.py``).

Conventions (see the benchmarking notes):

* JAX functions are compiled ahead of time, ``jax.jit(fn).lower(*args).compile()``, and
  that compile time is reported on its own, with XLA's ``cost_analysis()`` flops when the
  backend provides them;
* steady state is then timed over ``n_runs`` calls of the compiled executable after
  ``warmup`` calls, each call ended by ``jax.block_until_ready`` (async dispatch), with the
  garbage collector paused; we report the median and the 10th/90th percentiles;
* peers (NumPy, scikit-learn, ...) go through :func:`time_python`, which returns the same
  record with ``compile_s=None``;
* every result file carries :func:`environment` (versions, backend, devices, CPUs).

Only the standard library, NumPy, JAX and rich are imported here; peers are imported by
the benchmark scripts themselves.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .machine import (  # noqa: F401  (re-exported: jaxkit.bench's public API)
    ISA_LIMITS,
    _cpu_model,
    _run_timed,
    apply_isa,
    cpu_flags,
    isa_env,
    isa_extensions,
    machine_check,
    machine_line,
    machine_record,
    matmul_roofline,
    roofline_fraction,
)

__all__ = [
    "environment_line",
    "configure_cpu_devices",
    "peer_env",
    "ensure_peer_venv",
    "peer_check",
    "TimingRecord",
    "record_from_times",
    "time_jax",
    "time_python",
    "time_jax_loop",
    "machine_check",
    "environment",
    "cpu_flags",
    "isa_extensions",
    "matmul_roofline",
    "machine_record",
    "roofline_fraction",
    "ISA_LIMITS",
    "isa_env",
    "apply_isa",
    "parse_cases",
    "finish",
    "speedup",
    "print_table",
    "table_markdown",
    "write_json",
]

DEFAULT_PEERS = ("numpy", "scipy", "scikit-learn", "threadpoolctl", "jaxlib", "rich")


@dataclass
class TimingRecord:
    """Steady-state timing of one benchmarked call (all times in seconds).

    ``items`` is the number of work items one call processes (e.g. datasets in a batch);
    ``items_per_s = items / median_s``. ``compile_s`` is the ahead-of-time compile time
    (``None`` for peers); ``flops`` is XLA's cost-analysis estimate for one call, when
    known, and ``flops_per_s`` the resulting rate at the median time. ``model_flops`` is the
    FLOP count the benchmark case declares for one call (the useful arithmetic of the
    algorithm, the same figure for jaxkit and its peer), and ``model_flops_per_s`` its rate;
    :func:`roofline_fraction` relates that rate to the in-run matmul roofline.
    """

    name: str
    median_s: float
    p10_s: float
    p90_s: float
    mean_s: float
    min_s: float
    n_runs: int
    warmup: int
    items: int
    items_per_s: float
    compile_s: float | None = None
    flops: float | None = None
    flops_per_s: float | None = None
    times_s: list[float] = field(default_factory=list)
    model_flops: float | None = None
    model_flops_per_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_from_times(name: str, times, *, warmup: int = 0, items: int = 1,
                      compile_s: float | None = None, flops: float | None = None,
                      model_flops: float | None = None) -> TimingRecord:
    """A :class:`TimingRecord` from already measured per-call times (e.g. reported back
    by a peer running in another process). ``model_flops``: the case's declared FLOPs per
    call (see :class:`TimingRecord`)."""
    t = np.asarray(times, dtype=float)
    med = float(np.median(t))
    if model_flops is not None and not (math.isfinite(model_flops) and model_flops >= 0):
        raise ValueError(f"`model_flops` must be finite and >= 0; got {model_flops}")
    return TimingRecord(
        name=name,
        median_s=med,
        p10_s=float(np.percentile(t, 10)),
        p90_s=float(np.percentile(t, 90)),
        mean_s=float(np.mean(t)),
        min_s=float(np.min(t)),
        n_runs=int(t.size),
        warmup=int(warmup),
        items=int(items),
        items_per_s=items / med if med > 0 else math.inf,
        compile_s=compile_s,
        flops=flops,
        flops_per_s=(flops / med) if (flops is not None and med > 0) else None,
        times_s=[float(v) for v in t],
        model_flops=model_flops,
        model_flops_per_s=(model_flops / med) if (model_flops is not None and med > 0)
        else None,
    )


def _check_counts(n_runs: int, warmup: int) -> None:
    if n_runs < 1:
        raise ValueError(f"`n_runs` must be >= 1; got {n_runs}")
    if warmup < 0:
        raise ValueError(f"`warmup` must be >= 0; got {warmup}")


def _xla_flops(compiled) -> float | None:
    """Total flops from ``compiled.cost_analysis()`` (a dict, or a list of per-program
    dicts on older JAX); ``None`` when the backend does not report them."""
    try:
        cost = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - optional diagnostics only
        return None
    if cost is None:
        return None
    if isinstance(cost, Mapping):
        cost = [cost]
    total, seen = 0.0, False
    for c in cost:
        if c and "flops" in c:
            total += float(c["flops"])
            seen = True
    return total if seen and total >= 0 else None




def time_jax(
    fn: Callable,
    *args,
    n_runs: int = 20,
    warmup: int = 2,
    items: int = 1,
    name: str | None = None,
    model_flops: float | None = None,
) -> TimingRecord:
    """Time a JAX function: AOT compile time, then its steady state called through jax.jit.

    ``fn`` may already be jitted (with its own shardings or static arguments bound);
    ``args`` are arrays or pytrees of arrays (static configuration belongs in a
    ``functools.partial``). NumPy leaves are moved to the default device once, before
    timing, so the host-to-device copy (tens of ms for a 40 MB batch on CPU) is not
    charged to every call; arrays already on a device (e.g. sharded) are left as they are.
    Every call is ended by ``jax.block_until_ready``.
    """
    _check_counts(n_runs, warmup)
    args = jax.tree.map(lambda a: jax.device_put(a) if isinstance(a, np.ndarray | np.generic)
                        else a, args)
    jax.block_until_ready(args)
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    t0 = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    compile_s = time.perf_counter() - t0
    flops = _xla_flops(compiled)
    # Timed through ``jitted`` (jax.jit's C++ dispatch, the call user code makes) rather
    # than ``compiled``: ``Compiled.__call__`` falls back to a Python path for some pytrees
    # (equinox modules as arguments), which adds ~0.3 ms to every call. The first call
    # fills jit's own cache (a second, untimed compilation).
    jax.block_until_ready(jitted(*args))
    times = _run_timed(lambda: jitted(*args), n_runs, warmup, jax.block_until_ready)
    return record_from_times(name or getattr(fn, "__name__", "jax"), times, warmup=warmup,
                             items=items, compile_s=compile_s, flops=flops,
                             model_flops=model_flops)


def time_jax_loop(
    step: Callable,
    state,
    key,
    *args,
    n_runs: int = 20,
    warmup: int = 2,
    items: int = 1,
    name: str | None = None,
    model_flops: float | None = None,
) -> TimingRecord:
    """Time a training loop: ``state, aux = step(state, key_i, *args)``, each call taking
    the state the previous call returned, donated to it (updated in place, as a JAX
    training loop runs), with a fresh key per call (``split(key, ...)``). ``step`` is a
    plain function (jitted here with ``donate_argnums=0``); ``state`` is copied first, so
    the caller's buffers are never donated. Compile time from an AOT compile, as
    :func:`time_jax`; every call is ended by ``jax.block_until_ready``."""
    _check_counts(n_runs, warmup)
    args = jax.tree.map(lambda a: jax.device_put(a) if isinstance(a, np.ndarray | np.generic)
                        else a, args)
    state = jax.tree.map(lambda a: jnp.array(a, copy=True), state)
    jax.block_until_ready((state, args))
    jitted = jax.jit(step, donate_argnums=0)
    t0 = time.perf_counter()
    compiled = jitted.lower(state, key, *args).compile()
    compile_s = time.perf_counter() - t0
    flops = _xla_flops(compiled)
    keys = iter(list(jax.random.split(key, n_runs + warmup + 1)))  # indexed before timing
    carry = list(jitted(state, next(keys), *args))  # fills jit's cache, untimed
    jax.block_until_ready(carry)

    def call():
        carry[:] = jitted(carry[0], next(keys), *args)
        return carry

    times = _run_timed(call, n_runs, warmup, jax.block_until_ready)
    return record_from_times(name or getattr(step, "__name__", "jax"), times, warmup=warmup,
                             items=items, compile_s=compile_s, flops=flops,
                             model_flops=model_flops)


def time_python(
    fn: Callable,
    *args,
    n_runs: int = 5,
    warmup: int = 1,
    items: int = 1,
    name: str | None = None,
    model_flops: float | None = None,
) -> TimingRecord:
    """Time a plain Python callable (a NumPy / scikit-learn peer); same record as
    :func:`time_jax` with ``compile_s=None``."""
    _check_counts(n_runs, warmup)
    times = _run_timed(lambda: fn(*args), n_runs, warmup, lambda out: out)
    return record_from_times(name or getattr(fn, "__name__", "python"), times, warmup=warmup,
                             items=items, model_flops=model_flops)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment(peers: Sequence[str] = DEFAULT_PEERS, *, roofline: bool = True
                ) -> dict[str, Any]:
    """Where the numbers come from: JAX version/backend/devices, CPUs, peer versions,
    :func:`machine_check`'s GFLOP/s now (``matmul_gflops_at_start``) and the machine record
    (``machine``: ISA extensions, cores, ISA limit, float32 / bfloat16 matmul roofline; see
    :func:`machine_record`)."""
    devices = jax.devices()
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind if devices else None,
        "device_count": jax.device_count(),
        "local_device_count": jax.local_device_count(),
        "process_count": jax.process_count(),
        "jax_enable_x64": bool(jax.config.read("jax_enable_x64")),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "cpu_model": _cpu_model(),
        "peers": {p: _version(p) for p in peers},
        "matmul_gflops_at_start": round(machine_check(), 1),
        "machine": machine_record(roofline=roofline),
    }


def speedup(jax_rec, peer_rec) -> float | None:
    """``peer median / jaxkit median`` (> 1: jaxkit is faster); records or dicts."""
    if jax_rec is None or peer_rec is None:
        return None
    j, p = _get(jax_rec, "median_s"), _get(peer_rec, "median_s")
    if not j or p is None:
        return None
    return p / j


def _get(rec, key):
    if rec is None:
        return None
    if isinstance(rec, Mapping):
        return rec.get(key)
    return getattr(rec, key, None)


def _fmt_time(s) -> str:
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


TABLE_COLUMNS = ("case", "dtype", "jaxkit median", "p10", "p90", "peer", "peer median",
                 "speed-up", "roofline jaxkit / peer", "compile", "accuracy jaxkit",
                 "accuracy peer")


def _fmt_roof(rec, dtype: str) -> str:
    """``model_flops_per_s`` of a record as a percentage of the last machine record's
    roofline (bfloat16 rows against the bfloat16 roofline, others against float32)."""
    fr = roofline_fraction(_get(rec, "model_flops_per_s"),
                           dtype="bfloat16" if "bfloat16" in str(dtype) else "float32")
    return "-" if fr is None else f"{100 * fr:.0f}%"


def _table_cells(row: Mapping[str, Any]) -> list[str]:
    """One row -> the display cells. ``row`` keys: ``case``, ``dtype``, ``jax`` (record),
    ``peer`` (record or None), ``peer_name``, ``acc_jax``, ``acc_peer`` (strings), or
    ``skipped`` (a reason) instead of the records."""
    if row.get("skipped"):
        return [str(row.get("case", "")), str(row.get("dtype", "")), "skipped", "", "", "",
                "", "", "", "", str(row["skipped"]), ""]
    j, p = row.get("jax"), row.get("peer")
    su = speedup(j, p) if p is not None else None
    return [
        str(row.get("case", "")),
        str(row.get("dtype", "")),
        _fmt_time(_get(j, "median_s")),
        _fmt_time(_get(j, "p10_s")),
        _fmt_time(_get(j, "p90_s")),
        str(row.get("peer_name", "-")),
        _fmt_time(_get(p, "median_s")),
        "-" if su is None else f"{su:.2f}x",
        f"{_fmt_roof(j, row.get('dtype', ''))} / {_fmt_roof(p, row.get('dtype', ''))}",
        _fmt_time(_get(j, "compile_s")),
        str(row.get("acc_jax", "")),
        str(row.get("acc_peer", "")),
    ]


def print_table(rows: Sequence[Mapping[str, Any]], *, title: str | None = None,
                console=None):
    """Print the comparison table with rich and return the ``rich.table.Table``.

    Each row: jaxkit median/p10/p90, the peer's median, the speed-up (peer/jaxkit),
    each side's declared model FLOP/s as a percentage of the in-run matmul roofline
    (``-`` where the case declares no FLOP count), the AOT compile time and free-form
    accuracy strings for both sides. The title ends with the machine (:func:`machine_line`
    of the last :func:`machine_record`).
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    ml = machine_line()
    if ml:
        title = f"{title}\n[{ml}]" if title else f"[{ml}]"
    table = Table(title=title, show_lines=False)
    for col in TABLE_COLUMNS:
        table.add_column(col, justify="left" if col in ("case", "peer", "dtype")
                         or col.startswith("accuracy") else "right",
                         overflow="fold")
    for row in rows:
        table.add_row(*(escape(c) for c in _table_cells(row)))
    (console or Console(width=200)).print(table)
    return table


def table_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The same table as GitHub-flavoured Markdown (for RESULTS.md)."""
    from .report import markdown_table

    return markdown_table(TABLE_COLUMNS, [[c.replace("|", "\\|") for c in _table_cells(r)]
                                          for r in rows])


def _to_jsonable(obj):
    if isinstance(obj, TimingRecord):
        return obj.to_dict()
    if isinstance(obj, Mapping):
        return {str(k): _to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_to_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray | jax.Array):
        return np.asarray(obj).tolist()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path: str | os.PathLike, payload) -> Path:
    """Write ``payload`` (records, dicts, arrays, NumPy scalars) as indented JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_to_jsonable(payload), indent=2, allow_nan=False) + "\n")
    return path


def peer_env() -> dict:
    """The environment for a peer's virtual env: ours without the variables that would
    make its Python import our packages or configure JAX, and with the ``malloc`` settings
    the user started with (:func:`jaxkit.malloc.original_env`: a peer runs as its users
    run it, not under the tunables jaxkit's entry points add)."""
    from jaxkit import malloc

    return {k: v for k, v in malloc.original_env().items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "XLA_FLAGS")}


def peer_check(py: Path, check: str) -> bool:
    """Whether the Python code ``check`` runs without error under the interpreter ``py``
    (a peer venv's), with :func:`peer_env` and from an empty temporary folder: ``python
    -c`` puts its working folder first on ``sys.path``, so a check run from the
    repository root would import the repository's top-level ``kernels/`` in place of a
    peer's dependency of that name (HF ``kernels``, which ``transformers`` imports)."""
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run([str(py), "-c", check], env=peer_env(), cwd=cwd,
                              capture_output=True).returncode == 0


def ensure_peer_venv(venv: Path, specs: Sequence[str], check: str, *,
                     timeout: float = 1800) -> Path:
    """Create (once) an isolated virtual env at ``venv`` with the pip ``specs`` of a peer
    library whose pins clash with ours, and return its python. ``check`` is Python code
    that must run there (e.g. import the peer and assert its version); an existing venv
    that passes it is reused. Raises ``RuntimeError`` with the reason when the venv
    cannot be made (e.g. offline)."""
    venv = Path(venv)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    env = peer_env()
    if py.exists() and peer_check(py, check):
        return py
    steps = [[sys.executable, "-m", "venv", "--clear", str(venv)],
             [str(py), "-m", "pip", "install", "--quiet", *specs]]
    print(f"creating {venv} with {' '.join(specs)} (one-off) ...", flush=True)
    for cmd in steps:
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RuntimeError(f"`{' '.join(cmd[:4])} ...` failed: {e}") from e
        if p.returncode != 0:
            tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"`{' '.join(cmd[:4])} ...` exited {p.returncode}: "
                               + " | ".join(tail))
    if not peer_check(py, check):
        raise RuntimeError(f"{venv} was created but the peer check fails there: {check}")
    return py


def configure_cpu_devices(*, x64: bool = True) -> int:
    """Ask XLA for one CPU device per core (so a batch can be sharded over the cores) and
    enable float64. Returns the core count. The device count only takes effect if JAX has
    not initialised its backend yet (``import jax`` alone does not)."""
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    ncpu = max(1, int(ncpu or 1))
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = (flags + f" --xla_force_host_platform_device_count={ncpu}"
                                   ).strip()
    jax.config.update("jax_enable_x64", x64)
    return ncpu


def environment_line(env: Mapping[str, Any], wall_s: float) -> str:
    """One closing line for a benchmark: JAX, devices, CPU, the load average and
    :func:`machine_check`'s GFLOP/s at the start (from :func:`environment`) and now, and
    the wall time. Also stores the end values in ``env`` (``loadavg_at_end``,
    ``matmul_gflops_at_end``) for the JSON written afterwards."""
    load_end = os.getloadavg() if hasattr(os, "getloadavg") else None
    gflops_end = round(machine_check(), 1)
    if isinstance(env, dict):
        env["loadavg_at_end"] = load_end
        env["matmul_gflops_at_end"] = gflops_end
    return (f"environment: jax {env['jax']} {env['backend']} x{env['device_count']} devices, "
            f"{env['cpu_count']} CPUs ({env['cpu_model']}); load average at start "
            f"{env.get('loadavg_at_start')}, at end {load_end} (other work on the host skews "
            f"times); float32 matmul check {env.get('matmul_gflops_at_start')} GFLOP/s at "
            f"start, {gflops_end} at end; machine: {machine_line(env.get('machine')) or '-'}; "
            f"wall {wall_s:.0f} s")


def int_list(s: str) -> list[int]:
    """``argparse`` type for comma lists of integers: ``"100,200"`` -> ``[100, 200]``."""
    return [int(v) for v in s.split(",") if v.strip()]


def benchmark_parser(prog: str, doc: str | None, cases: Sequence[str], *, quick_help: str,
                     peers_help: str | None = None) -> argparse.ArgumentParser:
    """The options every ``benchmarks/bench_*.py`` shares: ``--json FILE``, ``--quick``,
    ``--only`` (a comma list out of ``cases``) and, when ``peers_help`` is given,
    ``--no-peers``. Scripts add their own options to the returned parser."""
    p = argparse.ArgumentParser(prog=prog, description=(doc or prog).splitlines()[0])
    p.add_argument("--json", metavar="FILE", help="write all numbers + environment here")
    p.add_argument("--quick", action="store_true", help=quick_help)
    if peers_help is not None:
        p.add_argument("--no-peers", action="store_true", help=peers_help)
    p.add_argument("--only", default=",".join(cases),
                   help=f"comma-separated cases out of {','.join(cases)}")
    p.add_argument("--isa", choices=sorted(ISA_LIMITS), default=None, action=_IsaAction,
                   help="limit both sides to this instruction set (XLA's "
                        "--xla_cpu_max_isa; ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, "
                        "MKL_ENABLE_INSTRUCTIONS, OPENBLAS_CORETYPE for the peers' "
                        "subprocesses); e.g. --isa avx2 emulates an AVX2 machine")
    return p


class _IsaAction(argparse.Action):
    """Applies ``--isa`` as soon as it is parsed (before any JAX computation)."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            apply_isa(values)
        except RuntimeError as e:
            parser.error(str(e))
        setattr(namespace, self.dest, values)


def parse_cases(parser: argparse.ArgumentParser, only: str, cases: Sequence[str]) -> list[str]:
    """The ``--only`` comma list as a list, each checked against ``cases``
    (``parser.error`` naming the unknown ones)."""
    chosen = [c.strip() for c in only.split(",") if c.strip()]
    bad = sorted(set(chosen) - set(cases))
    if bad:
        parser.error(f"unknown case(s) {bad}; choose from {list(cases)}")
    return chosen


def finish(rows: Sequence[Mapping[str, Any]], env: dict, t0: float, *, title: str,
           json_path: str | None = None, payload: Mapping[str, Any] | None = None,
           after_table: Callable[[], Any] | None = None,
           markdown: bool = True) -> Path | None:
    """The tail every benchmark script shares: :func:`print_table` of ``rows`` under
    ``title``, then ``after_table()`` (e.g. a summary), the :func:`environment_line` (wall
    time since ``t0``, a ``time.perf_counter()``) and, with ``json_path``, the JSON file:
    ``environment`` then ``payload``'s entries and (``markdown``) ``table_markdown``.
    Returns the JSON path or ``None``."""
    print_table(rows, title=title)
    if after_table is not None:
        after_table()
    print(environment_line(env, time.perf_counter() - t0))
    if not json_path:
        return None
    body: dict[str, Any] = {"environment": env, **(payload or {})}
    if markdown:
        body.setdefault("table_markdown", table_markdown(rows))
    path = write_json(json_path, body)
    print(f"wrote {path}")
    return path

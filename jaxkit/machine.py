"""The machine a benchmark ran on: CPU model, instruction-set extensions (from
``/proc/cpuinfo``), core count, an ISA limit in force, and a float32 / bfloat16 matmul
roofline measured in the same run; ``--isa`` emulation of a smaller instruction set for
jaxkit (XLA's ``--xla_cpu_max_isa``) and the peers (PyTorch, oneDNN, MKL, OpenBLAS
variables). Used by :mod:`jaxkit.bench`, which re-exports these names."""

from __future__ import annotations

import gc
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import malloc
from jaxkit.kernels._xla_cpu import cpu_flags


def _run_timed(call: Callable[[], Any], n_runs: int, warmup: int, sync) -> list[float]:
    for _ in range(warmup):
        sync(call())
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        times = []
        for _ in range(n_runs):
            t0 = time.perf_counter()
            sync(call())
            times.append(time.perf_counter() - t0)
    finally:
        if gc_was_enabled:
            gc.enable()
    return times



def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


_CHECK_SHAPE = (1024, 256, 50)  # rows, width, matmuls per call


@jax.jit
def _check_chain(x, w):
    return jax.lax.fori_loop(0, _CHECK_SHAPE[2], lambda i, h: jnp.tanh(h @ w), x)


def machine_check(n_runs: int = 5) -> float:
    """Float32 GFLOP/s of a fixed chain of ``(1024, 256) @ (256, 256)`` matmuls on the
    default device (median of ``n_runs`` calls after one warm-up; about 0.1 s on 2 CPU
    cores). Recorded at the start and the end of a benchmark: the same machine can run at
    different speeds over time (a virtual machine shares its host), and this shows in which
    state the numbers were taken."""
    rows, width, n = _CHECK_SHAPE
    x = jnp.full((rows, width), 0.5, jnp.float32)
    w = jnp.eye(width, dtype=jnp.float32) * 0.9
    times = _run_timed(lambda: _check_chain(x, w), n_runs, 1, jax.block_until_ready)
    return 2.0 * rows * width * width * n / float(np.median(times)) / 1e9


# ---------------------------------------------------------------- the machine record

# /proc/cpuinfo flags -> the extensions a benchmark's speed depends on
_ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512dq",
              "avx512cd", "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi", "avx512_vbmi2",
              "avx512_vnni", "avx512_bitalg", "avx512_vpopcntdq", "avx512_bf16",
              "avx512_fp16", "avx512_vp2intersect", "amx_tile", "amx_bf16", "amx_int8",
              "amx_fp16", "avx10_1", "avx10_2")

# --isa NAME -> (XLA's --xla_cpu_max_isa value, the peers' variables)
ISA_LIMITS: dict[str, dict[str, str]] = {
    "avx2": {"xla": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell"},
    "avx512": {"xla": "AVX512", "ATEN_CPU_CAPABILITY": "avx512",
               "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16", "MKL_ENABLE_INSTRUCTIONS": "AVX512",
               "OPENBLAS_CORETYPE": "SkylakeX"},
}


def isa_extensions(flags: set[str] | Sequence[str]) -> dict[str, Any]:
    """Summarise CPU flags: ``level`` (the widest vector ISA: ``"AMX"``, ``"AVX-512"``,
    ``"AVX2"``, ``"AVX"``, ``"SSE"`` or ``"unknown"``), ``avx512`` (the AVX-512 subsets
    present, e.g. ``["f", "bw", "bf16", ...]``), ``amx`` (the AMX subsets), ``avx2``,
    ``fma``, ``avx_vnni`` (booleans) and ``flags`` (the recorded subset of the flags)."""
    flags = set(flags)
    avx512 = sorted(f[len("avx512"):].lstrip("_") for f in flags if f.startswith("avx512"))
    amx = sorted(f[len("amx_"):] for f in flags if f.startswith("amx_"))
    if amx:
        level = "AMX"
    elif "avx512f" in flags:
        level = "AVX-512"
    elif "avx2" in flags:
        level = "AVX2"
    elif "avx" in flags:
        level = "AVX"
    elif any(f.startswith("sse") for f in flags):
        level = "SSE"
    else:
        level = "unknown"
    return {"level": level, "avx2": "avx2" in flags, "fma": "fma" in flags,
            "avx_vnni": "avx_vnni" in flags, "avx512": avx512, "amx": amx,
            "flags": sorted(f for f in flags if f in _ISA_FLAGS)}


def _roofline_fn(n: int, reps: int, dtype):
    def chain(x, w):  # reps dependent (n, n) @ (n, n) products, float32 accumulation
        body = lambda i, h: jnp.dot(h, w, preferred_element_type=jnp.float32  # noqa: E731
                                    ).astype(dtype)
        return jax.lax.fori_loop(0, reps, body, x)
    return jax.jit(chain)


def matmul_roofline(dtype="float32", *, n: int = 768, reps: int = 4,
                    n_runs: int = 3) -> float:
    """GFLOP/s of ``reps`` chained ``(n, n) @ (n, n)`` products in ``dtype`` (bfloat16:
    bfloat16 operands, float32 accumulation) on the default device, the median of
    ``n_runs`` calls after a warm-up: the in-run roofline a benchmark's hot kernels are
    measured against (the matmul rate this machine, under its current load and ISA limit,
    reaches). ``2 n^3 reps`` FLOPs per call; about 0.1 s per call at the defaults on 2
    cores."""
    if n < 1 or reps < 1 or n_runs < 1:
        raise ValueError(f"`n`, `reps`, `n_runs` must be >= 1; got {n}, {reps}, {n_runs}")
    dt = jnp.dtype(dtype)
    x = jnp.full((n, n), 0.5, dt)
    w = (jnp.eye(n, dtype=jnp.float32) * 0.99).astype(dt)
    f = _roofline_fn(n, reps, dt)
    times = _run_timed(lambda: f(x, w), n_runs, 1, jax.block_until_ready)
    return 2.0 * n ** 3 * reps / float(np.median(times)) / 1e9


def _xla_max_isa(flags: str | None = None) -> str | None:
    flags = os.environ.get("XLA_FLAGS", "") if flags is None else flags
    for tok in flags.split():
        if tok.startswith("--xla_cpu_max_isa="):
            return tok.split("=", 1)[1]
    return None


_LAST_MACHINE: dict[str, Any] = {}


def machine_record(cpuinfo: str | None = None, *, roofline: bool = True,
                   roofline_n: int = 768) -> dict[str, Any]:
    """What a benchmark's speed depends on: the CPU model, its instruction-set extensions
    (:func:`isa_extensions` of ``/proc/cpuinfo``, or of the text ``cpuinfo``), the core
    count (usable: the CPU affinity), the ISA limit in effect (``--isa``:
    ``XLA_FLAGS=--xla_cpu_max_isa=...`` for XLA and the peers' variables, see
    :data:`ISA_LIMITS`; ``effective_level`` is the ISA the run emulates) and, unless
    ``roofline=False``, the in-run matmul roofline ``roofline_gflops`` (float32 and
    bfloat16, :func:`matmul_roofline`). The last record is kept for :func:`print_table`'s
    header and roofline column."""
    ext = isa_extensions(cpu_flags(cpuinfo))
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count()
    limit = _xla_max_isa()
    peer_vars = {k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                                            "MKL_ENABLE_INSTRUCTIONS", "OPENBLAS_CORETYPE")
                 if k in os.environ}
    effective = ext["level"]
    if limit and limit.upper().startswith("AVX2"):
        effective = "AVX2 (emulated: XLA max ISA AVX2)"
    elif limit:
        effective = f"{ext['level']} (XLA max ISA {limit})"
    rec: dict[str, Any] = {
        "cpu_model": _cpu_model() if cpuinfo is None else _model_from(cpuinfo),
        "isa": ext,
        "cores": cores,
        "cpu_count": os.cpu_count(),
        "xla_max_isa": limit,
        "peer_isa_env": peer_vars,
        "effective_level": effective,
        "roofline_gflops": None,
        "malloc": malloc.state(),
    }
    if roofline:
        rec["roofline_gflops"] = {
            "float32": round(matmul_roofline("float32", n=roofline_n), 1),
            "bfloat16": round(matmul_roofline("bfloat16", n=roofline_n), 1),
            "shape": f"4 chained ({roofline_n}, {roofline_n}) @ ({roofline_n}, {roofline_n})",
        }
    _LAST_MACHINE.clear()
    _LAST_MACHINE.update(rec)
    return rec


def _model_from(cpuinfo: str) -> str | None:
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


def roofline_fraction(flops_per_s: float | None, machine: Mapping[str, Any] | None = None,
                      dtype: str = "float32") -> float | None:
    """Achieved FLOP/s as a fraction of the machine's ``dtype`` matmul roofline (from
    ``machine``, default the last :func:`machine_record`); ``None`` when either is
    unknown."""
    m = _LAST_MACHINE if machine is None else machine
    roof = (m.get("roofline_gflops") or {}).get(dtype) if m else None
    if flops_per_s is None or not roof:
        return None
    return float(flops_per_s) / (float(roof) * 1e9)


def machine_line(machine: Mapping[str, Any] | None = None) -> str:
    """One line for a table header: ISA level and AVX-512 / AMX subsets, cores, the ISA
    limit and the roofline."""
    m = _LAST_MACHINE if machine is None else machine
    if not m:
        return ""
    isa = m["isa"]
    parts = [m.get("effective_level") or isa["level"]]
    if isa["avx512"]:
        parts.append("avx512 " + ",".join(isa["avx512"]))
    if isa["amx"]:
        parts.append("amx " + ",".join(isa["amx"]))
    parts.append(f"{m.get('cores')} cores")
    roof = m.get("roofline_gflops")
    if roof:
        parts.append(f"roofline f32 {roof['float32']:.0f} / bf16 {roof['bfloat16']:.0f} "
                     "GFLOP/s")
    return "; ".join(parts)


def isa_env(isa: str, xla_flags: str = "") -> dict[str, str]:
    """The environment variables that limit both sides to ``isa`` (a key of
    :data:`ISA_LIMITS`, e.g. ``"avx2"``): ``XLA_FLAGS`` (``xla_flags`` plus
    ``--xla_cpu_max_isa=...``, replacing an earlier limit) for jaxkit and
    ``ATEN_CPU_CAPABILITY``, ``ONEDNN_MAX_CPU_ISA``, ``MKL_ENABLE_INSTRUCTIONS``,
    ``OPENBLAS_CORETYPE`` for PyTorch / NumPy peers (their subprocesses inherit them)."""
    if isa not in ISA_LIMITS:
        raise ValueError(f"`isa` must be one of {sorted(ISA_LIMITS)}; got {isa!r}")
    lim = ISA_LIMITS[isa]
    flags = [t for t in xla_flags.split() if not t.startswith("--xla_cpu_max_isa=")]
    env = {"XLA_FLAGS": " ".join([*flags, f"--xla_cpu_max_isa={lim['xla']}"])}
    env.update({k: v for k, v in lim.items() if k != "xla"})
    return env


def apply_isa(isa: str | None) -> dict[str, str]:
    """Set :func:`isa_env` in this process's environment (``None``: no change). XLA reads
    the limit when its CPU backend starts, so this must run before the first JAX
    computation; raises ``RuntimeError`` otherwise."""
    if isa is None:
        return {}
    from jax._src import xla_bridge

    env = isa_env(isa, os.environ.get("XLA_FLAGS", ""))
    if xla_bridge.backends_are_initialized() and _xla_max_isa() != ISA_LIMITS[isa]["xla"]:
        raise RuntimeError("`--isa` must be applied before JAX starts its backend (run the "
                           "benchmark as its own process)")
    os.environ.update(env)
    return env

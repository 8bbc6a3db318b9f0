"""Where a compiled program's time goes: per-operation self times from a ``jax.profiler``
trace, each with the matrix-product FLOPs of that operation read from the compiled HLO.

XLA runs a program as a sequence of operations (fusions, library calls such as YNNPACK
products, copies), each traced under its HLO instruction name. :func:`op_profile` traces
``n_calls`` calls, keeps the trace events named after instructions of the given HLO
module and divides their durations by ``n_calls``. :func:`hlo_dot_flops` gives every
instruction's product FLOPs: ``2 * prod(output dims) * prod(contracted dims)`` for a
``dot``, summed over the dots of the computation a fusion calls (convolutions and
elementwise work count 0). An operation's rate is its FLOPs over its time, so the
products' average rate, the time outside products and the slowest groups of products can
be set against a matrix-product roofline (``jaxkit.bench.matmul_roofline``).

Caveats: a library call that splits its work over a thread pool is traced as one event on
the calling thread, so on several cores the traced time of an operation is its wall time,
not its CPU time; pin the process to one core (``taskset -c 0``) for a CPU-time
breakdown. The profiler adds a few percent. Run nothing else during the trace: events of
another program whose instruction names coincide would be counted.
"""

from __future__ import annotations

import collections
import contextlib
import glob
import gzip
import json
import math
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OpTime", "hlo_dot_flops", "op_profile", "summarize", "summary_markdown"]

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(\w+)\[([\d,]*)\]")
_HEADER = re.compile(r"^(?:ENTRY\s+)?%([\w.\-]+)\s*\(.*\{\s*$")
_OPERANDS = re.compile(r"\bdot\(([^)]*)\)")
_NAME = re.compile(r"%([\w.\-]+)")
_LHS_CONTRACT = re.compile(r"lhs_contracting_dims=\{([\d,]*)\}")
_CALLS = re.compile(r"calls=%([\w.\-]+)")
_OP_NAME = re.compile(r'op_name="([^"]*)"')


@dataclass(frozen=True)
class OpTime:
    """One operation of the program: ``name`` (HLO instruction), ``group`` (the name
    without its numeric suffix, e.g. ``ynn_fusion``), traced seconds per call, product
    FLOPs per call, output ``shape`` and the JAX ``op_name`` it came from."""

    name: str
    group: str
    seconds: float
    flops: float
    shape: tuple[int, ...]
    op_name: str


def _computations(hlo_text: str) -> dict[str, list[str]]:
    comps: dict[str, list[str]] = {}
    cur = None
    for line in hlo_text.splitlines():
        m = _HEADER.match(line)
        if m and not line.startswith(" "):
            cur = m.group(1)
            comps[cur] = []
        elif cur is not None and line.strip() == "}":
            cur = None
        elif cur is not None:
            comps[cur].append(line)
    return comps


def hlo_dot_flops(hlo_text: str) -> dict[str, tuple[float, tuple[int, ...], str]]:
    """``{instruction: (product FLOPs, output shape, op_name)}`` for every array-shaped
    instruction of an HLO module's text (``compiled.as_text()``); a fusion's FLOPs are
    those of the dots in the computations it calls (module docstring).

    Args:
      hlo_text: the module's text.

    Returns:
      The map above; instructions with a tuple shape are left out.
    """
    comps = _computations(hlo_text)
    shapes: dict[str, dict[str, tuple[int, ...]]] = {}
    for c, lines in comps.items():
        shapes[c] = {}
        for line in lines:
            m = _INSTR.match(line)
            if m:
                shapes[c][m.group(1)] = tuple(int(x) for x in m.group(3).split(",") if x)

    memo: dict[str, float] = {}

    def line_flops(c: str, line: str) -> float:
        if " dot(" in line:
            m, ops = _INSTR.match(line), _OPERANDS.search(line)
            dims = _LHS_CONTRACT.search(line)
            if not (m and ops and dims):
                return 0.0
            lhs = _NAME.findall(ops.group(1))[0]
            lshape = shapes[c].get(lhs)
            if lshape is None:
                return 0.0
            k = math.prod(lshape[int(i)] for i in dims.group(1).split(",") if i)
            out = tuple(int(x) for x in m.group(3).split(",") if x)
            return 2.0 * math.prod(out) * k
        called = _CALLS.search(line)
        return comp_flops(called.group(1)) if called else 0.0

    def comp_flops(c: str) -> float:
        if c not in memo:
            memo[c] = 0.0  # guards recursion
            memo[c] = sum(line_flops(c, line) for line in comps.get(c, ()))
        return memo[c]

    out = {}
    for c, lines in comps.items():
        for line in lines:
            m = _INSTR.match(line)
            if m:
                op = _OP_NAME.search(line)
                out[m.group(1)] = (line_flops(c, line), shapes[c][m.group(1)],
                                   op.group(1) if op else "")
    return out


def op_profile(call: Callable[[], object], hlo_text: str, *, n_calls: int = 2,
               trace_dir: str | Path | None = None) -> list[OpTime]:
    """Trace ``n_calls`` calls of ``call`` (one call of the compiled program, blocking
    until its result is ready) and return its operations, slowest first.

    Args:
      call: runs the program once and blocks (``jax.block_until_ready``).
      hlo_text: the program's compiled HLO (``jitted.lower(...).compile().as_text()``).
      n_calls: calls traced (>= 1); times are per call.
      trace_dir: where the trace is written (default: a temporary folder, removed).

    Returns:
      One :class:`OpTime` per operation that ran.
    """
    import jax

    if not (isinstance(n_calls, int) and n_calls >= 1):
        raise ValueError(f"`n_calls` must be an int >= 1; got {n_calls!r}")
    info = hlo_dot_flops(hlo_text)
    folder = (tempfile.TemporaryDirectory() if trace_dir is None
              else contextlib.nullcontext(str(trace_dir)))
    with folder as where:
        d = Path(where)
        with jax.profiler.trace(str(d), create_perfetto_trace=True):
            for _ in range(n_calls):
                call()
        files = sorted(glob.glob(str(d / "**" / "*.trace.json.gz"), recursive=True))
        if not files:
            raise RuntimeError(f"jax.profiler wrote no perfetto trace under {d}")
        with gzip.open(files[-1]) as f:
            events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    secs: collections.Counter = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("name") in info:
            secs[e["name"]] += e.get("dur", 0) / 1e6 / n_calls
    rows = [OpTime(n, re.sub(r"\.\d+$", "", n), s, info[n][0], info[n][1], info[n][2])
            for n, s in secs.items()]
    return sorted(rows, key=lambda r: -r.seconds)


def summarize(rows: list[OpTime], *, top: int = 12) -> dict:
    """Totals and the slowest groups of :func:`op_profile`'s rows.

    Returns ``{"traced_s", "product_s", "product_gflop", "product_gflops", "other_s",
    "products": [...], "others": [...]}``; products are grouped by (group, output
    shape, op_name), the rest by (group, op_name), ``top`` of each, slowest first, each
    ``{"what", "n", "seconds", "gflop", "gflops"}`` (rates for products only).
    """
    prod = [r for r in rows if r.flops > 0]
    other = [r for r in rows if r.flops <= 0]

    def groups(rs, key):
        g: dict = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for r in rs:
            v = g[key(r)]
            v[0] += 1
            v[1] += r.seconds
            v[2] += r.flops
        out = [dict(what=k, n=n, seconds=s, gflop=f / 1e9,
                    gflops=(f / s / 1e9) if (f > 0 and s > 0) else None)
               for k, (n, s, f) in g.items()]
        return sorted(out, key=lambda d: -d["seconds"])[:top]

    p_s = sum(r.seconds for r in prod)
    p_f = sum(r.flops for r in prod)
    return dict(traced_s=p_s + sum(r.seconds for r in other), product_s=p_s,
                product_gflop=p_f / 1e9, product_gflops=p_f / p_s / 1e9 if p_s else None,
                other_s=sum(r.seconds for r in other),
                products=groups(prod, lambda r: f"{r.group} {list(r.shape)} {r.op_name}"),
                others=groups(other, lambda r: f"{r.group} {r.op_name}"))


def summary_markdown(s: dict) -> str:
    """:func:`summarize`'s result as a markdown table, totals first."""
    rate = "-" if s["product_gflops"] is None else f"{s['product_gflops']:.1f}"
    lines = [f"traced {s['traced_s']:.3f} s per call: products {s['product_s']:.3f} s "
             f"({s['product_gflop']:.3g} GFLOP, {rate} GFLOP/s), other "
             f"{s['other_s']:.3f} s", "",
             "| operations | n | s per call | GFLOP | GFLOP/s |", "|---|---|---|---|---|"]
    for d in s["products"] + s["others"]:
        r = "-" if d["gflops"] is None else f"{d['gflops']:.1f}"
        g = f"{d['gflop']:.3g}" if d["gflop"] else "-"
        lines.append(f"| `{d['what']}` | {d['n']} | {d['seconds']:.4f} | {g} | {r} |")
    return "\n".join(lines)

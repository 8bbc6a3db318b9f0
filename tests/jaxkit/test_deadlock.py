"""The batched-LAPACK hang on XLA:CPU (issue 18 item 2; kernels/_batching.py).

Batched LAPACK calls under ``vmap`` hang jaxlib 0.10.2's CPU custom calls at random on a
2-thread intra-op pool. The reproducer runs in a subprocess pinned to 2 cores
(``taskset`` where it exists: XLA sizes its pool from the CPU affinity); a run counts as
hung when it uses no CPU for 20 s. The mitigation, members mapped one at a time so each
LAPACK call is unbatched (``map_over_batch``'s CPU default), must always finish.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time

import jax
import numpy as np
import pytest
from jaxkit.kernels import lingam

# S members, each with M independent n x n Cholesky solves, mapped B at a time
# (lax.map with batch_size; B=1: every call unbatched).
REPRO = textwrap.dedent("""
    import sys, jax, jax.numpy as jnp
    from jax.scipy.linalg import solve
    S, n, M, B = (int(a) for a in sys.argv[1:5])

    def one(a):
        return sum(solve(a + i * jnp.eye(n), jnp.ones(n), assume_a="pos").sum()
                   for i in range(M))

    f = jax.jit(lambda A: jax.lax.map(one, A, batch_size=B))
    k = jax.random.normal(jax.random.key(0), (S, n, n))
    a = k @ jnp.swapaxes(k, -1, -2) / n + jnp.eye(n)
    for i in range(10):
        jax.block_until_ready(f(a + i))
    print("finished")
""")


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / 100
    except (OSError, IndexError, ValueError):
        return None


def _run(batch: int, limit: float = 300.0) -> str:
    """"finished", or "hung" (no CPU used for 20 s), or "slow" (over ``limit`` s)."""
    cmd = [sys.executable, "-c", REPRO, "8", "160", "8", str(batch)]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0,1", *cmd]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin",
                              "HOME": "/tmp"})
    start, last, still = time.time(), None, 0.0
    try:
        while p.poll() is None:
            time.sleep(5)
            cpu = _cpu_seconds(p.pid)
            still = still + 5 if cpu is not None and cpu == last else 0.0
            last = cpu
            if still >= 20:
                return "hung"
            if time.time() - start > limit:
                return "slow"
        out, err = p.communicate()
        assert p.returncode == 0, err[-2000:]
        return "finished" if "finished" in out else "no output"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.slow
def test_reproducer_and_mitigation():
    """Batched members may hang (recorded, not required: a larger pool may not); the same
    program with unbatched LAPACK calls finishes every time."""
    batched = [_run(4) for _ in range(3)]
    print("members vmapped 4 at a time:", batched)
    assert all(r in ("finished", "hung", "slow") for r in batched)
    unbatched = [_run(1) for _ in range(3)]
    assert unbatched == ["finished"] * 3, unbatched


@pytest.fixture(scope="module")
def pairs():
    k1, k2 = jax.random.split(jax.random.key(0))
    x = jax.random.normal(k1, (3, 24))
    return x, x ** 2 + 0.3 * jax.random.normal(k2, (3, 24))


def test_kernel_measure_keeps_cholesky_unbatched_under_vmap(pairs):
    """On CPU ``vmap(kernel_mutual_information)`` maps the pairs one at a time: every
    Cholesky factorisation in the compiled program is of one 24 x 24 matrix, inside a
    loop, and the values are the per-pair ones."""
    x, y = pairs
    f = jax.jit(jax.vmap(lingam.kernel_mutual_information))
    hlo = f.lower(x, y).as_text()
    chol = [ln for ln in hlo.splitlines() if "potrf" in ln and "custom_call" in ln]
    assert chol and all("3x24x24" not in ln for ln in chol), chol
    assert "stablehlo.while" in hlo
    want = np.array([float(lingam.kernel_mutual_information(a, b))
                     for a, b in zip(x, y, strict=True)])
    np.testing.assert_allclose(f(x, y), want, rtol=1e-5)
    # the batched rule, asked for, batches the factorisation
    g = jax.jit(jax.vmap(lambda a, b: lingam.kernel_mutual_information(
        a, b, sequential_vmap=False)))
    assert any("3x24x24" in ln for ln in g.lower(x, y).as_text().splitlines()
               if "potrf" in ln)
    np.testing.assert_allclose(g(x, y), want, rtol=1e-4)

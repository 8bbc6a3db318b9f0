"""benchmarks/bench_universal_circuits.py: the jaxkit step's loss equals a float64 NumPy
evaluation of the same equations, and a tiny run of the script without the peer (both
slow: each compiles a full training step)."""

import json

import jax
import numpy as np
import pytest


@pytest.fixture(scope="module")
def bu(load_benchmark):
    return load_benchmark("universal_circuits")


def numpy_loss(params, models, sites, k):
    """The torch peer's loss, in float64 NumPy (the equations of peers/torch_uc.py)."""
    P = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
    D, F = P.b_enc.shape
    B = sites[0][0].shape[0]
    pre = np.tile(P.b_enc[None], (B, 1, 1))
    for m, dm in enumerate(((0, 2), (0, 1, 2))):
        for j, s in enumerate(dm):
            pre[:, s] += sites[m][j] @ P.W_enc[m][j]
    z = np.zeros_like(pre)
    idx = np.argsort(-pre, axis=-1, kind="stable")[..., :k]
    np.put_along_axis(z, idx, np.maximum(np.take_along_axis(pre, idx, -1), 0), -1)

    def rest(mp, t, h):
        for W, b in mp[t:-1]:
            h = np.maximum(h @ W + b, 0)
        return h @ mp[-1][0] + mp[-1][1]

    def lsm(a):
        a = a - a.max(-1, keepdims=True)
        return a - np.log(np.exp(a).sum(-1, keepdims=True))

    fvus, kls = [], []
    for m, dm in enumerate(((0, 2), (0, 1, 2))):
        ref = lsm(rest(models[m], len(dm), sites[m][len(dm)]))
        for j, dep in enumerate(dm):
            y = P.b_dec[m][j] + sum(z[:, s] @ P.W_dec[m][j][s] for s in range(dep + 1))
            t = sites[m][j + 1]
            fvus.append(((t - y) ** 2).sum() / ((t - t.mean(0)) ** 2).sum())
            kls.append((np.exp(ref) * (ref - lsm(rest(models[m], j + 1, y)))).sum(-1).mean())
    return np.mean(fvus) + np.mean(kls)


@pytest.mark.slow
def test_step_loss_matches_numpy_reference(bu):
    cfg = dict(bu.shapes(True), d_sites=((8, 8, 8), (8, 12, 8, 4)), n_latents=16, k=3,
               batch=32)
    step, state, sites_t, mp, spec, params, models, sites = bu.jax_step(cfg)
    _, info = jax.jit(step)(jax.random.key(0), state, (sites_t, mp))
    ref = numpy_loss(params, [[(W.astype(np.float64), b.astype(np.float64)) for W, b in m]
                              for m in models], [[h.astype(np.float64) for h in s]
                                                 for s in sites], 3)
    np.testing.assert_allclose(float(info.loss), ref, rtol=2e-4)
    assert np.isfinite(float(info.grad_norm)) and bool(info.finite)


@pytest.mark.slow
def test_quick_run_without_peers(bu, tmp_path):
    out = tmp_path / "b.json"
    assert bu.main(["--quick", "--no-peers", "--runs", "1", "--warmup", "1", "--json",
                    str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["results"]["step"]["jaxkit"]["images_per_s"] > 0
    assert d["results"]["attribution"]["images"] == 32

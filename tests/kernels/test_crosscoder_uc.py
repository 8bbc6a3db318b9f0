"""Universal-circuit kernels (cross-model CLT, replacement model, attribution, pruning,
surgery): shapes and masks against a direct loop, attribution against finite
differences, pruning against brute force, surgery on a toy pair with a known answer,
and every bad input."""

import gc
import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels import crosscoder as cc
from jaxkit.kernels.checks import clear_errors

D_SITES = ((4, 5, 6), (4, 3, 7, 2))  # a 2-layer and a 3-layer model
DEPTHS = ((0, 2), (0, 1, 2))
F, B, C = 6, 7, 3


@pytest.fixture(autouse=True, scope="module")
def _gc_frozen_while_the_module_runs():
    """Python's cyclic collector skips the objects alive at the module's start (the
    imported libraries, none of them garbage) instead of walking them all at every full
    collection."""
    gc.freeze()
    yield
    gc.unfreeze()


def toy_rest(spec, heads):
    """rest(mp, t, h): a tanh chain of random maps from site t, then the linear head."""
    def mk(m):
        def rest(mp, t, h):
            for j in range(t, len(spec.depth_map[m])):
                h = jnp.tanh(h @ mp["layers"][j])
            return h @ mp["head"]
        return rest
    return tuple(mk(m) for m in range(spec.n_models))


def toy_models(rng, spec):
    """Random tanh chains with linear heads (NumPy draws: nothing to compile)."""
    return tuple({"layers": [jnp.asarray(rng.standard_normal((ds[j], ds[j + 1])) / ds[j] ** .5)
                             for j in range(len(ds) - 1)],
                  "head": jnp.asarray(rng.standard_normal((ds[-1], C)))}
                 for ds in spec.d_sites)


@pytest.fixture(scope="module")
def setup():
    """float64 transcoder (uc_init, one compiled call) and toy models; the sites are the
    toy models' own activations on random inputs (for the replacement identities),
    computed in NumPy."""
    spec = cc.uc_spec(D_SITES, DEPTHS, F)
    params = jax.jit(lambda k: jax.tree.map(lambda a: a.astype(jnp.float64),
                                            cc.uc_init(k, spec)))(jax.random.key(3))
    params = params._replace(b_enc=params.b_enc + 0.3)
    rng = np.random.default_rng(4)
    mps = toy_models(rng, spec)
    sites = tuple(tuple(jnp.asarray(h) for h in _chain(mp, rng.standard_normal((B, ds[0])),
                                                       len(ds) - 1))
                  for mp, ds in zip(mps, spec.d_sites, strict=True))
    return spec, params, sites, toy_rest(spec, None), mps


def _chain(mp, x, L):
    hs = [np.asarray(x)]
    for j in range(L):
        hs.append(np.tanh(hs[-1] @ np.asarray(mp["layers"][j])))
    return hs


def loop_forward(params, sites, spec, k):
    """The cross-model CLT written as nested loops over images, depths, layers (NumPy)."""
    P = jax.tree.map(np.asarray, params)
    S = [[np.asarray(h) for h in row] for row in sites]
    n = S[0][0].shape[0]
    z = np.zeros((n, spec.n_depths, spec.n_latents))
    for b in range(n):
        for s in range(spec.n_depths):
            pre = P.b_enc[s].copy()
            for m, dm in enumerate(spec.depth_map):
                for j, dep in enumerate(dm):
                    if dep == s:
                        pre += S[m][j][b] @ P.W_enc[m][j]
            keep = np.argsort(-pre, kind="stable")[:k]
            z[b, s, keep] = np.maximum(pre[keep], 0)
    yhat = []
    for m, dm in enumerate(spec.depth_map):
        row = []
        for j, dep in enumerate(dm):
            y = np.tile(P.b_dec[m][j], (n, 1))
            for s in range(dep + 1):
                y += z[:, s] @ P.W_dec[m][j][s]
            row.append(y)
        yhat.append(row)
    return z, yhat


def test_forward_matches_direct_loop_and_masks(setup):
    spec, params, sites, _, _ = setup
    z, yhat = cc.uc_forward(params, sites, spec, k=2)
    z_ref, y_ref = loop_forward(params, sites, spec, 2)
    np.testing.assert_allclose(z, z_ref, rtol=1e-12, atol=1e-12)
    for m in range(2):
        for j in range(len(DEPTHS[m])):
            np.testing.assert_allclose(yhat[m][j], y_ref[m][j], rtol=1e-10, atol=1e-12)
    assert z.shape == (B, 3, F) and yhat[1][1].shape == (B, 7)
    assert np.all((np.asarray(z) != 0).sum(-1) <= 2)
    # decoders from deeper sources into a shallower layer are masked: changing them
    # (model 0's layer 0 at depth 0 from depths 1, 2) changes nothing
    Wd = list(map(list, params.W_dec))
    Wd[0][0] = Wd[0][0].at[1:].add(100.0)
    p2 = params._replace(W_dec=tuple(map(tuple, Wd)))
    np.testing.assert_array_equal(cc.uc_forward(p2, sites, spec, k=2)[1][0][0], yhat[0][0])


def test_depth_zero_latents_write_every_layer_and_read_both_models(setup):
    spec, params, sites, _, _ = setup
    # a depth-0 latent's code depends on both models' inputs
    z = cc.uc_encode(params, sites, spec, activation="relu")
    s2 = (sites[0], (sites[1][0] * 0,) + sites[1][1:])
    z2 = cc.uc_encode(params, s2, spec, activation="relu")
    assert not np.allclose(z[:, 0], z2[:, 0]) and np.allclose(z[:, 1], z2[:, 1])
    z1 = cc.uc_encode(params, sites, spec, activation="relu", read=jnp.array([1.0, 0.0]))
    np.testing.assert_allclose(z1[:, 0], z2[:, 0], rtol=1e-12)


def test_single_model_masks_read_and_write_one_model(setup):
    """read = write = e_0 and live off at depth 1 (model 0 has no layer there): the loss
    is model 0's mean FVU and KL, no gradient reaches model 1's encoders, and the
    masked depth's latents never fire."""
    spec, params, sites, rest, mps = setup
    read = jnp.array([1.0, 0.0])
    live = jnp.ones((3, F)).at[1].set(0.0)
    kw = dict(rest_fns=rest, model_params=mps, k=2, fidelity_coef=1.0)

    @jax.jit
    def everything(p):
        def loss(p):
            return cc.uc_loss(p, sites, spec, read=read, write=read, live=live, **kw)

        (val, out), g = jax.value_and_grad(loss, has_aux=True)(p)
        z = cc.uc_encode(p, sites, spec, k=2, read=read) * live
        full = cc.uc_loss(p, sites, spec, **kw)[1]
        A = cc.uc_attribution(p, sites, spec, rest, mps, k=2, read=read, live=live)
        return val, out, g, z, full, A

    val, out, g, z, full, A = everything(params)
    # fvu is per site in spec.layers() order: model 0's two layers come first
    np.testing.assert_allclose(out.recon, np.mean(np.asarray(out.fvu)[:2]), rtol=1e-12)
    np.testing.assert_allclose(val, out.recon + out.kl, rtol=1e-12)
    assert all(np.all(np.asarray(w) == 0) for w in g.W_enc[1])
    assert all(np.all(np.asarray(w) == 0) for w in g.W_dec[1])
    assert np.any(np.asarray(g.W_enc[0][0]) != 0)
    assert np.all(np.asarray(z[:, 1]) == 0)
    np.testing.assert_allclose(out.l0, np.mean((np.asarray(z) != 0).sum((1, 2))), rtol=1e-12)
    # the defaults are the plain cross-model loss
    np.testing.assert_allclose(full.recon, np.mean(np.asarray(full.fvu)), rtol=1e-12)
    # attribution at g = live: a latent that does not exist has none
    assert np.all(np.asarray(A)[:, :, :, 1] == 0) and np.any(np.asarray(A) != 0)


def test_jit_equals_eager_and_no_retrace(setup):
    spec, params, sites, rest, mps = setup

    @jax.jit
    @chex.assert_max_traces(n=1)
    def loss(p, s):
        return cc.uc_loss(p, s, spec, rest_fns=rest, model_params=mps, k=2,
                          fidelity_coef=1.0, sparsity_coef=0.1)[0]

    eager = cc.uc_loss(params, sites, spec, rest_fns=rest, model_params=mps, k=2,
                       fidelity_coef=1.0, sparsity_coef=0.1)[0]
    np.testing.assert_allclose(loss(params, sites), eager, rtol=1e-12)
    loss(params, jax.tree.map(lambda a: np.asarray(a) * 1.5, sites))  # same shapes: no trace
    # the fidelity term reaches the decoders of intermediate sites through the rest of the
    # model (model 1's layer 0 output feeds layers 1, 2)
    def kl_only(p):
        return cc.uc_loss(p, sites, spec, rest_fns=rest, model_params=mps, k=2,
                          fidelity_coef=1.0)[1].kl
    g = jax.jit(jax.grad(kl_only))(params)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(g))
    assert np.abs(np.asarray(g.W_dec[1][0])).max() > 0


def test_vmap_over_images_equals_batch_topk_per_image(setup):
    spec, params, sites, _, _ = setup

    @jax.jit  # one compilation instead of op-by-op dispatch
    def codes(p, s):
        one = jax.vmap(lambda r: cc.uc_encode(p, jax.tree.map(lambda a: a[None], r), spec,
                                              k=2, check=False)[0])(s)
        return (one, cc.uc_encode(p, s, spec, k=2),
                cc.uc_encode(p, s, spec, activation="batch_topk", k=2),
                cc.uc_encode(p, s, spec, activation="jumprelu"))

    one, z, zb, zj = codes(params, sites)
    np.testing.assert_allclose(one, z, rtol=1e-12)
    assert np.all((np.asarray(zb) != 0).sum((0, 2)) <= 2 * B)
    assert np.all((np.asarray(zj) == 0) | (np.asarray(zj) > 0.03 - 1e-9))


def test_replacement_with_errors_reproduces_the_models(setup):
    spec, params, sites, rest, mps = setup

    @jax.jit  # one compilation instead of op-by-op dispatch
    def both(p, s):
        err = cc.uc_errors(p, s, spec, k=2)
        return (cc.uc_replacement(p, s, spec, rest, mps, errors=err, k=2)[1],
                cc.uc_replacement(p, s, spec, rest, mps, k=2, gate=jnp.zeros((3, F)))[1])

    logits, l0 = both(params, sites)
    for m in range(2):
        np.testing.assert_allclose(logits[m], sites[m][-1] @ mps[m]["head"], rtol=1e-10,
                                   atol=1e-10)
    # without errors and with every latent gated off, the logits are the bias path only
    np.testing.assert_allclose(l0[0], jnp.broadcast_to(params.b_dec[0][1] @ mps[0]["head"],
                                                       (B, C)), rtol=1e-10)


@pytest.mark.parametrize("activation,k", [("relu", None), ("topk", 3)])
def test_attribution_matches_finite_differences(setup, activation, k):
    spec, params, sites, rest, mps = setup

    @jax.jit  # one compilation (eager, the vmapped Jacobians dispatch op by op)
    def attribution_and_errors(p, s):
        return (cc.uc_attribution(p, s, spec, rest, mps, activation=activation, k=k),
                cc.uc_errors(p, s, spec, activation=activation, k=k))

    A, err = attribution_and_errors(params, sites)
    assert A.shape == (B, 2, C, 3, F)
    eps = 1e-6

    @jax.jit
    def logits_at(g, one, e1):
        _, lg = cc.uc_replacement(params, one, spec, rest, mps, gate=g, errors=e1,
                                  activation=activation, k=k, check=False)
        return jnp.stack([cc.centred(x)[0] for x in lg])

    A, np_sites, np_err = (jax.tree.map(np.asarray, t) for t in (A, sites, err))
    for b, s, f in [(0, 0, 1), (3, 1, 2), (5, 2, 0), (6, 0, 4)]:
        one = jax.tree.map(lambda a, b=b: a[b:b + 1], np_sites)  # NumPy slices: no compiles
        e1 = jax.tree.map(lambda a, b=b: a[b:b + 1], np_err)
        g = np.ones((3, F))
        g[s, f] += eps
        up = np.asarray(logits_at(g, one, e1))
        g[s, f] -= 2 * eps
        fd = (up - np.asarray(logits_at(g, one, e1))) / (2 * eps)
        np.testing.assert_allclose(A[b, :, :, s, f], fd, rtol=1e-5, atol=1e-7)
    # class attribution averages over each class's images
    labels = np.array([0, 1, 2, 0, 1, 2, 0])
    S = jax.jit(cc.class_attribution)(A, labels)
    np.testing.assert_allclose(S[1, 0], A[[0, 3, 6], 1, 0].mean(0), rtol=1e-12)


def _brute_prefix(scores, acc, sizes, frac, full):
    order = np.argsort(-scores, kind="stable")
    for n in sizes:
        g = np.zeros_like(scores)
        g[order[:n]] = 1
        if acc(g) >= frac * full - 1e-6:
            return n, True
    return sizes[-1], False


@jax.jit  # one compiled sweep per N (the fraction is traced, checked at run time)
def _additive_sweep(w, frac, full):
    return cc.prune_sweep(w, lambda g: jnp.minimum(1.0, jnp.sum(g * w)),
                          jnp.arange(1, w.shape[0] + 1), frac, full)


@settings(max_examples=8, deadline=None)
@given(w=st.lists(st.floats(0.0, 1.0), min_size=6, max_size=8), frac=st.floats(0.3, 1.0))
def test_pruning_matches_brute_force(w, frac):
    """Additive accuracy: the sweep finds the brute-force smallest prefix, and (with the
    scores equal to the weights) the smallest subset of all 2^N subsets."""
    w = np.asarray(w)
    N = len(w)
    full = min(1.0, w.sum())

    def acc(g):
        return min(1.0, float(np.sum(g * w)))

    sizes = np.arange(1, N + 1)
    res = _additive_sweep(jnp.asarray(w), frac, full)
    n_ref, found_ref = _brute_prefix(w, acc, sizes, frac, full)
    assert int(res.size) == n_ref and bool(res.found) == found_ref
    assert int(np.asarray(res.gate).sum()) == n_ref
    rank = np.argsort(np.argsort(-w, kind="stable"))  # every prefix's accuracy
    np.testing.assert_allclose(res.accuracies, [acc(rank < n) for n in sizes], atol=1e-12)
    best = min((len(c) for r in range(N + 1) for c in itertools.combinations(range(N), r)
                if min(1.0, w[list(c)].sum()) >= frac * full - 1e-6), default=None)
    if best is not None and best >= 1:
        assert int(res.size) == best
    with pytest.raises(ValueError, match=r"`frac` must lie in \(0, 1\]"), clear_errors():
        jax.block_until_ready(_additive_sweep(jnp.asarray(w), 1.5, full))  # traced: run time


def test_prune_sweep_grid_and_jit():
    scores = jnp.array([0.1, 0.9, 0.5, 0.7, 0.2])

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(sc, full):
        return cc.prune_sweep(sc, lambda g: jnp.sum(g * sc) / jnp.sum(sc), jnp.array([1, 2, 4]),
                              0.8, full)

    r = run(scores, jnp.asarray(1.0))
    assert int(r.size) == 4 and bool(r.found)  # 1.6/2.4 < 0.8 <= 2.3/2.4
    np.testing.assert_array_equal(r.gate, [0, 1, 1, 1, 1][:0] or [0, 1, 1, 1, 1])
    r = run(scores, jnp.asarray(2.0))  # unreachable: the largest prefix, found False
    assert int(r.size) == 4 and not bool(r.found)


def test_surgery_on_a_rotated_toy_pair_copies_the_giver():
    """Receiver's last layer = Q (giver's), its other classes' head = the giver's (in
    Q coordinates), class c's column garbage: after surgery it predicts exactly what
    the giver predicts, on any input."""
    d, Fl, c = 5, 8, 2
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    spec = cc.uc_spec(((d, d), (d, d)), ((0,), (0,)), Fl)
    Wd_g = rng.normal(size=(1, Fl, d))
    bd_g = rng.normal(size=d)
    params = cc.UCParams(W_enc=((np.zeros((d, Fl)),), (np.zeros((d, Fl)),)),
                         b_enc=np.zeros((1, Fl)), log_threshold=np.zeros((1, Fl)),
                         W_dec=((Wd_g,), (Wd_g @ Q.T,)), b_dec=((bd_g,), (Q @ bd_g,)))
    Wg, bg = rng.normal(size=(d, 10)), rng.normal(size=10)
    Wr, br = Q @ Wg, bg.copy()
    Wr[:, c], br[c] = rng.normal(size=d) * 5, -3.0
    head = jax.jit(cc.surgery_head, static_argnums=(1, 2, 3, 4, 10))  # one compilation
    W2, b2 = head(params, spec, 0, 1, c, np.ones((1, Fl)), Wg, bg, Wr, br, 1e-9)
    np.testing.assert_allclose(np.delete(np.asarray(W2), c, 1), np.delete(Wr, c, 1))
    h = rng.normal(size=(50, d))
    np.testing.assert_allclose((h @ Q.T) @ np.asarray(W2) + np.asarray(b2), h @ Wg + bg,
                               rtol=1e-6, atol=1e-6)
    assert ((h @ Q.T) @ Wr + br).argmax(1).tolist() != (h @ Wg + bg).argmax(1).tolist()


def test_universal_latents_and_matching():
    spec = cc.uc_spec(((2, 3), (2, 3)), ((0,), (0,)), 3)
    W0 = np.array([[[1.0, 0, 0], [1, 0, 0], [0, 0, 0]]])  # latent 2 writes to model 1 only
    W1 = np.array([[[1.0, 0, 0], [0, 0, 0], [1, 0, 0]]])  # latent 1 writes to model 0 only
    z = np.zeros((2, 3))
    p = cc.UCParams(((z,), (z,)), np.zeros((1, 3)), np.zeros((1, 3)), ((W0,), (W1,)),
                    ((np.zeros(3),), (np.zeros(3),)))
    univ = jax.jit(cc.universal_latents, static_argnums=(1, 2))  # one compilation each
    np.testing.assert_array_equal(univ(p, spec, 0.1), [[True, False, False]])
    match = jax.jit(cc.match_by_decoder)
    ea, eb = np.eye(3), np.array([[0.0, 1, 0], [1, 0, 0]])
    sa, sb = match(ea, eb, np.ones(3), np.ones(2), 0.9)
    np.testing.assert_array_equal(sa, [1, 1, 0])
    np.testing.assert_array_equal(sb, [1, 1])
    sa, _ = match(ea, eb, np.ones(3), np.array([1.0, 0]), 0.9)
    np.testing.assert_array_equal(sa, [0, 1, 0])


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("dm,msg", [(((1, 0), (0, 1, 2)), "strictly increasing"),
                                    (((0, 0), (0, 1, 2)), "strictly increasing"),
                                    (((0, 3), (0, 1, 3)), "without a layer"),
                                    (((0,), (0, 1, 2)), "each of the model's 2 layers"),
                                    (((0, 2), (-1, 1, 2)), r"lie in \[0")])
def test_bad_depth_maps(dm, msg):
    with pytest.raises(ValueError, match=rf"`depth_map`.*{msg}"):
        cc.uc_spec(D_SITES, dm, F)


def test_bad_sites_and_labels(setup):
    spec, params, sites, rest, mps = setup
    short = (sites[0], (sites[1][0][:5],) + sites[1][1:])
    with pytest.raises(ValueError, match=r"`sites`\[1\]\[0\] has 5 activations but"):
        cc.uc_encode(params, short, spec, k=2)
    bad = np.array(sites[1][0])
    bad[2, 1] = np.nan
    nan = (sites[0], (bad,) + sites[1][1:])
    with pytest.raises(ValueError, match=r"`sites\[1\]\[0\]` contains NaN"):
        cc.uc_encode(params, nan, spec, k=2)
    with pytest.raises(ValueError, match=r"`sites\[1\]\[0\]` contains NaN"), clear_errors():
        jax.jit(lambda s: cc.uc_encode(params, s, spec, k=2))(nan).block_until_ready()
    with pytest.raises(ValueError, match=r"`sites`\[0\]\[1\] must have shape \(B, 5\)"):
        cc.uc_encode(params, ((sites[0][0], sites[0][0], sites[0][2]), sites[1]), spec, k=2)
    with pytest.raises(ValueError, match="`k`"):
        cc.uc_encode(params, sites, spec, k=F + 1)
    A = np.zeros((4, 2, C, 3, F))  # NumPy inputs: the checks' own operations compile only
    with pytest.raises(ValueError, match="`labels`: some class has no image"):
        cc.class_attribution(A, np.array([0, 1, 1, 0]))
    with pytest.raises(ValueError, match="`gate` is an empty circuit"):
        cc.check_circuit(np.zeros((3, F)))
    with pytest.raises(ValueError, match="`gate` is an empty circuit"):
        cc.surgery_head(params, spec, 0, 1, 0, np.zeros((3, F)), np.zeros((6, C)),
                        np.zeros(C), np.zeros((2, C)), np.zeros(C))
    with pytest.raises(ValueError, match="`sizes` must increase"):
        cc.prune_sweep(np.ones(4), jnp.sum, np.array([2, 1]), 0.5, 1.0)
    with pytest.raises(ValueError, match="`rest_fns`"):
        cc.uc_loss(params, sites, spec, k=2, fidelity_coef=1.0)


# ------------------------------------------------------------------------ faithfulness


def test_output_fidelity_and_circuit_faithfulness_by_hand():
    """Top-1 agreement, KL and KL fidelity against a uniform (constant) baseline on a hand
    case; the normalised circuit faithfulness; jit = eager and vmap = loop."""
    P = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    Q = np.array([[0.5, 0.4, 0.1], [0.4, 0.3, 0.3]])
    p, q, a = np.log(P), np.log(Q) + 5.0, np.zeros(3)  # logits: shifts change nothing
    kl = np.array([(P[b] * np.log(P[b] / Q[b])).sum() for b in range(2)])
    kl_u = np.log(3) + (P * np.log(P)).sum(1)  # KL(p || uniform) = log C - H(p)

    @jax.jit  # every case in one compilation
    def cases(p, q, a):
        return dict(
            f=cc.output_fidelity(p, q, a), w=cc.output_fidelity(p, q, a, np.array([1.0, 0])),
            same=cc.output_fidelity(p, p, a), none=cc.output_fidelity(p, a, a),
            flat=cc.output_fidelity(jnp.broadcast_to(a, p.shape), q, a),
            swap=cc.output_fidelity(q, p, a),
            vm=jax.vmap(cc.output_fidelity)(jnp.stack([p, q]), jnp.stack([q, p]),
                                            jnp.stack([a, a])),
            cf=cc.circuit_faithfulness(jnp.array([0.5, 2.0, 1.0, -1.0]),
                                       jnp.array([1.0, 3.0, 1.0, 2.0]),
                                       jnp.array([0.0, 1.0, 1.0, 0.0])))

    r = cases(p, q, a)
    f = r["f"]
    for x, y in zip(cc.output_fidelity(p, q, a), f, strict=True):  # eager = jit
        np.testing.assert_allclose(x, y, rtol=1e-12)
    # argmax p = (0, 2), argmax q = (0, 0), the constant baseline predicts class 0
    np.testing.assert_allclose([f.agreement, f.baseline_agreement], [0.5, 0.5])
    np.testing.assert_allclose(f.kl, kl.mean(), rtol=1e-10)
    np.testing.assert_allclose(f.baseline_kl, kl_u.mean(), rtol=1e-10)
    np.testing.assert_allclose(f.kl_fidelity, 1 - kl.mean() / kl_u.mean(), rtol=1e-10)
    assert bool(f.valid)
    w = r["w"]  # row 0 only
    np.testing.assert_allclose([w.agreement, w.kl, w.kl_fidelity],
                               [1.0, kl[0], 1 - kl[0] / kl_u[0]], rtol=1e-10)
    same = r["same"]
    np.testing.assert_allclose([same.agreement, same.kl, same.kl_fidelity], [1, 0, 1],
                               atol=1e-12)
    np.testing.assert_allclose(r["none"].kl_fidelity, 0.0, atol=1e-12)  # replacement = baseline
    assert not bool(r["flat"].valid) and float(r["flat"].kl_fidelity) == 0.0  # model = baseline
    for x, y0, y1 in zip(r["vm"], f, r["swap"], strict=True):  # vmap = loop
        np.testing.assert_allclose(x, [y0, y1], rtol=1e-12)
    F, valid = r["cf"]
    np.testing.assert_allclose(F, [0.5, 0.5, 0.0, -0.5])
    np.testing.assert_array_equal(valid, [True, True, False, True])

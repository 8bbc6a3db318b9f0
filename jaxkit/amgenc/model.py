"""A small conditional flow model for periodic amorphous cells (AMGenC generator).

State of one cell, padded to a fixed ``N`` with a boolean ``mask``:

* ``x`` (N, 3): fractional coordinates in [0, 1)^3 of a cubic box of edge ``box`` (A);
* ``h`` (N, K): element channels, one per species of :func:`species_charges` (the
  glass elements, one oxidation state each, so species index = element index).

Denoiser (:class:`Denoiser`): a periodic, E(3)-invariant message-passing network. The
graph joins each atom to its ``k`` nearest real atoms under the minimum-image convention
(Cartesian distances = fractional displacement x box); edges carry a Gaussian radial
basis times a cosine envelope that vanishes at ``r_cut``. Node features start from the
element channels, a time embedding and the normalised condition vector; a few residual
message-passing layers follow. Outputs: the predicted position noise
``eps_i = sum_j w_ij d_ij / k`` (``w_ij`` an invariant scalar of the edge, ``d_ij`` the
minimum-image displacement in A), equivariant under rotations/reflections of the
displacements and invariant under translations and atom permutations, and an invariant
per-atom element-channel velocity.

Training (:func:`loss`): positions are noised on the torus by a wrapped Gaussian of
log-linear scale :func:`sigma` (12 A, i.e. uniform, down to 0.02 A) and the network
predicts the minimum-image noise (denoising score matching, the DiffCSP form of the
wrapped-normal score), at times uniform on [0, 1] or, for a share ``focus_share`` of
the cells, in the band of levels where atoms separate (:data:`FOCUS_BAND`,
:func:`noise_time`); each cell first gets a random symmetry of the cubic cell
(:func:`augment`). Elements: flow matching on the linear path from Gaussian noise or
(for a share ``balanced_share`` of the cells) :func:`jaxkit.kernels.charge.balanced_noise`
to the one-hot species (:func:`jaxkit.kernels.flow.linear_path`), on the same time.

Sampling (:func:`sample`): the reverse-time SDE of the position noise (predictor, and
optionally Langevin corrector steps) together with Euler steps of the element flow, one
``lax.scan``, and optionally the AMGenC soft projection at every step: the row-wise
simplex projection ``s`` of the predicted endpoint channels is moved towards the
charge-balanced simplex (:func:`jaxkit.kernels.charge.relax`) and the element velocity
corrected accordingly (or, ``soft_target="state"``, the current channels are shifted).
:func:`final_species` turns the final channels into species by argmax or by the exact
discrete projection (:func:`jaxkit.kernels.charge.project_discrete` with cost
``-log p``).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.amgenc import glass
from jaxkit.data.oxidation import oxidation_table, species_name
from jaxkit.kernels import charge, flow

__all__ = [
    "SIGMA_MAX",
    "SIGMA_MIN",
    "FOCUS_BAND",
    "Batch",
    "Denoiser",
    "augment",
    "final_species",
    "loss",
    "neighbours",
    "noise_time",
    "sample",
    "sigma",
    "sigma_time",
    "species_charges",
    "wrap",
]


def species_charges() -> tuple[list[str], np.ndarray]:
    """Species names and integer charges of the glass vocabulary
    (:data:`jaxkit.amgenc.glass.ELEMENTS`: one species per element, iron as Fe2+ and
    Fe3+), checked against the shipped oxidation-state table."""
    table = oxidation_table()
    names, q = [], []
    for e, sym in zip(glass.ELEMENTS, glass.SYMBOLS, strict=True):
        z = glass.OXIDATION_STATES[e]
        if z not in table.get(sym, ()):
            raise RuntimeError(f"oxidation table lacks {sym} {z:+d} (glass species {e})")
        names.append(species_name(sym, z))
        q.append(z)
    return names, np.asarray(q, np.int64)


class Batch(NamedTuple):
    """Padded cells: ``x`` (B, N, 3) fractional, ``h`` (B, N, K) one-hot species,
    ``mask`` (B, N) bool, ``box`` (B,) A, ``cond`` (B, C) normalised targets."""

    x: jax.Array
    h: jax.Array
    mask: jax.Array
    box: jax.Array
    cond: jax.Array


def wrap(d: jax.Array) -> jax.Array:
    """Minimum-image fractional displacement in [-0.5, 0.5)."""
    return d - jnp.round(d)


def neighbours(x: jax.Array, box, mask: jax.Array, k: int):
    """The ``k`` nearest real atoms of every atom under minimum image.

    Returns ``idx`` (N, k) int, ``disp`` (N, k, 3) Cartesian displacements
    ``x_j - x_i`` (A), ``valid`` (N, k) bool (False for padding atoms and when fewer than
    ``k`` other real atoms exist)."""
    n = x.shape[0]
    k = min(int(k), n - 1)
    # squared distances one Cartesian component at a time: (N, N) planes, not an
    # (N, N, 3) array with a short last axis (several times faster on CPU)
    r2 = 0.0
    if jnp.ndim(box) == 0:  # cubic: one edge
        for c in range(3):
            dc = wrap(x[None, :, c] - x[:, None, c])
            r2 = r2 + dc * dc
        r2 = r2 * jnp.square(box)
    else:  # orthorhombic: (3,) edges
        for c in range(3):
            dc = wrap(x[None, :, c] - x[:, None, c]) * box[c]
            r2 = r2 + dc * dc
    ok = mask[:, None] & mask[None, :] & ~jnp.eye(n, dtype=bool)
    neg, idx = jax.lax.top_k(jnp.where(ok, -r2, -jnp.inf), k)
    valid = jnp.isfinite(neg) & mask[:, None]
    disp = wrap(x[idx] - x[:, None, :]) * box
    return idx, jnp.where(valid[..., None], disp, 0.0), valid


def _time_features(t) -> jax.Array:
    f = jnp.arange(1, 5, dtype=jnp.float32) * jnp.pi
    return jnp.concatenate([jnp.stack([t]), jnp.sin(f * t), jnp.cos(f * t)])


def _edge_mlp(mlp: eqx.nn.MLP, s: jax.Array, idx: jax.Array, rbf: jax.Array) -> jax.Array:
    """``mlp`` (one hidden layer, SiLU) applied to every edge's ``[s_i, s_j, rbf_ij]``
    (N, k, .), with the first layer split by blocks: ``W [s_i, s_j, rbf] + b = (W_a s_i
    + b) + (W_b s)_j + W_c rbf``, the node blocks computed once per atom instead of once
    per edge (the same function, a third of the first layer's work)."""
    first, last = mlp.layers[0], mlp.layers[-1]
    hid = s.shape[1]
    w = first.weight
    z = (s @ w[:, :hid].T + first.bias)[:, None, :] + (s @ w[:, hid:2 * hid].T)[idx] \
        + rbf @ w[:, 2 * hid:].T
    z = jax.nn.silu(z) @ last.weight.T
    if last.bias is not None:
        z = z + last.bias
    return z


class Denoiser(eqx.Module):
    """Periodic E(3)-invariant graph network; see the module docstring."""

    embed: eqx.nn.MLP
    messages: tuple
    updates: tuple
    coord_head: eqx.nn.MLP
    elem_head: eqx.nn.MLP
    n_species: int = eqx.field(static=True)
    n_rbf: int = eqx.field(static=True)
    k_nbr: int = eqx.field(static=True)
    r_cut: float = eqx.field(static=True)

    def __init__(self, n_species: int, n_cond: int, *, key, hidden: int = 48,
                 layers: int = 2, n_rbf: int = 16, k_nbr: int = 12, r_cut: float = 6.0):
        keys = jax.random.split(key, 3 + 2 * layers)
        self.n_species, self.n_rbf, self.k_nbr, self.r_cut = n_species, n_rbf, k_nbr, r_cut
        n_time = 9
        self.embed = eqx.nn.MLP(n_species + n_time + n_cond, hidden, hidden, 1,
                                activation=jax.nn.silu, key=keys[0])
        self.messages = tuple(
            eqx.nn.MLP(2 * hidden + n_rbf, hidden, hidden, 1, activation=jax.nn.silu,
                       key=keys[3 + 2 * i]) for i in range(layers))
        self.updates = tuple(
            eqx.nn.MLP(2 * hidden, hidden, hidden, 1, activation=jax.nn.silu,
                       key=keys[4 + 2 * i]) for i in range(layers))
        self.coord_head = eqx.nn.MLP(2 * hidden + n_rbf, 1, hidden, 1,
                                     activation=jax.nn.silu, key=keys[1])
        self.elem_head = eqx.nn.MLP(hidden, n_species, hidden, 1, activation=jax.nn.silu,
                                    key=keys[2])

    def _edges(self, disp, valid):
        r = jnp.sqrt(jnp.sum(disp * disp, axis=-1) + 1e-12)
        mu = jnp.linspace(0.0, self.r_cut, self.n_rbf)
        width = self.r_cut / self.n_rbf
        env = 0.5 * (1 + jnp.cos(jnp.pi * jnp.clip(r / self.r_cut, 0.0, 1.0)))
        env = env * valid
        rbf = jnp.exp(-jnp.square((r[..., None] - mu) / width)) * env[..., None]
        return rbf, env

    def core(self, h, disp, idx, valid, mask, t, cond):
        """Network on a given neighbour list: ``disp`` (N, k, 3) Cartesian displacements.
        Returns (Cartesian vector per atom (N, 3), element velocity (N, K))."""
        n, k = idx.shape
        rbf, env = self._edges(disp, valid)
        tf = _time_features(jnp.asarray(t, jnp.float32))
        inp = jnp.concatenate([h, jnp.broadcast_to(tf, (n, tf.size)),
                               jnp.broadcast_to(cond, (n, cond.size))], axis=1)
        s = jax.vmap(self.embed)(inp)
        for msg, upd in zip(self.messages, self.updates, strict=True):
            m = _edge_mlp(msg, s, idx, rbf) * env[..., None]
            agg = jnp.sum(m, axis=1) / k
            s = s + jax.vmap(upd)(jnp.concatenate([s, agg], axis=1))
        w = _edge_mlp(self.coord_head, s, idx, rbf)[..., 0] * env
        vec = jnp.sum(w[..., None] * disp, axis=1) / k
        hv = jax.vmap(self.elem_head)(s)
        m = mask[:, None]
        return jnp.where(m, vec, 0.0), jnp.where(m, hv, 0.0)

    def __call__(self, x, h, mask, box, cond, t):
        """(predicted position noise ``eps`` (N, 3), Cartesian, E(3)-equivariant; element
        channel velocity (N, K))."""
        idx, disp, valid = neighbours(x, box, mask, self.k_nbr)
        return self.core(h, disp, idx, valid, mask, t, cond)


#: Position noise schedule (A): ``sigma(t) = SIGMA_MAX (SIGMA_MIN / SIGMA_MAX)^t``, t = 0
#: noise, t = 1 data. A wrapped Gaussian of SIGMA_MAX = 12 A is uniform to within 0.3 % on
#: the largest recipe box (about 22 A for 800 atoms; the first Fourier mode of the wrapped
#: density is exp(-2 pi^2 sigma^2 / L^2) = 0.003), so sampling starts from uniform positions.
SIGMA_MAX = 12.0
SIGMA_MIN = 0.02


def sigma(t) -> jax.Array:
    """Noise level (A) of the positions at time ``t`` (log-linear, see :data:`SIGMA_MAX`)."""
    return SIGMA_MAX * (SIGMA_MIN / SIGMA_MAX) ** jnp.asarray(t, jnp.float32)


def _element_noise(key, mask, q, balanced):
    shape = (mask.shape[0], q.shape[0])
    g = jnp.where(mask[:, None], jax.random.normal(key, shape), 0.0)
    b = charge.balanced_noise(key, shape, q, mask=mask)
    return jnp.where(balanced, b, g)


def augment(key, x: jax.Array, permute: bool = True) -> jax.Array:
    """A random symmetry of the periodic cubic cell applied to fractional ``x`` (N, 3): a
    lattice translation, a permutation of the axes and sign flips (the 48 operations of
    the cubic point group), wrapped into [0, 1). ``permute=False`` (an orthorhombic
    cell, whose axes differ): translation and sign flips only."""
    kp, ks, kt = jax.random.split(key, 3)
    perm = jax.random.permutation(kp, 3) if permute else jnp.arange(3)
    signs = jnp.where(jax.random.bernoulli(ks, 0.5, (3,)), -1.0, 1.0)
    return jnp.mod(x[:, perm] * signs + jax.random.uniform(kt, (3,)), 1.0)


def sigma_time(s) -> jax.Array:
    """The time of noise level ``s`` (A): the inverse of :func:`sigma`,
    ``t = log(s / SIGMA_MAX) / log(SIGMA_MIN / SIGMA_MAX)``."""
    return jnp.log(jnp.asarray(s, jnp.float32) / SIGMA_MAX) / np.log(SIGMA_MIN / SIGMA_MAX)


#: noise band (A) of the training's focus draws (``focus_share``): the levels at which the
#: atoms separate (from a few A, where the cell is still a cloud, down to the bond-length
#: scatter of a tenth of an A), where a pair closer than 1 A is told apart from a bond
FOCUS_BAND = (2.5, 0.1)


def noise_time(key, focus_share=0.0) -> jax.Array:
    """One training time: with probability ``focus_share`` uniform on the times of
    :data:`FOCUS_BAND`, else uniform on [0, 1] (``focus_share = 0`` gives exactly
    ``jax.random.uniform(key, ())``)."""
    lo, hi = sigma_time(FOCUS_BAND[0]), sigma_time(FOCUS_BAND[1])
    return jnp.where(jax.random.uniform(jax.random.fold_in(key, 1)) < focus_share,
                     jax.random.uniform(jax.random.fold_in(key, 2), (), minval=lo, maxval=hi),
                     jax.random.uniform(key, ()))


def loss(model: Denoiser, batch: Batch, key, q, *, balanced_share: float = 0.5,
         coord_weight: float = 1.0, augment_cells: bool = True,
         focus_share: float = 0.0) -> jax.Array:
    """Denoising loss (mean over real atoms) of one padded batch.

    Positions: wrapped-Gaussian noise on the torus, ``x_t = x1 + sigma(t) eps / box mod 1``
    with ``t ~ U[0, 1]`` (uniform in log sigma); the network predicts the minimum-image
    noise ``eps_t = wrap(x_t - x1) box / sigma(t)`` (= ``eps`` unless sigma is a sizable
    part of the box), i.e. the score ``-eps_t / sigma`` of the wrapped Gaussian to leading
    order (the DiffCSP / score-matching form on the torus). Elements: flow matching on
    the linear path from Gaussian or charge-balanced noise to the one-hot species.
    ``augment_cells``: each cell first gets a random cubic-cell symmetry
    (:func:`augment`). ``focus_share``: the share of cells whose time is drawn uniformly
    in the band :data:`FOCUS_BAND` instead of on [0, 1], i.e. the time density
    ``(1 - f) + f 1[t in band] / |band|``: a weighting of the noise levels that spends
    more of the training on the levels where the atoms separate (the minimiser of the
    loss is the same score at every level; only the finite-training error moves).
    Cells whose mask is all False (padding of the batch) contribute nothing."""
    q = jnp.asarray(q, jnp.float32)

    def one(x1, h1, mask, box, cond, k):
        kt, kx, kh, kb, ka = jax.random.split(k, 5)
        if augment_cells:
            x1 = augment(ka, x1, permute=jnp.ndim(box) == 0)
        t = noise_time(kt, focus_share)
        s = sigma(t)
        xt = jnp.mod(x1 + s * jax.random.normal(kx, x1.shape) / box, 1.0)
        eps = wrap(xt - x1) * box / s
        h0 = _element_noise(kh, mask, q, jax.random.uniform(kb) < balanced_share)
        ht, uh = flow.linear_path(h0, h1, t)
        vx, vh = model(xt, ht, mask, box, cond, t)
        m = mask.astype(jnp.float32)
        ex = jnp.sum(jnp.square(vx - eps), axis=1) * coord_weight
        eh = jnp.mean(jnp.square(vh - uh), axis=1)
        return jnp.sum((ex / 3 + eh) * m), jnp.sum(m)

    # one key per cell by its index, so padding the batch (to shard it over a mesh)
    # leaves the keys of the real cells unchanged
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(batch.x.shape[0]))
    tot, cnt = jax.vmap(one)(batch.x, batch.h, batch.mask, batch.box, batch.cond, keys)
    return jnp.sum(tot) / jnp.maximum(jnp.sum(cnt), 1.0)


@eqx.filter_jit
def sample(model: Denoiser, key, mask, box, cond, q, *, steps: int = 20,
           corrector_steps: int = 0, snr: float = 0.1, balanced: bool = False,
           soft_eta: float = 0.0, soft_target: str = "endpoint"):
    """Generate one cell: returns final (x (N, 3) in [0, 1), h (N, K)).

    Time runs over ``t_i = i / steps``. Positions: the reverse-time SDE of the wrapped
    Gaussian noise (Song et al. 2021, VE; the SMLD predictor), from uniform positions,
    ``x <- x + (s_i^2 - s_{i+1}^2) score + sqrt(s_i^2 - s_{i+1}^2) z`` with
    ``score = -eps_hat / s_i``, wrapped after every step, then ``corrector_steps``
    Langevin corrector steps at ``s_{i+1}`` (step ``2 (snr s_{i+1})^2``), and a final
    denoising ``x - sigma_min eps_hat``. Elements: Euler steps of the flow velocity.

    ``balanced``: start the element channels from charge-balanced noise (mechanism 1).
    ``soft_eta`` > 0: soft charge projection at every step (mechanism 2), on the
    simplex-projected channels ``s``, in one of two forms:

    * ``soft_target="endpoint"`` (default): ``s`` is the simplex projection of the
      predicted endpoint ``h + (1 - t) v``; the element velocity is corrected by
      ``(relax(s, eta) - s) / (1 - t)`` so that the predicted endpoint moves by the soft
      step (floor 0.05 on ``1 - t``);
    * ``soft_target="state"``: after each step ``s`` is the simplex projection of the
      current channels and ``h`` is shifted by ``relax(s, eta * t) - s``.

    ``balanced`` and ``soft_eta`` may be arrays (traced): then one compiled program
    serves every arm, the soft projection running under ``lax.cond(soft_eta > 0)`` (keep
    ``soft_eta`` unbatched under ``vmap`` so that the cond stays a branch).

    Pure and jitted (``q`` is a traced argument; Python keyword values are static);
    ``vmap`` over cells."""
    if soft_target not in ("endpoint", "state"):
        raise ValueError(f"soft_target must be 'endpoint' or 'state'; got {soft_target!r}")
    qf = jnp.asarray(q, jnp.float32)
    kx, kh, ks = jax.random.split(key, 3)
    n = mask.shape[0]
    m3 = mask[:, None]
    x0 = jax.random.uniform(kx, (n, 3))
    h0 = _element_noise(kh, mask, qf, balanced)
    # a traced soft_eta: the projection runs under lax.cond(eta > 0), so one compiled
    # program serves every arm and an arm with eta = 0 skips the projection's work
    traced = isinstance(soft_eta, jax.Array)
    on = traced or soft_eta > 0
    endpoint = on and soft_target == "endpoint"
    state = on and soft_target == "state"
    dt = 1.0 / steps

    def when_on(fn, arg):
        return jax.lax.cond(soft_eta > 0, fn, lambda a: a, arg) if traced else fn(arg)

    def body(carry, i):
        x, h = carry
        t = i * dt
        s_now, s_next = sigma(t), sigma(t + dt)
        eps, vh = model(x, h, mask, box, cond, t)
        if endpoint:
            def soft_v(vh):
                p, _ = charge.simplex_rows(h + (1 - t) * vh)
                moved = charge.relax(p, qf, soft_eta, mask=mask)
                return vh + jnp.where(m3, moved - p, 0.0) / jnp.maximum(1 - t, 0.05)

            vh = when_on(soft_v, vh)
        h = h + dt * vh
        if state:
            def soft_h(h):
                p, _ = charge.simplex_rows(h)
                moved = charge.relax(p, qf, soft_eta * jnp.minimum(t + dt, 1.0), mask=mask)
                return h + jnp.where(m3, moved - p, 0.0)

            h = when_on(soft_h, h)
        var = s_now ** 2 - s_next ** 2
        k1, k2 = jax.random.split(jax.random.fold_in(ks, i))
        z = jax.random.normal(k1, x.shape)
        x = jnp.mod(x + jnp.where(m3, -var / s_now * eps + jnp.sqrt(var) * z, 0.0) / box, 1.0)

        def correct(xc, kc):
            e, _ = model(xc, h, mask, box, cond, t + dt)
            a = 2.0 * (snr * s_next) ** 2
            zc = jax.random.normal(kc, xc.shape)
            step = -a / s_next * e + jnp.sqrt(2.0 * a) * zc
            return jnp.mod(xc + jnp.where(m3, step, 0.0) / box, 1.0), None

        if corrector_steps:
            x, _ = jax.lax.scan(correct, x, jax.random.split(k2, corrector_steps))
        return (x, h), None

    (x, h), _ = jax.lax.scan(body, (x0, h0), jnp.arange(steps))
    eps, _ = model(x, h, mask, box, cond, 1.0)
    x = jnp.mod(x - jnp.where(m3, SIGMA_MIN * eps, 0.0) / box, 1.0)
    return x, h


def probabilities(h: jax.Array, floor: float = 1e-6) -> jax.Array:
    """Row-wise simplex projection of the channels, floored and renormalised."""
    p, _ = charge.simplex_rows(h)
    p = jnp.maximum(p, floor)
    return p / jnp.sum(p, axis=-1, keepdims=True)


@partial(jax.jit, static_argnums=2)
def _discrete_species(h, mask, q: tuple):
    # jitted: one compilation per shape (an eager vmap compiles every primitive apart)
    cost = -jnp.log(probabilities(h))
    res = jax.vmap(lambda c, m: charge.project_discrete(c, np.asarray(q), mask=m))(cost, mask)
    return res.assignment, res.feasible


def final_species(h: np.ndarray, mask: np.ndarray, q: np.ndarray, *, discrete: bool):
    """Species per atom (-1 on padding) for a batch ``h`` (B, N, K): argmax of the
    channels, or the exact charge-balanced assignment minimising ``sum -log p``.
    Returns (species (B, N) int, feasible (B,) bool; True for argmax only when the
    argmax happens to be balanced)."""
    h = jnp.asarray(h)
    mask = jnp.asarray(mask, bool)
    qn = np.asarray(q, np.int64)
    if discrete:
        assign, feasible = _discrete_species(h, mask, tuple(int(v) for v in qn))
        return np.asarray(assign), np.asarray(feasible)
    a = jnp.where(mask, jnp.argmax(h, axis=-1), -1)
    an = np.asarray(a)
    tot = np.where(an >= 0, qn[np.maximum(an, 0)], 0).sum(axis=1)
    return an, tot == 0

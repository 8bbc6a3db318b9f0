"""The models under audit: an MLP on fingerprints and a message-passing network on the
padded molecular graph (equinox), trained for all seeds at once through the one step
(:func:`jaxkit.kernels.train.make_train_step`) and loop (:func:`jaxkit.training.fit`).

* :class:`FingerprintMLP`: :math:`f(x) = W_L \\sigma(\\dots \\sigma(W_1 x))`, ReLU, on
  the Morgan bits.
* :class:`MPNN`: atom embeddings :math:`h^0_v = W_e a_v`; ``rounds`` steps of
  :math:`h^{t+1}_v = \\mathrm{ReLU}(W_s^t h^t_v + W_m^t \\sum_{u \\in N(v)} h^t_u +
  b^t)` (the GraphConv / GIN-style sum aggregation of Gilmer et al. 2017), masked to
  the real atoms; readout :math:`\\mathrm{MLP}(\\sum_v h^T_v)`.
* :class:`~jaxkit.misaligned.dmpnn.DMPNN` (``"dmpnn"``): chemprop's bond-aware directed
  MPNN (Yang et al. 2019) on the padded directed-bond graphs of
  :func:`~jaxkit.misaligned.dmpnn.bond_graphs` (arrays ``atoms``, ``atom_mask``,
  ``bonds``, ``src``, ``dst``, ``rev``, ``bond_mask``).

Seeds are a leading axis of the parameters: ``S`` models (one per seed and split) are
initialised with ``eqx.filter_vmap`` and trained together, the loss being the sum of the
per-seed mean squared errors on each seed's own minibatch of its own training set. The
seeds' parameters do not interact (Adam is element-wise and nothing is clipped jointly),
so this is ``S`` independent trainings in one compiled step. Labels are standardised by
each seed's training mean and deviation, predictions mapped back. A chunk of
``log_every`` steps is one ``lax.scan``; the minibatches of chunk ``i`` come from
``fold_in(key, i)``, so a training killed and resumed from its checkpoint ends with the
same parameters.

With a ``mesh`` of several devices the seeds are split over its ``"data"`` axis (as the
baseline family's runs): parameters, optimiser state, standardised labels and minibatch
indices are sharded on the seed axis, the molecules replicated; each device trains its
own seeds, and the only collective is the sum of the per-seed losses. The seeds are
padded to a multiple of the axis size with copies of the last seed whose loss weight is
0 (their gradients are 0, so the real seeds' steps, the loss and the gradient norm are
those of the unpadded training), and the minibatches are drawn for the ``S`` real seeds
before padding: the trained models do not depend on the mesh (tested, 8 devices
against 1).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed as jd
from jaxkit import optim, training
from jaxkit.kernels import train as ktrain

from .dmpnn import DMPNN, bond_graphs, dmpnn_inputs

__all__ = ["MODELS", "FingerprintMLP", "MPNN", "TrainSettings", "make_models", "model_arrays",
           "train", "predict"]

MODELS = ("mlp", "mpnn", "dmpnn")


class FingerprintMLP(eqx.Module):
    """MLP on a fingerprint ``(d,)`` -> scalar."""

    net: eqx.nn.MLP

    def __init__(self, key, n_bits: int, width: int = 256, depth: int = 2):
        self.net = eqx.nn.MLP(n_bits, "scalar", width, depth, activation=jax.nn.relu, key=key)

    def __call__(self, mol: dict) -> jax.Array:
        return self.net(mol["fp"])


class MPNN(eqx.Module):
    """Message passing on ``atoms (N, f)``, ``adj (N, N)``, ``mask (N,)`` -> scalar."""

    embed: eqx.nn.Linear
    self_w: tuple
    msg_w: tuple
    readout: eqx.nn.MLP

    def __init__(self, key, n_features: int, width: int = 64, rounds: int = 3):
        ks = jax.random.split(key, 2 * rounds + 2)
        self.embed = eqx.nn.Linear(n_features, width, key=ks[0])
        self.self_w = tuple(eqx.nn.Linear(width, width, key=k) for k in ks[1:rounds + 1])
        self.msg_w = tuple(eqx.nn.Linear(width, width, use_bias=False, key=k)
                           for k in ks[rounds + 1:2 * rounds + 1])
        self.readout = eqx.nn.MLP(width, "scalar", width, 1, activation=jax.nn.relu,
                                  key=ks[-1])

    def __call__(self, mol: dict) -> jax.Array:
        m = mol["mask"].astype(jnp.float32)[:, None]
        h = jax.vmap(self.embed)(mol["atoms"]) * m
        for ws, wm in zip(self.self_w, self.msg_w, strict=True):
            agg = mol["adj"] @ h
            h = jax.nn.relu(jax.vmap(ws)(h) + jax.vmap(wm)(agg)) * m
        return self.readout(jnp.sum(h, axis=0))


class TrainSettings(NamedTuple):
    """Hashable training settings: Adam(W) steps, batch, learning rate, weight decay,
    steps per compiled chunk, chunks between checkpoints, network sizes."""

    steps: int = 600
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    log_every: int = 50
    checkpoint_every: int = 2
    mlp_width: int = 256
    mlp_depth: int = 2
    mpnn_width: int = 64
    mpnn_rounds: int = 3
    dmpnn_width: int = 64
    dmpnn_steps: int = 3
    dmpnn_aggregation: str = "mean"


def make_models(kind: str, keys, n_bits: int, n_features: int, ts: TrainSettings,
                n_bond_features: int = 1):
    """``len(keys)`` models of ``kind`` stacked on a leading axis (``n_bond_features``:
    the D-MPNN's bond feature count)."""
    if kind == "mlp":
        mk = lambda k: FingerprintMLP(k, n_bits, ts.mlp_width, ts.mlp_depth)  # noqa: E731
    elif kind == "mpnn":
        mk = lambda k: MPNN(k, n_features, ts.mpnn_width, ts.mpnn_rounds)  # noqa: E731
    elif kind == "dmpnn":
        mk = lambda k: DMPNN(k, n_features, n_bond_features, ts.dmpnn_width,  # noqa: E731
                             ts.dmpnn_steps, ts.dmpnn_aggregation)
    else:
        raise ValueError(f"`kind` must be one of {MODELS}; got {kind!r}")
    return eqx.filter_vmap(mk)(keys)


def model_arrays(kind: str, data) -> dict:
    """The arrays :func:`train` reads for model ``kind`` from a
    :class:`~jaxkit.misaligned.features.MolDataset`: the fingerprints and atom graphs, or
    for ``"dmpnn"`` the directed-bond graphs of its SMILES
    (:func:`~jaxkit.misaligned.dmpnn.bond_graphs`, padded to the data set's atoms and its
    most bonds)."""
    if kind == "dmpnn":
        return bond_graphs(data.smiles, max_atoms=data.atoms.shape[1])
    return dict(fp=data.fp, atoms=data.atoms, adj=data.adj, atom_mask=data.atom_mask)


def _inputs(kind: str, arrays: dict) -> dict:
    if kind == "mlp":
        return {"fp": jnp.asarray(arrays["fp"], jnp.float32)}
    if kind == "dmpnn":
        return dmpnn_inputs(arrays)
    return {"atoms": jnp.asarray(arrays["atoms"], jnp.float32),
            "adj": jnp.asarray(arrays["adj"], jnp.float32),
            "mask": jnp.asarray(arrays["atom_mask"], bool)}


def _forward(params, static, mols):
    """Per-seed models on per-seed molecule batches: ``mols`` leaves ``(S, B, ...)``."""
    model = eqx.combine(params, static)
    return eqx.filter_vmap(lambda m, x: jax.vmap(m)(x))(model, mols)


@functools.lru_cache(maxsize=8)
def _chunk_fn(static, lr: float, weight_decay: float):
    """The jitted chunk ``(key, state, (idx, data)) -> (state, info)``: the steps of
    :func:`jaxkit.kernels.train.make_train_step` in one scan over ``idx`` (C, S, B)."""

    def loss(params, key, batch, aux):
        del key, aux
        idx, (mols, z, w) = batch
        sub = jax.tree.map(lambda a: jax.vmap(lambda i: a[i])(idx), mols)
        zb = jax.vmap(lambda zs, i: zs[i])(z, idx)
        err = _forward(params, static, sub) - zb
        per_seed = jnp.mean(err ** 2, axis=1)
        return jnp.sum(per_seed * w), per_seed  # w: 0 for the mesh's padding seeds

    step = ktrain.make_train_step(loss, optim.optimizer(lr, weight_decay=weight_decay))

    def chunk(key, state, batch):
        idx, data = batch
        keys = jax.random.split(key, idx.shape[0])
        state, info = jax.lax.scan(lambda st, ki: step(ki[0], st, (ki[1], data)), state,
                                   (keys, idx))
        w = data[2]  # the chunk's mean per-seed loss over the real seeds
        out = jnp.sum(jnp.mean(info.out, axis=0) * w) / jnp.sum(w)
        return state, info._replace(out=out, loss=info.loss[-1])

    return jax.jit(chunk, donate_argnums=1)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _sample(key, order, n_train, chunk: int, batch: int):
    """``(chunk, S, batch)`` training-row indices, uniform within each seed's set."""
    S = order.shape[0]
    u = jax.random.uniform(key, (chunk, S, batch))
    slot = jnp.minimum((u * n_train[None, :, None]).astype(jnp.int32), order.shape[1] - 1)
    return jax.vmap(lambda sl: jnp.take_along_axis(order, sl, axis=1))(slot)


def train(key, kind: str, arrays: dict, y, train_mask, ts: TrainSettings, *,
          checkpoint_dir: Path | None = None, resume: bool = True,
          on_log: Callable[[int, dict], None] | None = None, mesh=None
          ) -> tuple[np.ndarray, list]:
    """Train ``S`` models of ``kind`` (one per row of ``train_mask``) and predict every
    molecule.

    Args:
        key: the training key (init, minibatches, steps derive from it).
        kind: ``"mlp"``, ``"mpnn"`` or ``"dmpnn"``.
        arrays: ``fp``; or ``atoms``, ``adj``, ``atom_mask`` (a
            :class:`~jaxkit.misaligned.features.MolDataset`'s arrays); or, for the
            D-MPNN, :func:`~jaxkit.misaligned.dmpnn.bond_graphs`' arrays.
        y: ``(n,)`` labels.
        train_mask: ``(S, n)`` boolean training masks.
        ts: the :class:`TrainSettings`.
        checkpoint_dir: checkpoint folder of this training (``None``: none).
        resume: restore the newest checkpoint there.
        on_log: passed to :func:`jaxkit.training.fit`.
        mesh: split the seeds over its ``"data"`` axis (module docstring); ``None`` or
            one device: the default placement. The result does not depend on it.

    Returns:
        ``(pred, history)``: ``(S, n)`` float64 predictions, the logged losses.
    """
    if ts.steps % ts.log_every:
        raise ValueError(f"`steps` ({ts.steps}) must be a multiple of `log_every` "
                         f"({ts.log_every})")
    train_mask = np.asarray(train_mask, bool)
    S, n = train_mask.shape
    y = np.asarray(y, np.float64)
    mu = np.array([y[t].mean() for t in train_mask])
    sd = np.array([y[t].std() if t.sum() > 1 else 1.0 for t in train_mask])
    sd = np.where(sd > 0, sd, 1.0)
    z = jnp.asarray((y[None, :] - mu[:, None]) / sd[:, None], jnp.float32)
    k_init, k_data, k_run = jax.random.split(key, 3)
    mols = _inputs(kind, arrays)
    n_bits = arrays["fp"].shape[1] if "fp" in arrays else 1
    n_feat = arrays["atoms"].shape[-1] if "atoms" in arrays else 1
    n_bond = arrays["bonds"].shape[-1] if "bonds" in arrays else 1
    models = make_models(kind, jax.random.split(k_init, S), n_bits, n_feat, ts, n_bond)
    params, static = eqx.partition(models, eqx.is_array)
    mesh = jd.data_mesh(mesh)
    Sp = S + (-S) % jd.mesh_size(mesh)  # seeds padded to a multiple of the data axis
    w = jnp.asarray(np.arange(Sp) < S, jnp.float32)
    (params, z), _ = jd.pad_batch((params, z), size=Sp)
    opt = optim.optimizer(ts.lr, weight_decay=ts.weight_decay)
    state = jd.place_batch(ktrain.init(params, opt), mesh, Sp)
    chunk = _chunk_fn(static, float(ts.lr), float(ts.weight_decay))
    order = jnp.asarray(np.argsort(~train_mask, axis=1, kind="stable"), jnp.int32)
    n_train = jnp.asarray(train_mask.sum(axis=1), jnp.float32)
    if mesh is not None:
        mols = jax.device_put(mols, jd.replicated(mesh))
    data = (mols, *jd.place_batch((z, w), mesh, Sp))

    def batch_fn(i):
        idx = _sample(jax.random.fold_in(k_data, i), order, n_train, ts.log_every,
                      ts.batch_size)  # (chunk, S, batch): drawn for the real seeds
        idx, _ = jd.pad_batch(idx, size=Sp, batch_axis=1)
        return jd.place_batch(idx, mesh, Sp, batch_axis=1), data

    res = training.fit(k_run, state, chunk, batch_fn, steps=ts.steps // ts.log_every,
                       checkpoint_dir=checkpoint_dir, checkpoint_every=ts.checkpoint_every,
                       resume=resume, log_every=1, on_log=on_log)
    zhat = predict(res.state.params, static, mols, Sp)[:S]
    return np.asarray(zhat, np.float64) * sd[:, None] + mu[:, None], res.full_history


def predict(params, static, mols: dict, S: int, block: int = 256) -> np.ndarray:
    """``(S, n)`` standardised predictions of the stacked models for every molecule (in
    blocks of ``block`` molecules)."""
    n = jax.tree.leaves(mols)[0].shape[0]
    fwd = _predict_fn(static)
    out = []
    for s in range(0, n, block):
        part = jax.tree.map(lambda a, s=s: a[s:s + block], mols)
        out.append(np.asarray(fwd(params, part)))
    return np.concatenate(out, axis=1)


@functools.lru_cache(maxsize=8)
def _predict_fn(static) -> Any:
    def fwd(params, mols):
        model = eqx.combine(params, static)
        return eqx.filter_vmap(lambda m: jax.vmap(m)(mols))(model)

    return jax.jit(fwd)

"""The two vision classifiers (flax nnx) as chains of layers, and their training.

Both models take flattened ``size x size`` images and are chains of layers whose
outputs are the sites the transcoders read and write (:mod:`jaxkit.kernels.crosscoder`
``cross_model``): site 0 is the image, site ``t`` the output of layer ``t - 1``, and the
logits are ``head(site L)`` with a linear ``head``.

* :class:`MLP`: ``h_{t+1} = relu(h_t W_t + b_t)`` for the hidden widths.
* :class:`CNN`: layer 0 a 3x3 convolution (``SAME``, ReLU), layer 1 a 3x3 convolution with
  stride 2 (ReLU), layer 2 dense + ReLU; conv outputs are flattened (HWC) sites
  (``strides`` sets both convolutions' strides, default ``(1, 2)``).
* :class:`ViT`: a small vision transformer (Dosovitskiy et al. 2021) with pre-LN blocks:
  layer 0 the patch embedding ``z_0 = patches(x) E + pos`` (non-overlapping ``p x p``
  patches, row-major), layers ``1..n`` the blocks ``z' = z + MHA(LN(z))``,
  ``z'' = z' + W_2 gelu(W_1 LN(z'))``, the last layer the mean-pooled head input
  ``relu(LN(mean_t z_n) W + b)``; token sites are flattened ``(tokens, dim)``.

:class:`Classifier` wraps a model's graph definition into the pure functions the
kernels take (``sites``, ``rest``, ``logits``, ``head``) of an ``nnx.State``; training is
:func:`train_classifier`: cross-entropy on batches of an augmented stream (Adam,
cosine-decayed learning rate) by the one step
(:mod:`jaxkit.kernels.train`) and the one loop (:func:`jaxkit.training.fit`,
checkpointed, so a killed training resumes to the same parameters).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxkit import distributed, optim, training
from jaxkit.kernels import train as ktrain

from . import data as D

__all__ = ["MLP", "CNN", "ViT", "Arch", "Classifier", "train_classifier", "accuracy",
           "logits_jit"]


class MLP(nnx.Module):
    """Multilayer perceptron with ReLU hidden layers and a linear head."""

    def __init__(self, d_in: int, widths: tuple[int, ...], n_classes: int, *, rngs: nnx.Rngs):
        dims = (d_in, *widths)
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(dims, dims[1:],
                                                                            strict=False)])
        self.head = nnx.Linear(dims[-1], n_classes, rngs=rngs)
        self.widths = tuple(dims)

    def layer(self, j: int, h):
        return jax.nn.relu(self.layers[j](h))


class CNN(nnx.Module):
    """Two 3x3 convolutions (the second with stride 2), a dense layer and a linear head."""

    def __init__(self, size: int, channels: tuple[int, int], hidden: int, n_classes: int, *,
                 rngs: nnx.Rngs, strides: tuple[int, int] = (1, 2)):
        c1, c2 = channels
        s1, s2 = strides
        S1 = -(-size // s1)
        S2 = -(-S1 // s2)
        self.size, self.c1, self.c2, self.S1 = size, c1, c2, S1
        self.conv1 = nnx.Conv(1, c1, (3, 3), strides=(s1, s1), padding="SAME", rngs=rngs)
        self.conv2 = nnx.Conv(c1, c2, (3, 3), strides=(s2, s2), padding="SAME", rngs=rngs)
        self.fc = nnx.Linear(S2 ** 2 * c2, hidden, rngs=rngs)
        self.head = nnx.Linear(hidden, n_classes, rngs=rngs)
        self.widths = (size * size, S1 * S1 * c1, S2 ** 2 * c2, hidden)

    def layer(self, j: int, h):
        B, S = h.shape[0], self.size
        if j == 0:
            return jax.nn.relu(self.conv1(h.reshape(B, S, S, 1))).reshape(B, -1)
        if j == 1:
            return jax.nn.relu(self.conv2(h.reshape(B, self.S1, self.S1, self.c1))
                               ).reshape(B, -1)
        return jax.nn.relu(self.fc(h))


def patches(x, size: int, patch: int):
    """Non-overlapping ``patch x patch`` patches of flattened ``size x size`` images, in
    row-major patch order: ``(B, size * size) -> (B, (size / patch) ** 2, patch ** 2)``."""
    g = size // patch
    x = x.reshape(x.shape[0], g, patch, g, patch)
    return x.transpose(0, 1, 3, 2, 4).reshape(x.shape[0], g * g, patch * patch)


class _Block(nnx.Module):
    """One pre-LN transformer block: multi-head self-attention and a GELU MLP, each
    added to the residual stream."""

    def __init__(self, dim: int, heads: int, mlp: int, *, rngs: nnx.Rngs):
        self.heads = heads
        self.ln1 = nnx.LayerNorm(dim, epsilon=1e-5, rngs=rngs)
        self.qkv = nnx.Linear(dim, 3 * dim, rngs=rngs)
        self.proj = nnx.Linear(dim, dim, rngs=rngs)
        self.ln2 = nnx.LayerNorm(dim, epsilon=1e-5, rngs=rngs)
        self.fc1 = nnx.Linear(dim, mlp, rngs=rngs)
        self.fc2 = nnx.Linear(mlp, dim, rngs=rngs)

    def __call__(self, z):
        B, T, D = z.shape
        H = self.heads
        q, k, v = jnp.split(self.qkv(self.ln1(z)), 3, axis=-1)
        q, k, v = (a.reshape(B, T, H, D // H) for a in (q, k, v))
        att = jax.nn.softmax(jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(D // H), axis=-1)
        z = z + self.proj(jnp.einsum("bhts,bshd->bthd", att, v).reshape(B, T, D))
        return z + self.fc2(jax.nn.gelu(self.fc1(self.ln2(z)), approximate=False))


class ViT(nnx.Module):
    """A small vision transformer (module docstring): patch embedding, ``depth`` pre-LN
    blocks, a mean-pooled LayerNorm + dense + ReLU layer and a linear head."""

    def __init__(self, size: int, patch: int, dim: int, depth: int, heads: int, mlp: int,
                 hidden: int, n_classes: int, *, rngs: nnx.Rngs):
        if size % patch or dim % heads:
            raise ValueError(f"`patch` ({patch}) must divide the image size ({size}) and "
                             f"`heads` ({heads}) the width ({dim})")
        self.size, self.patch, self.dim = size, patch, dim
        self.tokens = (size // patch) ** 2
        self.embed = nnx.Linear(patch * patch, dim, rngs=rngs)
        self.pos = nnx.Param(jnp.zeros((self.tokens, dim)))
        self.blocks = nnx.List([_Block(dim, heads, mlp, rngs=rngs) for _ in range(depth)])
        self.ln_f = nnx.LayerNorm(dim, epsilon=1e-5, rngs=rngs)
        self.fc = nnx.Linear(dim, hidden, rngs=rngs)
        self.head = nnx.Linear(hidden, n_classes, rngs=rngs)
        self.widths = (size * size, *[self.tokens * dim] * (depth + 1), hidden)

    def layer(self, j: int, h):
        B, T, D = h.shape[0], self.tokens, self.dim
        if j == 0:
            return (self.embed(patches(h, self.size, self.patch)) + self.pos[...]
                    ).reshape(B, -1)
        if j <= len(self.blocks):
            return self.blocks[j - 1](h.reshape(B, T, D)).reshape(B, -1)
        return jax.nn.relu(self.fc(self.ln_f(jnp.mean(h.reshape(B, T, D), axis=1))))


@dataclass(frozen=True)
class Arch:
    """A model's architecture (hashable): ``kind`` "mlp", "cnn" or "vit" (``patch``,
    ``dim``, ``depth``, ``heads``, ``mlp``: the ViT's; ``hidden``: the CNN's and the
    ViT's last layer; ``strides``: the CNN's)."""

    kind: str
    size: int
    widths: tuple[int, ...] = ()
    channels: tuple[int, int] = (8, 16)
    hidden: int = 32
    n_classes: int = D.N_CLASSES
    strides: tuple[int, int] = (1, 2)
    patch: int = 4
    dim: int = 32
    depth: int = 2
    heads: int = 4
    mlp: int = 64

    def build(self, seed: int = 0) -> nnx.Module:
        rngs = nnx.Rngs(seed)
        if self.kind == "mlp":
            return MLP(self.size ** 2, self.widths, self.n_classes, rngs=rngs)
        if self.kind == "cnn":
            return CNN(self.size, self.channels, self.hidden, self.n_classes, rngs=rngs,
                       strides=self.strides)
        if self.kind == "vit":
            return ViT(self.size, self.patch, self.dim, self.depth, self.heads, self.mlp,
                       self.hidden, self.n_classes, rngs=rngs)
        raise ValueError(f"`kind` must be 'mlp', 'cnn' or 'vit'; got {self.kind!r}")


class Classifier:
    """Pure functions of one architecture's parameters (an ``nnx.State``)."""

    def __init__(self, arch: Arch):
        self.arch = arch
        model = nnx.eval_shape(lambda: arch.build(0))  # shapes only: nothing compiles
        self.graphdef, state = nnx.split(model)
        self.treedef = jax.tree.structure(state)
        self.shapes = [tuple(v.shape) for v in jax.tree.leaves(state)]
        # LayerNorm scales start at one (every other 1-D leaf, a bias, at zero)
        self.ones = [any(getattr(k, "key", None) == "scale" for k in p)
                     for p, _ in jax.tree_util.tree_flatten_with_path(state)[0]]
        self.d_sites = tuple(model.widths)
        self.n_layers = len(self.d_sites) - 1

    def init(self, key) -> Any:
        """Fresh parameters drawn on the host from ``key`` (no compilation): weights
        ``N(0, 1 / fan_in)`` (fan-in: every axis but the last; the ViT's position
        embedding likewise), biases zero, LayerNorm scales one."""
        seed = np.asarray(jax.random.key_data(key)).ravel().tolist()
        rng = np.random.default_rng(seed)
        leaves = [(np.ones if one else np.zeros)(s, np.float32) if len(s) < 2 else
                  (rng.standard_normal(s) / np.sqrt(np.prod(s[:-1]))).astype(np.float32)
                  for s, one in zip(self.shapes, self.ones, strict=True)]
        return self.from_numpy(leaves)

    def from_numpy(self, leaves) -> Any:
        """Parameters from :meth:`to_numpy`'s leaves."""
        return jax.tree.unflatten(self.treedef, [jnp.asarray(v) for v in leaves])

    @staticmethod
    def to_numpy(params) -> list[np.ndarray]:
        return [np.asarray(v) for v in jax.tree.leaves(params)]

    def _model(self, params):
        return nnx.merge(self.graphdef, params)

    def sites(self, params, x) -> list:
        """``[h_0 = x, h_1, ..., h_L]``."""
        m = self._model(params)
        hs = [x]
        for j in range(self.n_layers):
            hs.append(m.layer(j, hs[-1]))
        return hs

    def rest(self, params, t: int, h):
        """The logits from site ``t`` on (``t = L``: the head alone)."""
        m = self._model(params)
        for j in range(t, self.n_layers):
            h = m.layer(j, h)
        return m.head(h)

    def logits(self, params, x):
        return self.rest(params, 0, x)

    def head(self, params) -> tuple[jax.Array, jax.Array]:
        """The linear head ``(W (d_L, C), b (C,))``."""
        m = self._model(params)
        return m.head.kernel[...], m.head.bias[...]

    def with_head(self, params, W, b):
        """A copy of the parameters with the head replaced (``params`` is left as it was:
        ``nnx.merge`` shares the state's variables, so the state is copied first)."""
        m = self._model(jax.tree.map(jnp.array, params))
        m.head.kernel[...] = W
        m.head.bias[...] = b
        return nnx.split(m)[1]


def accuracy(clf: Classifier, params, x, y) -> np.ndarray:
    """Per-image correctness (0/1 float64) on ``(x, y)``."""
    pred = np.asarray(jnp.argmax(logits_jit(clf)(params, jnp.asarray(x)), -1))
    return (pred == np.asarray(y)).astype(np.float64)


@functools.lru_cache(maxsize=16)
def logits_jit(clf: Classifier):
    """``clf.logits`` compiled (one jitted function per classifier)."""
    return jax.jit(clf.logits)


def _optimizer(lr: float, total: int):
    """Adam with a cosine decay of the learning rate to 0 over ``total`` steps."""
    return optim.optimizer(lr, schedule_kind="cosine", steps=int(total))


@functools.lru_cache(maxsize=16)
def _chunk_fn(clf: Classifier, lr: float, n: int, batch: int, total: int, mesh):
    def loss(params, key, b, aux):
        x, y = b
        if mesh is not None:
            x = jax.lax.with_sharding_constraint(x, distributed.data_sharding(mesh, 2))
        lg = clf.logits(params, x)
        ce = optax.softmax_cross_entropy_with_integer_labels(lg, y).mean()
        return ce, {"ce": ce, "acc": jnp.mean((jnp.argmax(lg, -1) == y).astype(jnp.float32))}

    step = ktrain.make_train_step(loss, _optimizer(lr, total), clip_norm=1.0)
    scan = ktrain.scan_steps(step)

    def chunk(key, state, pool_and_key):
        xp, yp, kd = pool_and_key
        idx = jax.random.randint(kd, (n, batch), 0, xp.shape[0])
        batches = (xp[idx], yp[idx])
        state, info = scan(key, state, batches)
        return state, info._replace(out=jax.tree.map(jnp.mean, info.out))

    return jax.jit(chunk, donate_argnums=1)


def train_classifier(key, clf: Classifier, x_pool, y_pool, *, steps: int, batch: int, lr: float,
                     chunk: int, checkpoint_dir: Path | None = None,
                     checkpoint_every: int = 2, resume: bool = True, mesh=None
                     ) -> tuple[Any, list[dict]]:
    """Train ``clf`` on augmented batches of the pool (module docstring).

    Args:
      key: the training key (initialisation, batches and step keys derive from it).
      clf: the classifier.
      x_pool, y_pool: training images and labels (an augmented stream,
        :func:`jaxkit.universal_circuits.data.augmented_stream`); batches are drawn
        from them by ``fold_in(key, chunk index)``.
      steps: Adam steps (a multiple of ``chunk``).
      batch: images per step (divisible by the mesh's ``data`` size).
      lr: learning rate.
      chunk: steps per compiled call.
      checkpoint_dir, checkpoint_every, resume: see :func:`jaxkit.training.fit`
        (``checkpoint_every`` in chunks).
      mesh: split each batch over its ``data`` axis.

    Returns:
      ``(params, history)``.
    """
    if steps % chunk:
        raise ValueError(f"`steps` ({steps}) must be a multiple of `chunk` ({chunk})")
    mesh = distributed.data_mesh(mesh)
    k_init, k_data, k_run = jax.random.split(key, 3)
    params = clf.init(k_init)
    state = ktrain.init(params, _optimizer(lr, steps))
    if mesh is not None:
        state = jax.device_put(state, distributed.replicated(mesh))
    else:  # committed, as restored arrays are (one compiled chunk for fresh and resumed)
        state = jax.device_put(state, jax.tree.leaves(state)[0].sharding)
    fn = _chunk_fn(clf, float(lr), int(chunk), int(batch), int(steps), mesh)
    xp, yp = jnp.asarray(x_pool), jnp.asarray(y_pool)
    res = training.fit(k_run, state, fn, lambda i: (xp, yp, jax.random.fold_in(k_data, i)),
                       steps=steps // chunk, checkpoint_dir=checkpoint_dir,
                       checkpoint_every=checkpoint_every, resume=resume, log_every=1)
    return res.state.params, res.full_history

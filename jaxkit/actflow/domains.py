"""Continuous test domains with a known valid set, so coverage can be computed exactly.

Each :class:`Domain` has a verifier (a thin band around a manifold), a dense weighted
discretisation of the manifold (``reference``, ``weights``: arc-length / area elements)
for :func:`jaxkit.actflow.metrics.exact_coverage`, and pre-training data drawn from a
fixed *part* of the manifold (a quarter of it), so the pre-trained flow's generable set
covers only that part.

* :func:`rings`: two concentric circles (radii 1 and 2) in 2-D; data from the arc of
  angle in [0, pi/2) of both.
* :func:`torus`: the torus surface (R = 2, a = 0.7) in 3-D; data from the patch of
  toroidal angle in [0, pi/2).
* :func:`sphere`: the unit 2-sphere of a random 3-D subspace of R^12; data from the
  polar cap of angle < 60 degrees (a quarter of the area).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from .verifiers import Verifier, ring_band, sphere_band, torus_band

__all__ = ["Domain", "rings", "torus", "sphere", "CONTINUOUS"]


@dataclass(frozen=True, eq=False)
class Domain:
    """A generation task: dimension, verifier, pre-training data and coverage reference.

    ``data(key, n) -> (n, dim)`` pre-training samples; ``reference`` (m, dim) and
    ``weights`` (m,) discretise the valid set (None when it is not known);
    ``radius``: coverage radius; ``novelty``: distance beyond which a valid sample is
    novel; ``embed``: the map into the metric space of the metrics (identity for
    continuous domains); ``view``: a 2-D projection for plots; ``outside``: a traceable
    ``x -> bool (n,)``, the sample lies outside the pre-training region (None: no such
    region is defined; otherwise the evaluation reports the share ``outside`` of valid
    samples there)."""

    name: str
    dim: int
    verifier: Verifier
    data: Callable[[jax.Array, int], jax.Array]
    reference: np.ndarray | None
    weights: np.ndarray | None
    radius: float
    novelty: float
    embed: Callable = field(default=lambda x: x)
    view: Callable = field(default=lambda x: np.asarray(x)[:, :2])
    metric: str = "euclidean"
    outside: Callable | None = None


def rings(band: float = 0.1, radii=(1.0, 2.0), arc: float = 0.5 * np.pi,
          n_ref: int = 720) -> Domain:
    r = np.asarray(radii, np.float32)
    centers = np.zeros((len(r), 2), np.float32)

    def data(key, n):
        k1, k2, k3 = jax.random.split(key, 3)
        which = jax.random.randint(k1, (n,), 0, len(r))
        th = jax.random.uniform(k2, (n,), maxval=arc)
        rad = jnp.asarray(r)[which] + jax.random.uniform(k3, (n,), minval=-band / 2,
                                                         maxval=band / 2)
        return jnp.stack([rad * jnp.cos(th), rad * jnp.sin(th)], 1).astype(jnp.float32)

    th = np.linspace(0, 2 * np.pi, n_ref, endpoint=False)
    ref = np.concatenate([np.stack([ri * np.cos(th), ri * np.sin(th)], 1) for ri in r])
    w = np.concatenate([np.full(n_ref, ri) for ri in r])  # arc-length element
    return Domain("rings", 2, Verifier(ring_band(centers, r, band), "rings-band"), data,
                  ref.astype(np.float32), w.astype(np.float32), radius=0.15, novelty=0.1)


def torus(band: float = 0.1, R: float = 2.0, a: float = 0.7, arc: float = 0.5 * np.pi,
          n_ref: tuple[int, int] = (96, 32)) -> Domain:
    def embed3(th, ph, rr):
        return jnp.stack([(R + rr * jnp.cos(ph)) * jnp.cos(th),
                          (R + rr * jnp.cos(ph)) * jnp.sin(th), rr * jnp.sin(ph)], 1)

    def data(key, n):
        k1, k2, k3 = jax.random.split(key, 3)
        th = jax.random.uniform(k1, (n,), maxval=arc)
        ph = jax.random.uniform(k2, (n,), maxval=2 * np.pi)
        rr = a + jax.random.uniform(k3, (n,), minval=-band / 2, maxval=band / 2)
        return embed3(th, ph, rr).astype(jnp.float32)

    th, ph = np.meshgrid(np.linspace(0, 2 * np.pi, n_ref[0], endpoint=False),
                         np.linspace(0, 2 * np.pi, n_ref[1], endpoint=False), indexing="ij")
    th, ph = th.ravel(), ph.ravel()
    ref = np.asarray(embed3(jnp.asarray(th), jnp.asarray(ph), jnp.full(th.shape, a)))
    w = (R + a * np.cos(ph)) * a  # area element
    return Domain("torus", 3, Verifier(torus_band(R, a, band), "torus-band"), data,
                  ref.astype(np.float32), w.astype(np.float32), radius=0.3, novelty=0.15,
                  view=lambda x: np.asarray(x)[:, :2])


def sphere(band: float = 0.1, ambient: int = 12, cap_deg: float = 60.0,
           n_ref: int = 1500, seed: int = 0) -> Domain:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(ambient, 3)))
    F = q.astype(np.float32)
    cos_cap = float(np.cos(np.deg2rad(cap_deg)))

    def data(key, n):
        k1, k2, k3 = jax.random.split(key, 3)
        z = jax.random.uniform(k1, (n,), minval=cos_cap, maxval=1.0)  # uniform on the cap
        phi = jax.random.uniform(k2, (n,), maxval=2 * np.pi)
        s = jnp.sqrt(1 - z ** 2)
        p = jnp.stack([s * jnp.cos(phi), s * jnp.sin(phi), z], 1)
        off = 0.3 * band / np.sqrt(ambient) * jax.random.normal(k3, (n, ambient))
        return (p @ F.T + off).astype(jnp.float32)

    i = np.arange(n_ref) + 0.5  # Fibonacci sphere: near-uniform, equal-area points
    z = 1 - 2 * i / n_ref
    phi = np.pi * (1 + 5 ** 0.5) * i
    s = np.sqrt(1 - z ** 2)
    ref = np.stack([s * np.cos(phi), s * np.sin(phi), z], 1) @ F.T
    return Domain("sphere", ambient, Verifier(sphere_band(F, band), "sphere-band"), data,
                  ref.astype(np.float32), np.ones(n_ref, np.float32), radius=0.3,
                  novelty=0.15, view=lambda x: np.asarray(x) @ F[:, [0, 2]])


CONTINUOUS = {"rings": rings, "torus": torus, "sphere": sphere}

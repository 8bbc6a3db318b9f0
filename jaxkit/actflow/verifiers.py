"""Verifiers: a batch of samples -> a boolean validity mask.

A :class:`Verifier` wraps either a JAX function (traced into the jitted round, e.g. the
band checks of the continuous domains) or, with ``host=True``, a plain NumPy/Python
function for external tools (called through :func:`jax.pure_callback` inside ``jit``,
directly otherwise). The returned mask is validated: it must be boolean with one entry
per sample, else ``ValueError`` naming the verifier. For JAX verifiers the check is
static (at trace time); for host verifiers it runs on the host on every call (inside
``jit`` the ``ValueError`` surfaces wrapped in JAX's runtime error with the same text).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from jaxkit.kernels.checks import is_traced

__all__ = ["Verifier", "check_mask", "ring_band", "torus_band", "sphere_band"]


def check_mask(mask, n: int, name: str):
    """Raise ``ValueError`` naming verifier ``name`` unless ``mask`` is bool of shape (n,)."""
    dtype = getattr(mask, "dtype", None)
    shape = tuple(getattr(mask, "shape", ()))
    if dtype is None or np.dtype(dtype) != np.bool_:
        raise ValueError(f"verifier {name!r} must return a boolean mask; got dtype {dtype}")
    if shape != (n,):
        raise ValueError(f"verifier {name!r} must return a mask of shape ({n},) (one entry "
                         f"per sample); got shape {shape}")
    return mask


@dataclass(frozen=True)
class Verifier:
    """``Verifier(fn, name, host=False)``: ``fn(samples) -> bool mask``, validated.

    ``host=False``: ``fn`` is a JAX function (jit-able). ``host=True``: ``fn`` takes and
    returns NumPy arrays and may call anything (external tools); inside ``jit`` it runs
    as a ``jax.pure_callback`` (no gradient, one host call per batch)."""

    fn: Callable
    name: str
    host: bool = False

    def __call__(self, x: Array) -> Bool[Array, " n"]:
        n = x.shape[0]
        if not self.host:
            return check_mask(self.fn(x), n, self.name)

        def host_fn(xh):
            return check_mask(np.asarray(self.fn(np.asarray(xh))), n, self.name)

        if is_traced(x):
            return jax.pure_callback(host_fn, jax.ShapeDtypeStruct((n,), jnp.bool_), x,
                                     vmap_method="sequential")
        return jnp.asarray(host_fn(x))


def ring_band(centers: Float[Array, "k 2"], radii: Float[Array, " k"],
              band: float) -> Callable[[Float[Array, "n 2"]], Bool[Array, " n"]]:
    """Valid = within ``band`` of some circle ``|x - c_k| = r_k`` (2-D)."""
    c = jnp.asarray(centers, jnp.float32)
    r = jnp.asarray(radii, jnp.float32)

    def fn(x):
        d = jnp.linalg.norm(x[:, None, :] - c[None], axis=-1)
        return jnp.any(jnp.abs(d - r[None]) <= band, axis=1)

    return fn


def torus_band(R: float, a: float, band: float) -> Callable:
    """Valid = within ``band`` of the torus surface with major radius ``R`` and minor
    radius ``a`` in R^3: ``| sqrt((sqrt(x^2 + y^2) - R)^2 + z^2) - a | <= band``."""

    def fn(x):
        rho = jnp.sqrt(x[:, 0] ** 2 + x[:, 1] ** 2)
        return jnp.abs(jnp.sqrt((rho - R) ** 2 + x[:, 2] ** 2) - a) <= band

    return fn


def sphere_band(frame: Float[Array, "D k"], band: float) -> Callable:
    """Valid = within ``band`` of the unit sphere of the subspace spanned by the
    orthonormal columns of ``frame``: ``| |F^T x| - 1 | <= band`` and the distance of
    ``x`` to the subspace ``<= band``."""
    F = jnp.asarray(frame, jnp.float32)

    def fn(x):
        p = x @ F
        off = jnp.linalg.norm(x - p @ F.T, axis=1)
        return (jnp.abs(jnp.linalg.norm(p, axis=1) - 1.0) <= band) & (off <= band)

    return fn

"""Zero-mean, unit-variance noise laws of the causal prior, chosen by a traced code.

:mod:`.noise` has the three laws of the LiNGAM experiments with a static kind; the prior
adds heavy tails and skew: :func:`noise_law` draws one law (static code),
:func:`prior_noise` picks it from a traced code, so a mixture of noise laws is one
compiled function.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ._draws import hash_normals, hash_uniforms

__all__ = ["PRIOR_NOISES", "STUDENT_DF", "noise_law", "prior_noise"]

#: Noise codes, in the order :func:`prior_noise` indexes them.
PRIOR_NOISES = ("gaussian", "laplace", "student_t", "uniform", "gumbel")

#: Degrees of freedom of the Student-t law (excess kurtosis ``6 / (df - 4) = 6``).
STUDENT_DF = 5.0

_EULER = 0.5772156649015329


def noise_law(key: PRNGKeyArray, shape: tuple[int, ...], code: int) -> Float[Array, "..."]:
    """Noise of the law ``PRIOR_NOISES[code]`` with a *static* ``code``, drawing only the
    random numbers that law needs (from the counter hash of :mod:`._draws`),
    standardised to mean 0 and variance 1.

    * ``gaussian``: ``N(0, 1)`` (one normal per element);
    * ``laplace``: ``Laplace(0, 1/sqrt 2)`` (excess kurtosis 3), by inverting its CDF at a
      uniform ``U``: ``-sign(U - 1/2) log(1 - 2 |U - 1/2|) / sqrt 2``;
    * ``student_t``: ``t_5 sqrt(3/5)`` (excess kurtosis 6), as ``Z_0 / sqrt(chi2_5 / 5)``
      with ``chi2_5 = -2 log(U_1 U_2) + Z_1^2`` (``-2 log U`` is ``chi2_2``, so two of them
      and one squared normal make ``chi2_5`` exactly: two normals and two uniforms per
      element, no rejection sampler);
    * ``uniform``: ``U[-sqrt 3, sqrt 3]`` (excess kurtosis -1.2);
    * ``gumbel``: ``(G - gamma) sqrt 6 / pi``, ``G = -log(-log U)`` standard Gumbel, gamma
      Euler's constant (skewness 1.1395, excess kurtosis 2.4).

    Differentiable: no: a draw from a key and a law code (no float inputs).

    Args:
        key: PRNG key.
        shape: output shape (static).
        code: int in ``[0, 5)`` (static).

    Returns:
        float32 noise of shape ``shape``.
    """
    if not isinstance(code, int) or not 0 <= code < len(PRIOR_NOISES):
        raise ValueError(f"`code` must be a static int in [0, {len(PRIOR_NOISES)}); got {code!r}")
    if code == 0:
        return hash_normals(key, shape)[0]
    if code == 2:
        k_z, k_u = jax.random.split(key)
        (z,) = hash_normals(k_z, (2, *shape))
        (u,) = hash_uniforms(k_u, (2, *shape))
        chi2 = -2.0 * (jnp.log(u[0]) + jnp.log(u[1])) + z[1] ** 2
        return z[0] / jnp.sqrt(chi2 / STUDENT_DF) * math.sqrt((STUDENT_DF - 2) / STUDENT_DF)
    (u,) = hash_uniforms(key, shape)
    if code == 1:
        c = u - 0.5
        return -jnp.sign(c) * jnp.log1p(-2.0 * jnp.abs(c)) / math.sqrt(2.0)
    if code == 3:
        return (2.0 * u - 1.0) * math.sqrt(3.0)
    return (-jnp.log(-jnp.log(u)) - _EULER) * (math.sqrt(6.0) / math.pi)


def prior_noise(key: PRNGKeyArray, shape: tuple[int, ...], code: Int[Array, ""]
                ) -> Float[Array, "..."]:
    """Noise of law ``PRIOR_NOISES[code]`` for a traced ``code`` (:func:`noise_law`, one
    ``lax.switch`` branch per law: a real branch on one task, every law computed and one
    selected under ``vmap``; :func:`.prior.sample_tasks` groups tasks by law instead).

    Differentiable: no: a draw from a key and a law code (no float inputs).

    Args:
        key: PRNG key.
        shape: output shape (static).
        code: int in ``[0, 5)`` (traced; clipped).

    Returns:
        float32 noise of shape ``shape``, mean 0, variance 1.
    """
    code = jnp.clip(jnp.asarray(code, jnp.int32), 0, len(PRIOR_NOISES) - 1)
    return jax.lax.switch(code, [functools.partial(noise_law, key, shape, c)
                                 for c in range(len(PRIOR_NOISES))])

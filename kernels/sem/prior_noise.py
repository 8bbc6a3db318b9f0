"""Zero-mean, unit-variance noise laws of the causal prior, chosen by a traced code.

:mod:`.noise` has the three laws of the LiNGAM experiments with a static kind; the prior
adds heavy tails and skew and picks the law from a traced code, so a mixture of noise
laws is one compiled function.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

__all__ = ["PRIOR_NOISES", "STUDENT_DF", "prior_noise"]

#: Noise codes, in the order :func:`prior_noise` indexes them.
PRIOR_NOISES = ("gaussian", "laplace", "student_t", "uniform", "gumbel")

#: Degrees of freedom of the Student-t law (excess kurtosis ``6 / (df - 4) = 6``).
STUDENT_DF = 5.0

_EULER = 0.5772156649015329


def prior_noise(key: PRNGKeyArray, shape: tuple[int, ...], code: Int[Array, ""]
                ) -> Float[Array, "..."]:
    """Noise of law ``PRIOR_NOISES[code]``, standardised to mean 0 and variance 1.

    * ``gaussian``: ``N(0, 1)``;
    * ``laplace``: ``Laplace(0, 1/sqrt 2)`` (excess kurtosis 3), by inverting its CDF;
    * ``student_t``: ``t_5 sqrt(3/5)`` (excess kurtosis 6), as ``z / sqrt(chi2_5 / 5)``
      with ``chi2_5`` a sum of 5 squared normals;
    * ``uniform``: ``U[-sqrt 3, sqrt 3]`` (excess kurtosis -1.2);
    * ``gumbel``: ``(G - gamma) sqrt 6 / pi``, ``G = -log(-log U)`` standard Gumbel, gamma
      Euler's constant (skewness 1.1395, excess kurtosis 2.4).

    All laws come from one uniform and one normal block (no rejection sampler, no
    branch), so the code may be traced and the function compiles fast under ``vmap``.

    Args:
        key: PRNG key.
        shape: output shape (static).
        code: int in ``[0, 5)`` (traced; clipped).

    Returns:
        float32 noise of shape ``shape``.
    """
    k_u, k_n = jax.random.split(key)
    tiny = jnp.finfo(jnp.float32).tiny
    u = jnp.clip(jax.random.uniform(k_u, shape, jnp.float32), tiny, 1.0 - 1e-7)
    z = jax.random.normal(k_n, (1 + int(STUDENT_DF), *shape), jnp.float32)
    c = u - 0.5
    laplace = -jnp.sign(c) * jnp.log1p(-2.0 * jnp.abs(c)) / math.sqrt(2.0)
    chi2 = jnp.sum(z[1:] ** 2, axis=0)
    student = z[0] / jnp.sqrt(chi2 / STUDENT_DF) * math.sqrt((STUDENT_DF - 2) / STUDENT_DF)
    uniform = (2.0 * u - 1.0) * math.sqrt(3.0)
    gumbel = (-jnp.log(-jnp.log(u)) - _EULER) * (math.sqrt(6.0) / math.pi)
    code = jnp.clip(code, 0, len(PRIOR_NOISES) - 1)
    return jnp.stack([z[0], laplace, student, uniform, gumbel])[code]

"""The position-wise linear map ``x W`` over the last axis, as one 2-D matrix product.

The leading axes (batch, time, ...) are flattened into one row axis first, so that the
forward product and both products of the backward pass (``dx = dy W^T`` and the weight
gradient ``dW = x^T dy``, a contraction over all rows) are plain 2-D GEMMs. Written as
``(B, T, D) @ (D, F)``, XLA:CPU contracts the weight gradient over two axes and runs it
several times slower (benchmarks/RESULTS.md); the values are the same.
"""

from __future__ import annotations

from jaxtyping import Array, Float

__all__ = ["linear"]


def linear(x: Float[Array, "... D"], w: Float[Array, "D F"]) -> Float[Array, "... F"]:
    """``x @ w`` with the leading axes of ``x`` flattened (module docstring); ``w`` is
    cast to ``x``'s dtype.

    Differentiable: yes, in x and w.

    Args:
      x: inputs (..., D).
      w: weights (D, F).

    Returns:
      (..., F) in ``x``'s dtype.
    """
    if w.ndim != 2 or x.shape[-1] != w.shape[0]:
        raise ValueError(f"`x` width {x.shape[-1]} does not match `w` {w.shape}")
    y = x.reshape(-1, x.shape[-1]) @ w.astype(x.dtype)
    return y.reshape(*x.shape[:-1], w.shape[1])

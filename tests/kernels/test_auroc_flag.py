"""AUROC of a truth with no edge (or every edge) is undefined: NaN with a flag,
:func:`graph.auroc_defined` (issue 58, section 3: NaN left without a flag)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import graph

D = 4
SCORES = jnp.arange(D * D, dtype=jnp.float32).reshape(D, D)


@pytest.mark.parametrize("true,defined", [
    (np.zeros((D, D)), False),                      # no positives
    (np.ones((D, D)), False),                       # no negatives (the diagonal is ignored)
    (np.tril(np.ones((D, D)), -1), True),
    (np.eye(D), False),                             # only the diagonal: no edge
])
def test_auroc_defined_flags_the_nan(true, defined):
    flag = graph.auroc_defined(true)
    assert flag.dtype == jnp.bool_ and bool(flag) is defined
    assert bool(jax.jit(graph.auroc_defined)(true)) is defined
    auc = float(graph.auroc(true, SCORES))
    assert bool(np.isnan(auc)) is (not defined)


def test_auroc_defined_names_true_for_bad_input():
    with pytest.raises(ValueError, match="`true`"):
        graph.auroc_defined(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="`true` contains NaN or inf"):
        graph.auroc_defined(np.array([[0.0, np.nan], [1.0, 0.0]]))

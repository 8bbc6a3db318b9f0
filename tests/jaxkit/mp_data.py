"""Deterministic batch of ICA datasets shared by the multi-process test and its worker."""

import numpy as np


def datasets(n_sets: int = 8, n: int = 300, d: int = 3):
    rng = np.random.default_rng(42)
    s = rng.laplace(size=(n_sets, n, d))
    a = rng.normal(size=(n_sets, d, d)) + 2 * np.eye(d)
    xs = np.einsum("bnk,bdk->bnd", s, a)
    ws = rng.normal(size=(n_sets, d, d))
    return xs, ws

"""Shared settings of the crosscoder-training tests and their subprocess workers."""

import numpy as np

D, N_LATENTS, K, WINDOW, BATCH, LR, SEED = 8, 16, 3, 2, 16, 1e-2, 0


def write_store(directory, n_shards: int = 3, n_tokens: int = 120):
    """A tiny store of ``n_shards`` .npy shards (n_tokens, D) with sparse structure."""
    from jaxkit.crosscoder.store import write_shards

    rng = np.random.default_rng(7)
    atoms = rng.normal(size=(24, D))
    shards = []
    for _ in range(n_shards):
        codes = rng.exponential(size=(n_tokens, 24)) * (rng.random((n_tokens, 24)) < 0.1)
        shards.append((codes @ atoms + 0.05 * rng.normal(size=(n_tokens, D))).astype(np.float32))
    return write_shards(directory, shards)


def train_kwargs(**over):
    kw = dict(n_latents=N_LATENTS, k=K, window=WINDOW, lr=LR, k_aux=4, dead_steps=3,
              log_every=1)
    kw.update(over)
    return kw

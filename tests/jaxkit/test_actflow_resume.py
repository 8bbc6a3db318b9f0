"""A killed ActFlow pre-training resumes from its checkpoint to the same parameters."""

import equinox as eqx
import jax
import numpy as np
import pytest

from jaxkit.actflow import domains, loop
from jaxkit.actflow.config import ActFlowConfig

CFG = ActFlowConfig(hidden=16, depth=2, n_data=64, pretrain_steps=60, batch=16, rounds=1,
                    budget=16, adapt_steps=10, n_eval=16, sample_steps=3)


class Killed(Exception):
    pass


def leaves(model):
    return [np.asarray(x) for x in jax.tree.leaves(eqx.filter(model, eqx.is_array))]


def test_pretrain_killed_mid_training_resumes_to_identical_parameters(tmp_path, monkeypatch):
    dom = domains.rings()
    key = jax.random.key(7)
    full = loop.pretrain(dom, CFG, key, checkpoint_dir=tmp_path / "a", checkpoint_every=2)
    real_fit = loop.fit

    def killing_fit(key, state, step, batch_fn, **kw):  # dies while fetching chunk 3
        def batches(i):
            if i == 3:
                raise Killed
            return batch_fn(i)

        return real_fit(key, state, step, batches, **kw)

    monkeypatch.setattr(loop, "fit", killing_fit)
    with pytest.raises(Killed):
        loop.pretrain(dom, CFG, key, checkpoint_dir=tmp_path / "b", checkpoint_every=2,
                      kernels=full.kernels)
    monkeypatch.setattr(loop, "fit", real_fit)
    resumed = loop.pretrain(dom, CFG, key, checkpoint_dir=tmp_path / "b", checkpoint_every=2,
                            kernels=full.kernels)
    assert resumed.resumed_from == 2
    for a, b in zip(leaves(full.model), leaves(resumed.model), strict=True):
        np.testing.assert_array_equal(a, b)
    assert resumed.loss == full.loss
    again = loop.pretrain(dom, CFG, key, checkpoint_dir=tmp_path / "b", kernels=full.kernels)
    assert again.resumed_from == 6  # finished: restored, nothing recomputed
    for a, b in zip(leaves(full.model), leaves(again.model), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="`checkpoint_dir`"):
        loop.pretrain(dom, CFG, jax.random.key(8), checkpoint_dir=tmp_path / "b")

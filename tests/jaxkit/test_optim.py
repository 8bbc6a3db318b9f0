"""jaxkit.optim.optimizer: the one builder gives, step for step, the optimizers the
pipelines built by hand before (ActFlow and CrossCoder's Adam, universal circuits' cosine
Adam, AIRA-Compose's warm-up AdamW with clipping, CausalTab's warm-up-cosine AdamW with
clipping), and names a bad argument."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxkit.optim import optimizer


def _trajectory(opt, steps: int = 7):
    params = {"w": jnp.array([[0.5, -1.0], [2.0, 0.1]]), "b": jnp.array([0.3, -0.2])}
    state = opt.init(params)
    out = []
    for t in range(steps):
        grads = jax.tree.map(lambda p, t=t: jnp.sin(p * (t + 1)) * 3.0, params)
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        out.append(np.concatenate([np.ravel(x) for x in jax.tree.leaves(params)]))
    return np.stack(out)


def _warmup_adamw(lr, warmup, clip, wd):  # AIRA-Compose's, as it was written
    sched = optax.join_schedules([optax.linear_schedule(0.0, lr, max(warmup, 1)),
                                  optax.constant_schedule(lr)], [max(warmup, 1)])
    return optax.chain(optax.clip_by_global_norm(clip),
                       optax.adamw(sched, b1=0.9, b2=0.95, weight_decay=wd))


CASES = {
    "adam": (optax.adam(1e-2), optimizer(1e-2)),
    "cosine adam": (optax.adam(optax.cosine_decay_schedule(0.05, 5)),
                    optimizer(0.05, schedule_kind="cosine", steps=5)),
    "warmup adamw, clipped": (_warmup_adamw(3e-2, 3, 0.5, 0.1),
                              optimizer(3e-2, schedule_kind="warmup", warmup=3, b2=0.95,
                                        weight_decay=0.1, clip_norm=0.5)),
    "warmup-cosine adamw, clipped": (
        optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(
            optax.warmup_cosine_decay_schedule(0.0, 0.02, 2, 6, 0.02 * 0.05),
            weight_decay=1e-4)),
        optimizer(0.02, schedule_kind="warmup_cosine", warmup=2, steps=6,
                  end_lr=0.02 * 0.05, weight_decay=1e-4, clip_norm=1.0)),
}


@pytest.mark.parametrize("name", CASES)
def test_the_builder_is_the_hand_built_optimizer(name):
    before, now = CASES[name]
    np.testing.assert_array_equal(_trajectory(now), _trajectory(before))


@pytest.mark.parametrize("kwargs, word", [
    (dict(lr=0.0), "`lr`"), (dict(lr=float("nan")), "`lr`"),
    (dict(lr=1e-3, schedule_kind="linear"), "`kind`"),
    (dict(lr=1e-3, schedule_kind="cosine"), "`steps`"),
    (dict(lr=1e-3, warmup=-1), "`warmup`"),
    (dict(lr=1e-3, weight_decay=-0.1), "`weight_decay`"),
    (dict(lr=1e-3, clip_norm=0.0), "`clip_norm`"),
])
def test_bad_arguments_are_named(kwargs, word):
    with pytest.raises(ValueError, match=word):
        optimizer(**kwargs)


def test_every_training_builds_its_optimizer_here():
    """No pipeline builds an optax optimizer of its own (issue 70: one optimizer builder);
    an optax optimizer a user passes in is still accepted by the functions that take one."""
    import re
    from pathlib import Path

    import jaxkit

    root = Path(jaxkit.__file__).parent
    pattern = re.compile(r"\boptax\.(adam|adamw|sgd|rmsprop|lamb|lion|adagrad)\(")
    found = [f"{p.relative_to(root)}:{i}" for p in sorted(root.rglob("*.py"))
             if p.name != "optim.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found

"""Saving and loading the causal model's weights (:mod:`jaxkit.causal_model.model`), and
the weights jaxkit ships in ``jaxkit/causal_model/weights/`` (trained by
:mod:`jaxkit.causaltab.longtrain` in the segments ``model.json`` lists, with their
commands, commits and validation figures, and the last segment's training curve in
``curve.json``; ``python -m jaxkit.causaltab.make_weights`` retrains them).

A weights folder holds ``params.npz`` (the parameter pytree's leaves in
``jax.tree.leaves`` order, float32) and ``model.json`` (the :class:`ModelConfig` under
``"config"`` plus free metadata).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.io import atomic_write

from .model import ModelConfig, init_params

__all__ = ["save_weights", "load_weights", "shipped_weights", "WEIGHTS_DIR"]

#: The folder of the shipped weights inside this package.
WEIGHTS_DIR = "weights"


def save_weights(folder: Path, params, cfg: ModelConfig, meta: dict[str, Any]) -> Path:
    """Write ``params.npz`` (flattened leaves) and ``model.json`` (config + ``meta``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    leaves = jax.tree.leaves(params)
    import io

    buf = io.BytesIO()
    np.savez_compressed(buf, *[np.asarray(x, np.float32) for x in leaves])
    atomic_write(folder / "params.npz", buf.getvalue())
    atomic_write(folder / "model.json", json.dumps({"config": cfg._asdict(), **meta}, indent=1))
    return folder


def load_weights(folder) -> tuple[dict, ModelConfig, dict]:
    """Read weights written by :func:`save_weights`: ``(params, cfg, meta)``."""
    folder = Path(folder) if not hasattr(folder, "joinpath") else folder
    meta = json.loads((folder / "model.json").read_text())
    cfg = ModelConfig(**meta.pop("config"))
    # the tree structure only: traced abstractly, nothing drawn or compiled
    template = jax.eval_shape(lambda: init_params(jax.random.key(0), cfg))
    with (folder / "params.npz").open("rb") as fh:
        z = np.load(fh)
        leaves = [jnp.asarray(z[f"arr_{i}"]) for i in range(len(z.files))]
    treedef = jax.tree.structure(template)
    if treedef.num_leaves != len(leaves):
        raise ValueError(f"weights in {folder} do not match the model config {cfg}")
    return jax.tree.unflatten(treedef, leaves), cfg, meta


def shipped_weights():
    """The weights shipped in ``jaxkit/causal_model/weights/`` (``(params, cfg, meta)``), or
    None when absent."""
    folder = resources.files("jaxkit.causal_model") / WEIGHTS_DIR
    if not (folder / "params.npz").is_file():
        return None
    return load_weights(folder)

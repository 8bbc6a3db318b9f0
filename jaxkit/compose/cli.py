"""``jaxkit compose ...``: train a composed byte-level language model on your own text.

``jaxkit compose train-lm --text FILE --layers AMSAMS --out DIR`` splits the file (its
last ``--val-fraction`` validates), trains the model of the layer string through
:func:`jaxkit.compose.train_candidates` (checkpoints in ``DIR/checkpoints``; run the same
command again to resume a killed training) and writes ``DIR/lm`` (:func:`save_lm`;
read it back with :func:`jaxkit.compose.load_lm`) and ``DIR/metrics.json`` (validation
bits per byte, throughput), both atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from jaxkit._cli_common import console
from jaxkit._cli_common import fail as _fail

__all__ = ["app"]

app = typer.Typer(help="Composed Attention/MLP/Mamba byte-level language models.",
                  no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Composed Attention/MLP/Mamba byte-level language models."""


@app.command("train-lm")
def train_lm(
    text: Annotated[Path, typer.Option(help="training text file (bytes)")],
    out: Annotated[Path, typer.Option(help="output folder")],
    layers: Annotated[str, typer.Option(help="layer string over A, M, S")] = "AMAM",
    width: int = 64, heads: int = 4, d_state: int = 16, context: int = 64,
    steps: int = 1000, batch: int = 16, lr: float = 3e-3, chunk: int = 50,
    val_fraction: float = 0.1, seed: int = 0,
    dtype: Annotated[str, typer.Option(help="float32 or bfloat16")] = "float32",
) -> None:
    """Train one model on TEXT and save it in OUT/lm."""
    import jax

    from jaxkit.io import atomic_write

    from .arch import Arch
    from .data import load_text
    from .model import save_lm
    from .train import TrainSettings, train_candidates

    try:
        arch = Arch(layers.strip().upper(), width=width, heads=heads, d_state=d_state,
                    context=context)
        corpus = load_text(text, val_fraction)
        if steps % chunk:
            raise ValueError(f"`steps` ({steps}) must be a multiple of `chunk` ({chunk})")
        s = TrainSettings(steps=steps, batch=batch, lr=lr, chunk=chunk,
                          warmup=min(100, steps // 10), n_val=64, dtype=dtype)
        r = train_candidates(jax.random.key(seed), arch, [arch.layers], corpus, s,
                             checkpoint_dir=out / "checkpoints")
    except (ValueError, RuntimeError) as e:
        _fail(str(e))
    from .model import extract, supernet_from_params

    one = jax.tree.map(lambda a: a[0], r.params)
    model = extract(supernet_from_params(arch, one, letters=r.letters), arch.layers)
    bpb = float(r.val_bpb[-1, 0])
    save_lm(out / "lm", model, meta=dict(text=str(text), steps=steps, val_bpb=bpb))
    atomic_write(out / "metrics.json", json.dumps(dict(
        layers=arch.layers, val_bpb=bpb, tokens_per_s=r.tokens_per_s,
        compile_s=r.compile_s, n_params=arch.n_params(embedding=True)), indent=2) + "\n")
    console.print(f"{arch.layers}: validation {bpb:.3f} bits/byte after {steps} steps; "
                  f"model in {out / 'lm'}")

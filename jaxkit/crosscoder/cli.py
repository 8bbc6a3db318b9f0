"""``jaxkit crosscoder ...``: the crosscoder command line (a :class:`typer.Typer`).

``train`` streams an activation store through :func:`jaxkit.crosscoder.train` and
writes into ``--out``: ``metrics.jsonl`` (one line per logged step), ``checkpoints/``,
and at the end ``params.safetensors`` and ``config.json`` (both written atomically).
``--resume`` continues from the newest checkpoint with the same settings (a changed
learning rate, dead-latent rule or dictionary is refused, naming what differs); the
metric lines logged after that checkpoint by the interrupted run are dropped first, so
every step is logged once. A refused run leaves ``--out`` as it was.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from jaxkit._cli_common import console, err_console
from jaxkit._cli_common import fail as _fail  # one line on stderr, exit 2

__all__ = ["app", "truncate_metrics"]

app = typer.Typer(help="Crosscoders / SAEs trained on stored activations.",
                  no_args_is_help=True)



@app.callback()
def _group() -> None:
    """Crosscoders / SAEs trained on stored activations."""
    # a callback keeps ``train`` a sub-command when the app is run on its own too


def _parse_mesh(spec: str) -> dict[str, int]:
    from jaxkit.distributed import parse_mesh

    try:
        return parse_mesh(spec)
    except ValueError as e:
        _fail(str(e))


def truncate_metrics(path: Path, step: int) -> None:
    """Keep the lines of a ``metrics.jsonl`` logged at or before ``step`` (dropping an
    unreadable partial last line), rewriting the file atomically.

    Args:
      path: the metrics file (nothing happens when it is missing).
      step: the checkpoint step a run resumes from.
    """
    from jaxkit.io import atomic_write

    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and int(rec.get("step", step + 1)) <= step:
            kept.append(line)
    atomic_write(path, "".join(ln + "\n" for ln in kept))


@app.command("train")
def train_cmd(
    activations: Annotated[Path, typer.Option(
        help="activation store: a .npy/.safetensors file or a directory of shards "
             "(n_tokens, d) or (n_docs, n_tokens, d); see jaxkit/crosscoder/ACTIVATIONS.md")],
    n_latents: Annotated[int, typer.Option(help="dictionary size F")],
    k: Annotated[int, typer.Option(help="active latents per window (TopK / BatchTopK)")],
    steps: Annotated[int, typer.Option(help="total training steps")],
    out: Annotated[Path, typer.Option(
        help="output folder: metrics.jsonl, params.safetensors, config.json, checkpoints/")],
    tensor: Annotated[str | None, typer.Option(
        help="tensor to read from .safetensors shards holding several (default: the only "
             "one, or 'activations')")] = None,
    window: Annotated[int, typer.Option(help="consecutive tokens per window (1: SAE)")] = 1,
    stride: Annotated[int | None, typer.Option(help="token step between windows")] = None,
    activation: Annotated[str, typer.Option(help="topk, batch_topk, relu, jumprelu")]
    = "topk",
    batch_size: Annotated[int, typer.Option(help="global batch size")] = 256,
    lr: Annotated[float, typer.Option(help="Adam learning rate")] = 1e-3,
    seed: Annotated[int, typer.Option(help="init and shuffle seed")] = 0,
    k_aux: Annotated[int | None, typer.Option(help="AuxK latents (dead-latent loss)")] = None,
    dead_steps: Annotated[int, typer.Option(help="steps without firing = dead")] = 1000,
    sparsity_coef: Annotated[float, typer.Option(help="sparsity penalty weight")] = 0.0,
    checkpoint_every: Annotated[int, typer.Option(help="steps between checkpoints")] = 1000,
    log_every: Annotated[int, typer.Option(help="steps between metric lines")] = 10,
    mesh: Annotated[str, typer.Option(
        help="device mesh, e.g. data=-1 or data=4,model=2 (latents split over model)")]
    = "data=-1",
    resume: Annotated[bool, typer.Option(help="continue from OUT/checkpoints")] = False,
):
    """Train a crosscoder (window > 1) or SAE on an activation store, sharded over the
    mesh, with orbax checkpoints (--resume continues a killed run exactly).

    Multi-host / TPU pod: run the same command on every host with
    `jaxkit --distributed crosscoder train ...` (JAXKIT_DISTRIBUTED=auto on TPU)."""
    import jax
    import numpy as np
    from rich.progress import MofNCompleteColumn

    from jaxkit.distributed import make_mesh
    from jaxkit.io import atomic_write

    from .store import ActivationStore
    from .train import TrainingDiverged, train

    axes = _parse_mesh(mesh)
    try:
        the_mesh = make_mesh(axes)
        store = ActivationStore(activations, batch_size=batch_size, window=window,
                                stride=stride, seed=seed, tensor=tensor)
    except ValueError as e:
        _fail(str(e))
    main = jax.process_index() == 0
    metrics_path = out / "metrics.jsonl"
    files = {"metrics": None, "resumed": False}
    progress = Progress(SpinnerColumn(), TextColumn("[progress.description]{task.description}"),
                        BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                        TimeElapsedColumn(), console=err_console, disable=not main)
    clock = {"t": None, "step": 0}

    def on_resume(step: int) -> None:
        files["resumed"] = True
        if main:
            truncate_metrics(metrics_path, step)

    def on_step(i: int, m: dict) -> None:
        now = time.perf_counter()
        if clock["t"] is not None and i > clock["step"]:
            m["steps_per_s"] = (i - clock["step"]) / max(now - clock["t"], 1e-9)
        clock["t"], clock["step"] = now, i
        if main:
            if files["metrics"] is None:  # opened once the run has started: a refused
                out.mkdir(parents=True, exist_ok=True)  # run leaves the old file alone
                files["metrics"] = open(metrics_path, "a" if files["resumed"] else "w")
            files["metrics"].write(json.dumps(m) + "\n")
            files["metrics"].flush()
        sps = m.get("steps_per_s")
        stats = (f"{'-' if sps is None else f'{sps:.1f}'} steps/s  FVU {m['fvu']:.4f}  "
                 f"L0 {m['l0']:.1f}  dead {m['dead_fraction']:.1%}")
        progress.update(task, completed=i, stats=stats)

    try:
        with progress:
            task = progress.add_task("crosscoder", total=steps, stats="compiling")
            res = train(jax.random.key(seed), store, n_latents=n_latents, k=k, steps=steps,
                        window=window, activation=activation, lr=lr, mesh=the_mesh,
                        checkpoint_dir=out / "checkpoints", checkpoint_every=checkpoint_every,
                        resume=resume, log_every=log_every, on_step=on_step, k_aux=k_aux,
                        dead_steps=dead_steps, sparsity_coef=sparsity_coef,
                        on_resume=on_resume)
    except ValueError as e:
        _fail(str(e))
    except TrainingDiverged as e:
        _fail(str(e), 3)
    finally:
        if files["metrics"] is not None:
            files["metrics"].close()
    if main:
        from safetensors.numpy import save

        atomic_write(out / "params.safetensors",
                     save({f: np.ascontiguousarray(v) for f, v in res.params._asdict().items()}))
        cfg = dict(res.config, threshold=float(jax.device_get(res.state.aux.threshold)),
                   resumed_from=res.resumed_from, position=list(res.position))
        atomic_write(out / "config.json", json.dumps(cfg, indent=2) + "\n")
        last = res.history[-1] if res.history else {}
        console.print(f"trained {steps} steps"
                      + (f" (resumed from step {res.resumed_from})" if res.resumed_from else "")
                      + (f": FVU {last['fvu']:.4f}, L0 {last['l0']:.1f}, dead "
                         f"{last['dead_fraction']:.1%}" if last else "")
                      + f"; saved {out / 'params.safetensors'}", highlight=False)


if __name__ == "__main__":
    app()

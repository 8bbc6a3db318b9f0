"""The ``jaxkit`` command line: ``info``, ``run``, ``bench`` and the family commands."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(help="jaxkit: JAX kernels and research pipelines.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
lingam_app = typer.Typer(help="LiNGAM causal discovery on your own data.", no_args_is_help=True)
app.add_typer(lingam_app, name="lingam")
ballad_app = typer.Typer(help="Ballad: LLM-driven heuristic discovery.", no_args_is_help=True)
app.add_typer(ballad_app, name="ballad")
crosscoder_app = typer.Typer(help="Crosscoders / SAEs trained on stored activations.",
                             no_args_is_help=True)
app.add_typer(crosscoder_app, name="crosscoder")
console = Console()
err_console = Console(stderr=True)


def _fail(msg: str, code: int = 2):
    err_console.print(f"[bold red]error:[/] {msg}")
    raise typer.Exit(code)


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("[progress.description]{task.description}"),
                    BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), console=err_console, transient=True)


@app.callback()
def _main(
    distributed: Annotated[bool, typer.Option(
        help="Initialise multi-host JAX from JAXKIT_COORDINATOR / JAXKIT_NUM_PROCESSES / "
             "JAXKIT_PROCESS_ID (or JAXKIT_DISTRIBUTED=auto) before anything else.")] = False,
):
    if distributed:
        from . import distributed as jd

        if not jd.initialize():
            _fail("--distributed given but no JAXKIT_COORDINATOR or JAXKIT_DISTRIBUTED=auto")


@app.command()
def info():
    """JAX version, backend, devices and process count."""
    import jax

    from . import __version__

    devs = jax.devices()
    t = Table(title="jaxkit environment", show_header=False)
    t.add_row("jaxkit", __version__)
    t.add_row("jax / jaxlib", f"{jax.__version__} / {jax.lib.__version__}")
    t.add_row("python", sys.version.split()[0])
    t.add_row("backend", jax.default_backend())
    t.add_row("devices", f"{len(devs)} x {devs[0].device_kind} "
                         f"({jax.local_device_count()} local)")
    t.add_row("processes", f"{jax.process_count()} (this is {jax.process_index()})")
    t.add_row("x64", str(jax.config.jax_enable_x64))
    console.print(t)


@app.command()
def run(
    name: Annotated[str, typer.Argument(help="pipeline name, or 'all'")],
    quick: Annotated[bool, typer.Option(help="small, fast configuration")] = False,
    out: Annotated[Path | None, typer.Option(help="output folder (default runs/NAME)")] = None,
    seed: Annotated[int, typer.Option(help="base PRNG seed")] = 0,
    fresh: Annotated[bool, typer.Option(
        help="recompute every stage instead of resuming a killed run's saved stages")] = False,
):
    """Run a pipeline (or all of them) and write report.md plus PNG figures.

    Each finished stage is saved (atomically) in the output folder, so a killed run
    resumes where it stopped when started again with the same configuration."""
    from . import pipelines
    from .distributed import make_mesh
    from .report import write_report

    todo = pipelines.names() if name == "all" else [name]
    for n in todo:
        try:
            pipelines.get(n)
        except KeyError as e:
            _fail(str(e.args[0]))
    out_dir = out or Path("runs") / name
    mesh = make_mesh({"data": -1})
    results = []
    with _progress() as progress:
        for n in todo:
            ctx = pipelines.RunContext(out_dir=out_dir / n if name == "all" else out_dir,
                                       quick=quick, seed=seed, mesh=mesh, progress=progress,
                                       resume=not fresh)
            ctx.out_dir.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            res = pipelines.get(n)(ctx)
            res.metrics.setdefault("wall_s", time.perf_counter() - t0)
            results.append(res)
            for w in res.warnings:
                err_console.print(f"[yellow]warning ({n}):[/] {w}")
            console.print(f"[green]done[/] {n} in {time.perf_counter() - t0:.1f}s")
    report = write_report(out_dir, results, quick=quick)
    console.print(f"report: {report}")


def _benchmarks_dir() -> Path | None:
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):
        d = base / "benchmarks"
        if d.is_dir() and any(d.glob("bench_*.py")):
            return d
    return None


@app.command()
def bench(
    name: Annotated[str, typer.Argument(help="benchmark name, e.g. 'ica'")],
    json_out: Annotated[Path | None, typer.Option("--json", help="write numbers here")] = None,
    quick: Annotated[bool, typer.Option(help="small sizes")] = False,
):
    """Run a benchmark from the source checkout's benchmarks/ folder (jaxkit vs peers)."""
    d = _benchmarks_dir()
    if d is None:
        _fail("benchmarks/ not found: benchmarks ship with the source checkout; run from it")
    path = d / f"bench_{name}.py"
    if not path.is_file():
        avail = sorted(p.stem.removeprefix("bench_") for p in d.glob("bench_*.py"))
        _fail(f"unknown benchmark {name!r}; available: {', '.join(avail)}")
    spec = importlib.util.spec_from_file_location(f"jaxkit_bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    argv = (["--json", str(json_out)] if json_out else []) + (["--quick"] if quick else [])
    raise typer.Exit(int(mod.main(argv) or 0))


@lingam_app.command("fit")
def lingam_fit(
    data: Annotated[Path, typer.Argument(help="CSV with a header row, one column a variable")],
    method: Annotated[str, typer.Option(help="ica or direct")] = "ica",
    prune: Annotated[bool, typer.Option(help="adaptive-lasso pruning")] = True,
    seed: Annotated[int, typer.Option(help="PRNG seed (ICA initialisation)")] = 0,
    max_iter: Annotated[int, typer.Option(help="FastICA iteration budget (ica)")] = 1000,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the graph as JSON")]
    = None,
    x64: Annotated[bool, typer.Option(help="compute in float64")] = True,
):
    """Fit ICA-LiNGAM or DirectLiNGAM to one dataset and print the weighted graph."""
    import jax

    if x64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from .io import DataError, read_csv_matrix

    if method not in ("ica", "direct"):
        _fail(f"--method must be 'ica' or 'direct'; got {method!r}")
    try:
        x, names = read_csv_matrix(data)
    except DataError as e:
        _fail(str(e))
    from .kernels import lingam

    try:
        if method == "ica":
            res = lingam.ica_lingam(jax.random.key(seed), jnp.asarray(x), prune=prune,
                                    max_iter=max_iter)
        else:
            res = lingam.direct_lingam(jnp.asarray(x), prune=prune)
        res = jax.block_until_ready(res)
    except ValueError as e:
        _fail(f"{data}: {e}")
    adj = jax.device_get(res.adjacency)
    order = [names[i] for i in jax.device_get(res.causal_order)]
    converged = bool(res.converged)
    if not converged:
        err_console.print(f"[yellow]warning:[/] FastICA did not converge in "
                          f"{int(res.n_iter)} iterations; the graph may be unreliable")
    edges = [{"cause": names[j], "effect": names[i], "weight": float(adj[i, j])}
             for i in range(len(names)) for j in range(len(names)) if adj[i, j] != 0]
    if json_out:
        payload = {"method": method, "variables": names, "causal_order": order,
                   "adjacency": adj.tolist(), "adjacency_convention": "[effect, cause]",
                   "edges": edges, "converged": converged, "n_samples": int(x.shape[0])}
        tmp = json_out.with_suffix(json_out.suffix + ".tmp")
        tmp.write_text(json.dumps(payload, indent=2) + "\n")
        tmp.replace(json_out)
    t = Table(title=f"{'ICA' if method == 'ica' else 'Direct'}LiNGAM: {len(edges)} edges "
                    f"(n={x.shape[0]}, d={x.shape[1]})")
    for col in ("cause", "effect", "weight"):
        t.add_column(col, justify="right" if col == "weight" else "left")
    for e in sorted(edges, key=lambda e: -abs(e["weight"])):
        t.add_row(e["cause"], e["effect"], f"{e['weight']:+.4f}")
    console.print(t)
    console.print("causal order: " + " -> ".join(order))


@ballad_app.command("discover")
def ballad_discover(
    models: Annotated[str | None, typer.Option(
        help="LLM pool 'name:price_in:price_out,...' (dollars per 1M tokens; prices "
             "optional); default env JAXKIT_LLM_POOL")] = None,
    base_url: Annotated[str | None, typer.Option(
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1; default env "
             "JAXKIT_LLM_BASE_URL (or OPENAI_BASE_URL)")] = None,
    api_key: Annotated[str | None, typer.Option(
        help="API key; default env JAXKIT_LLM_API_KEY (or OPENAI_API_KEY)")] = None,
    router: Annotated[str, typer.Option(
        help="ballad, ucb1, uniform, or a model name (always that model)")] = "ballad",
    calls: Annotated[int, typer.Option(help="LLM calls (search steps)")] = 20,
    seed: Annotated[int, typer.Option(help="seed of the instances and of the search")] = 0,
    instances: Annotated[int, typer.Option(help="Weibull instances to evaluate on")] = 5,
    items: Annotated[int, typer.Option(help="items per instance (capacity 100)")] = 1000,
    timeout: Annotated[float, typer.Option(
        help="sandbox seconds per candidate evaluation")] = 30.0,
    llm_timeout: Annotated[float, typer.Option(help="seconds per LLM HTTP call")] = 120.0,
    out: Annotated[Path, typer.Option(
        help="output folder: population.json, best.py, report.md")]
    = Path("runs/ballad-discover"),
    resume: Annotated[bool, typer.Option(
        help="continue from OUT/population.json (same --seed/--instances/--items)")] = False,
):
    """Discover online bin-packing heuristics (Python priority functions) with a pool of
    LLMs routed by a bandit, starting from best fit.

    Saved atomically to OUT after every LLM call; --resume continues a killed run."""
    from rich.markup import escape

    from .ballad import discover as dsc
    from .ballad.llm import pool_from_env

    if calls < 1:
        _fail(f"--calls must be >= 1; got {calls}")
    if instances < 1 or items < 2:
        _fail(f"--instances must be >= 1 and --items >= 2; got {instances} and {items}")
    if timeout <= 0 or llm_timeout <= 0:
        _fail("--timeout and --llm-timeout must be positive")
    try:
        pool = pool_from_env(models, base_url=base_url, api_key=api_key, timeout=llm_timeout)
    except ValueError as e:
        _fail(f"{e}. Set JAXKIT_LLM_POOL (or --models) and JAXKIT_LLM_BASE_URL (or "
              "--base-url); JAXKIT_LLM_API_KEY (or --api-key) if the server needs one")
    names = [p.name for p in pool]
    if router not in (*dsc.ROUTERS, *names):
        _fail(f"unknown --router {router!r}; choose one of {', '.join(dsc.ROUTERS)} or a "
              f"model name ({', '.join(names)})")
    data = dsc.weibull_items(seed, instances, items)

    def show(t: int, node: dict) -> None:
        what = (f"excess {node['excess']:.4f} %" if node["ok"]
                else f"[yellow]failed[/]: {escape(str(node['error']))}")
        console.print(f"step {t + 1}/{calls} node {node['id']} {escape(node['model'])}: "
                      f"{what} (${node['cost']:.6f})", highlight=False)

    console.print(f"discovering with {', '.join(names)} (router {router}, {calls} calls, "
                  f"{instances} x {items} items) -> {out}", highlight=False)
    try:
        s = dsc.discover(pool, router=router, calls=calls, seed=seed, items=data,
                         capacity=100.0, timeout=timeout, out_dir=out, resume=resume,
                         progress=show)
    except ValueError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        _fail(f"interrupted; every finished step is saved in {out} (continue with --resume)",
              130)
    t = Table(title="ballad discover")
    t.add_column("model")
    for col in ("calls", "ok", "failures", "cost ($)", "best excess (%)"):
        t.add_column(col, justify="right")
    for name, m in s["per_model"].items():
        be = "-" if m["best_excess"] is None else f"{m['best_excess']:.4f}"
        t.add_row(name, str(m["calls"]), str(m["ok"]), str(m["failures"]),
                  f"{m['cost']:.6f}", be)
    console.print(t)
    console.print(f"best excess {s['best_excess']:.4f} % (node {s['best_id']}, "
                  f"{s['best_model'] or 'initial'}; best fit {s['baseline_excess']:.4f} %); "
                  f"{s['calls']} calls, {s['failures']} failures, "
                  f"total cost ${s['total_cost']:.6f}", highlight=False)
    console.print(f"saved {out / 'population.json'}, {out / 'best.py'}, {out / 'report.md'}",
                  highlight=False)


def _parse_mesh(spec: str) -> dict[str, int]:
    try:
        axes = {k.strip(): int(v) for k, v in (kv.split("=") for kv in spec.split(","))}
    except ValueError:
        _fail(f"--mesh must look like 'data=-1' or 'data=4,model=2'; got {spec!r}")
    if set(axes) - {"data", "model"} or "data" not in axes:
        _fail(f"--mesh axes must be 'data' and optionally 'model'; got {spec!r}")
    return axes


@crosscoder_app.command("train")
def crosscoder_train(
    activations: Annotated[Path, typer.Option(
        help="activation store: a .npy/.safetensors file or a directory of shards "
             "(n_tokens, d) or (n_docs, n_tokens, d); see jaxkit/crosscoder/ACTIVATIONS.md")],
    n_latents: Annotated[int, typer.Option(help="dictionary size F")],
    k: Annotated[int, typer.Option(help="active latents per window (TopK / BatchTopK)")],
    steps: Annotated[int, typer.Option(help="total training steps")],
    out: Annotated[Path, typer.Option(
        help="output folder: metrics.jsonl, params.safetensors, config.json, checkpoints/")],
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

    from .crosscoder.store import ActivationStore
    from .crosscoder.train import TrainingDiverged, train
    from .distributed import make_mesh

    axes = _parse_mesh(mesh)
    try:
        the_mesh = make_mesh(axes)
        store = ActivationStore(activations, batch_size=batch_size, window=window,
                                stride=stride, seed=seed)
    except ValueError as e:
        _fail(str(e))
    main = jax.process_index() == 0
    if main:
        out.mkdir(parents=True, exist_ok=True)
    metrics = open(out / "metrics.jsonl", "a" if resume else "w") if main else None
    progress = Progress(SpinnerColumn(), TextColumn("[progress.description]{task.description}"),
                        BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                        TimeElapsedColumn(), console=err_console, disable=not main)
    clock = {"t": None, "step": 0}

    def on_step(i: int, m: dict) -> None:
        now = time.perf_counter()
        if clock["t"] is not None and i > clock["step"]:
            m["steps_per_s"] = (i - clock["step"]) / max(now - clock["t"], 1e-9)
        clock["t"], clock["step"] = now, i
        if metrics is not None:
            metrics.write(json.dumps(m) + "\n")
            metrics.flush()
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
                        dead_steps=dead_steps, sparsity_coef=sparsity_coef)
    except ValueError as e:
        _fail(str(e))
    except TrainingDiverged as e:
        _fail(str(e), 3)
    finally:
        if metrics is not None:
            metrics.close()
    if main:
        from safetensors.numpy import save_file

        save_file({f: np.ascontiguousarray(v) for f, v in res.params._asdict().items()},
                  str(out / "params.safetensors"))
        cfg = dict(res.config, threshold=float(jax.device_get(res.state.threshold)),
                   resumed_from=res.resumed_from, position=list(res.position))
        (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        last = res.history[-1] if res.history else {}
        console.print(f"trained {steps} steps"
                      + (f" (resumed from step {res.resumed_from})" if res.resumed_from else "")
                      + (f": FVU {last['fvu']:.4f}, L0 {last['l0']:.1f}, dead "
                         f"{last['dead_fraction']:.1%}" if last else "")
                      + f"; saved {out / 'params.safetensors'}", highlight=False)


if __name__ == "__main__":
    app()

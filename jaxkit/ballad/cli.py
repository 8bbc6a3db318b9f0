"""``jaxkit ballad``: LLM-driven discovery of bin-packing heuristics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from jaxkit._cli_common import console
from jaxkit._cli_common import fail as _fail

ballad_app = typer.Typer(help="Ballad: LLM-driven heuristic discovery.", no_args_is_help=True)


@ballad_app.command("discover")
def ballad_discover(
    models: Annotated[str | None, typer.Option(
        help="LLM pool 'name:price_in:price_out,...' (dollars per 1M tokens; prices "
             "optional); default env JAXKIT_LLM_POOL")] = None,
    base_url: Annotated[str | None, typer.Option(
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1; default env "
             "JAXKIT_LLM_BASE_URL (or OPENAI_BASE_URL); none: the in-process jaxkit.lm "
             "model (local://MODEL names one)")] = None,
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

    from . import discover as dsc
    from .llm import pool_from_env

    if calls < 1:
        _fail(f"--calls must be >= 1; got {calls}")
    if instances < 1 or items < 2:
        _fail(f"--instances must be >= 1 and --items >= 2; got {instances} and {items}")
    if timeout <= 0 or llm_timeout <= 0:
        _fail("--timeout and --llm-timeout must be positive")
    if out.exists() and not out.is_dir():
        _fail(f"--out {out}: is a file, not a folder")
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

"""``jaxkit lingam``: LiNGAM causal discovery on the user's own CSV data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from jaxkit._cli_common import check_json_path, console, err_console
from jaxkit._cli_common import fail as _fail

lingam_app = typer.Typer(help="LiNGAM causal discovery on your own data.", no_args_is_help=True)


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

    from ..io import DataError, atomic_write, read_csv_matrix

    if method not in ("ica", "direct"):
        _fail(f"--method must be 'ica' or 'direct'; got {method!r}")
    if json_out is not None:
        check_json_path(json_out)
    try:
        x, names = read_csv_matrix(data)
    except DataError as e:
        _fail(str(e))
    from ..kernels import lingam

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
        atomic_write(json_out, json.dumps(payload, indent=2) + "\n")
    t = Table(title=f"{'ICA' if method == 'ica' else 'Direct'}LiNGAM: {len(edges)} edges "
                    f"(n={x.shape[0]}, d={x.shape[1]})")
    for col in ("cause", "effect", "weight"):
        t.add_column(col, justify="right" if col == "weight" else "left")
    for e in sorted(edges, key=lambda e: -abs(e["weight"])):
        t.add_row(e["cause"], e["effect"], f"{e['weight']:+.4f}")
    console.print(t)
    console.print("causal order: " + " -> ".join(order))

"""``jaxkit causaltab``: CausalTab edge probabilities for the user's own data.

``jaxkit causaltab predict data.csv [--interventions mask.csv] [--threshold P]
[--json out.json]`` prints the edges with probability above the threshold (default:
the ``round(sum p)`` most probable edges), as a DAG: edges added by decreasing
probability unless they close a cycle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from jaxkit._cli_common import check_json_path, console
from jaxkit._cli_common import fail as _fail

causaltab_app = typer.Typer(help="CausalTab amortised causal discovery on your own data.",
                            no_args_is_help=True)


@causaltab_app.callback()
def _group():
    """CausalTab amortised causal discovery on your own data (``predict``)."""


@causaltab_app.command("predict")
def causaltab_predict(
    data: Annotated[Path, typer.Argument(
        help="CSV with a header row (or a Parquet file), one column a variable")],
    interventions: Annotated[Path | None, typer.Option(
        help="CSV 0/1 mask of the same shape (header row): row r intervened on column v")]
    = None,
    intervention_column: Annotated[str | None, typer.Option(
        help="column of DATA naming each row's intervened variables ('a;b'; empty, none "
             "or obs: observational); not a variable itself")] = None,
    threshold: Annotated[float | None, typer.Option(
        help="edge probability threshold (default: the round(sum p) most probable edges)")]
    = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the result as JSON")]
    = None,
):
    """Edge probabilities P(cause -> effect) from the shipped CausalTab weights.

    Known interventions come either as an intervention column of DATA
    (--intervention-column) or as a separate 0/1 mask file (--interventions)."""
    from jaxkit.causal_model.predict import predict, read_data

    from ..io import DataError, atomic_write, read_csv_matrix
    from .evaluate import dag_projection

    if threshold is not None and not 0.0 < threshold < 1.0:
        _fail(f"--threshold must lie in (0, 1); got {threshold}")
    if json_out is not None:
        check_json_path(json_out)
    try:
        if intervention_column and interventions is not None:
            _fail("give --intervention-column or --interventions, not both")
        x, names, mask = read_data(data, intervention_column or "")
        if interventions is not None:
            mask = read_csv_matrix(interventions)[0]
    except DataError as e:
        _fail(str(e))
    try:
        p = predict(x, mask)
    except (ValueError, FileNotFoundError, FloatingPointError) as e:
        _fail(f"{data}: {e}")
    g = dag_projection(p, threshold)
    edges = [{"cause": names[j], "effect": names[i], "probability": float(p[i, j])}
             for i in range(len(names)) for j in range(len(names)) if g[i, j]]
    if json_out:
        payload = {"variables": names, "probabilities": p.tolist(),
                   "convention": "probabilities[effect][cause]", "threshold": threshold,
                   "edges": edges, "n_samples": int(x.shape[0])}
        atomic_write(json_out, json.dumps(payload, indent=2) + "\n")
    rule = f"p > {threshold:g}" if threshold is not None else "round(sum p) edges"
    t = Table(title=f"CausalTab: {len(edges)} edges (n={x.shape[0]}, d={x.shape[1]}, {rule})")
    for col in ("cause", "effect", "probability"):
        t.add_column(col, justify="right" if col == "probability" else "left")
    for e in sorted(edges, key=lambda e: -e["probability"]):
        t.add_row(e["cause"], e["effect"], f"{e['probability']:.3f}")
    console.print(t)

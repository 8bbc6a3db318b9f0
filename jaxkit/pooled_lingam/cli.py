"""``jaxkit lingam``: LiNGAM causal discovery on the user's own CSV data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
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
    prior_knowledge: Annotated[Path | None, typer.Option(
        "--prior-knowledge",
        help="CSV d x d matrix (lingam's convention): entry [i, j] = 1 if variable j has a "
             "path to variable i, 0 if it has none, -1 unknown; an optional header row "
             "names the variables as in DATA")] = None,
    soft_prior: Annotated[bool, typer.Option(
        help="apply the prior knowledge softly (lingam's apply_prior_knowledge_softly; "
             "direct only)")] = False,
    measure: Annotated[str, typer.Option(
        help="DirectLiNGAM independence measure: pwling or kernel (kernel is O(n^3): "
             "small n)")] = "pwling",
    bootstrap: Annotated[int, typer.Option(
        help="refit on N bootstrap resamples (vmapped) and report each edge's "
             "probability")] = 0,
):
    """Fit ICA-LiNGAM or DirectLiNGAM to one dataset and print the weighted graph."""
    import jax

    if x64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from ..io import DataError, atomic_write, read_csv_matrix

    if method not in ("ica", "direct"):
        _fail(f"--method must be 'ica' or 'direct'; got {method!r}")
    if measure not in ("pwling", "kernel"):
        _fail(f"--measure must be 'pwling' or 'kernel'; got {measure!r}")
    if method == "ica" and (soft_prior or measure != "pwling"):
        _fail("--soft-prior and --measure apply to --method direct only")
    if bootstrap < 0:
        _fail(f"--bootstrap must be a non-negative number of resamples; got {bootstrap}")
    if json_out is not None:
        check_json_path(json_out)
    try:
        x, names = read_csv_matrix(data)
    except DataError as e:
        _fail(str(e))
    pk = None if prior_knowledge is None else _read_prior(prior_knowledge, names)
    from ..kernels import lingam

    kw = {"prune": prune, "prior_knowledge": pk}
    if method == "ica":
        kw["max_iter"] = max_iter
    else:
        kw.update(apply_prior_knowledge_softly=soft_prior, measure=measure)
    boot = None
    fit_key, boot_key = jax.random.split(jax.random.key(seed))
    try:
        if method == "ica":
            res = lingam.ica_lingam(fit_key, jnp.asarray(x), **kw)
        else:
            res = lingam.direct_lingam(jnp.asarray(x), **kw)
        res = jax.block_until_ready(res)
        if bootstrap:
            boot = lingam.bootstrap(boot_key, jnp.asarray(x), bootstrap,
                                    method=method, **kw)
            boot_p = jax.device_get(lingam.bootstrap_probabilities(boot))
    except ValueError as e:
        _fail(f"{data}: {e}")
    adj = jax.device_get(res.adjacency)
    if not np.all(np.isfinite(adj)):
        scale = float(np.nanmax(np.abs(x))) if x.size else 0.0
        _fail(f"{data}: the fit is not finite (the data's largest magnitude is {scale:.3g}; "
              "rescale the columns, e.g. to unit variance, and fit again)")
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
        if pk is not None:
            payload["prior_knowledge"] = {"matrix": pk.tolist(), "soft": soft_prior}
        if boot is not None:
            payload["bootstrap"] = {"n_sampling": bootstrap,
                                    "probabilities": boot_p.tolist(),
                                    "probabilities_convention": "[effect, cause]"}
        atomic_write(json_out, json.dumps(payload, indent=2) + "\n")
    t = Table(title=f"{'ICA' if method == 'ica' else 'Direct'}LiNGAM: {len(edges)} edges "
                    f"(n={x.shape[0]}, d={x.shape[1]})")
    cols = ("cause", "effect", "weight") + (("bootstrap p",) if boot is not None else ())
    for col in cols:
        t.add_column(col, justify="left" if col in ("cause", "effect") else "right")
    idx = {n: i for i, n in enumerate(names)}
    for e in sorted(edges, key=lambda e: -abs(e["weight"])):
        row = [e["cause"], e["effect"], f"{e['weight']:+.4f}"]
        if boot is not None:
            row.append(f"{boot_p[idx[e['effect']], idx[e['cause']]]:.2f}")
        t.add_row(*row)
    console.print(t)
    console.print("causal order: " + " -> ".join(order))


def _read_prior(path: Path, names: list[str]):
    """The prior-knowledge CSV: d rows of d numbers (-1 / 0 / 1, or empty / NaN for
    unknown), with an optional header row naming the variables of the data."""
    import csv

    import numpy as np

    try:
        rows = [r for r in csv.reader(path.read_text().splitlines()) if r]
    except OSError as e:
        _fail(f"--prior-knowledge {path}: {e}")
    if rows and any(c.strip() and not _is_number(c) for c in rows[0]):
        header = [c.strip() for c in rows[0]]
        if header != names:
            _fail(f"--prior-knowledge {path}: header {header} does not match the data's "
                  f"columns {names}")
        rows = rows[1:]
    try:
        pk = np.array([[float(c) if c.strip() else np.nan for c in r] for r in rows])
    except ValueError as e:
        _fail(f"--prior-knowledge {path}: {e}")
    if pk.shape != (len(names), len(names)):
        _fail(f"--prior-knowledge {path}: a {len(names)} x {len(names)} matrix is needed "
              f"(one row and column per variable of the data); got shape {pk.shape}")
    return pk


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True

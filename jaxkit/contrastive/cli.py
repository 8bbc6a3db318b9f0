"""``jaxkit contrastive``: contrastive discovery on your own hypotheses file.

``jaxkit contrastive discover FILE.json`` reads a MECE set of explanations, the outcome
set, the candidate experiments (cost and likelihood table each) and the outcomes already
observed (format: :mod:`jaxkit.contrastive.userfile`), and prints the posterior over the
explanations, whether it is resolved (largest posterior >= ``--tau``) and the experiments
not yet run ranked by expected information gain per cost, best first (the contrastive
score of the paper). ``--json OUT`` writes the same numbers. A malformed file is a
one-line error naming the file and the experiment or hypothesis at fault (exit code 2).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from jaxkit._cli_common import check_json_path, console
from jaxkit._cli_common import fail as _fail

__all__ = ["contrastive_app"]

contrastive_app = typer.Typer(help="Contrastive discovery: rank experiments by how they "
                                   "would redistribute belief over your explanations.",
                              no_args_is_help=True)


@contrastive_app.callback()
def _group() -> None:
    """Contrastive discovery on your own hypotheses (a group, so that ``discover`` stays a
    subcommand while it is the only one)."""


def _num(x: float):
    return float(x) if math.isfinite(float(x)) else None


@contrastive_app.command("discover")
def discover_file(
    data: Annotated[Path, typer.Argument(help="hypotheses JSON file (see "
                                              "jaxkit.contrastive.userfile)")],
    tau: Annotated[float, typer.Option(help="resolution threshold on the largest "
                                            "posterior")] = 0.9,
    top: Annotated[int, typer.Option(help="show the best TOP experiments (0: all)")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the posterior and "
                                                                 "the ranking as JSON")]
    = None,
):
    """The posterior after the observed outcomes and the next experiments to run, ranked
    by expected information gain per cost."""
    from jaxkit.io import DataError, atomic_write

    from .userfile import rank_file, read_hypotheses

    if not 0 < tau <= 1:
        _fail(f"--tau must be in (0, 1]; got {tau}")
    if top < 0:
        _fail(f"--top must be >= 0; got {top}")
    if json_out is not None:
        check_json_path(json_out)
    try:
        h = read_hypotheses(data)
    except (DataError, OSError) as e:
        _fail(str(e))
    r = rank_file(h)
    post = [float(p) for p in r["posterior"]]
    best = max(range(len(post)), key=post.__getitem__)
    resolved = (not r["impossible"]) and post[best] >= tau
    order = r["order"][:top] if top else r["order"]

    t = Table(title=f"Belief over {len(h.hypotheses)} explanations after "
                    f"{len(h.observed)} observed outcome(s)")
    t.add_column("explanation")
    t.add_column("posterior", justify="right")
    for n, p in zip(h.hypotheses, post, strict=True):
        t.add_row(n, f"{p:.4f}")
    console.print(t)
    if r["impossible"]:
        console.print("[bold red]An observed outcome has probability 0 under every "
                      "explanation: the set is not exhaustive (add an explanation).[/]")
    else:
        console.print(f"{'resolved' if resolved else 'not resolved'}: largest posterior "
                      f"{post[best]:.4f} ({h.hypotheses[best]}) vs tau {tau:g}")
    t = Table(title="Next experiments, best first (expected information gain per cost, "
                    "nats)")
    for c in ("rank", "experiment", "cost", "EIG", "EIG / cost"):
        t.add_column(c, justify="left" if c == "experiment" else "right")
    for k, i in enumerate(order):
        t.add_row(str(k + 1), h.experiments[i], f"{h.costs[i]:g}", f"{r['eig'][i]:.4f}",
                  f"{r['eig_per_cost'][i]:.4f}")
    console.print(t)
    if not order:
        console.print("No experiment left to run.")
    if json_out is not None:
        doc = dict(file=str(data), hypotheses=list(h.hypotheses),
                   posterior=dict(zip(h.hypotheses, post, strict=True)),
                   resolved=bool(resolved), tau=tau, not_exhaustive=bool(r["impossible"]),
                   ranking=[dict(rank=k + 1, experiment=h.experiments[i],
                                 cost=float(h.costs[i]), eig=_num(r["eig"][i]),
                                 eig_per_cost=_num(r["eig_per_cost"][i]))
                            for k, i in enumerate(order)])
        atomic_write(json_out, json.dumps(doc, indent=2))
        console.print(f"wrote {json_out}")

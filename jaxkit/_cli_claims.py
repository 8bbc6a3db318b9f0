"""``jaxkit claims``: verdict stability over seeds, and the tallies of recorded runs.

``jaxkit claims stability NAME --seeds 0,1,2`` reruns a pipeline's quick configuration per
seed (:mod:`jaxkit.claims_stability`). ``jaxkit claims tally [RESULTS]`` counts the paper
claims of every recorded run (``RESULTS/*/metrics.json``) by verdict; with ``--write`` it
replaces the table between the tally markers of ``RESULTS/README.md``, and a test checks
that the committed table equals what the command computes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ._cli_common import console
from ._cli_common import fail as _fail

claims_app = typer.Typer(help="the claims protocol: verdict stability and tallies",
                         no_args_is_help=True)

BEGIN = "<!-- tally:begin (written by `jaxkit claims tally --write`; do not edit) -->"
END = "<!-- tally:end -->"


def tally_table(results: Path) -> str:
    """The Markdown table of every recorded run's paper claims by verdict (rows sorted by
    folder; a run recorded before claim kinds existed counts every row as a paper claim,
    and says so)."""
    from .claims import TALLIED, Claim, tally
    from .report import markdown_table

    rows, total = [], dict.fromkeys(TALLIED, 0)
    for m in sorted(results.glob("*/metrics.json")):
        data = json.loads(m.read_text())
        claims = [Claim.from_dict(c) for c in data.get("claims", [])]
        kinds = all("kind" in c for c in data.get("claims", []))
        counts = tally(claims)
        for k in TALLIED:
            total[k] += counts[k]
        other = len(claims) - sum(counts.values())
        rows.append([m.parent.name, *counts.values(), other,
                     "" if kinds else "recorded before claim kinds: every row counted"])
    rows.append(["**all**", *total.values(), "", ""])
    return markdown_table(("run", *TALLIED, "setup / extension", "note"), rows)


@claims_app.command("tally")
def tally_cmd(
    results: Annotated[Path, typer.Argument(help="folder of recorded runs")] = Path("results"),
    write: Annotated[bool, typer.Option(
        help="replace the table between the tally markers of RESULTS/README.md")] = False,
):
    """Count the paper claims of every recorded run by verdict."""
    from .io import atomic_write

    if not results.is_dir():
        _fail(f"{results}: no such folder")
    table = tally_table(results)
    if not write:
        console.print(table, markup=False, highlight=False, soft_wrap=True)
        return
    readme = results / "README.md"
    text = readme.read_text() if readme.exists() else ""
    block = f"{BEGIN}\n{table}\n{END}"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = block + "\n\n" + text
    atomic_write(readme, text)
    console.print(f"wrote the tally of {readme}")


@claims_app.command("stability")
def stability_cmd(
    name: Annotated[str, typer.Argument(help="pipeline name (jaxkit list)")],
    seeds: Annotated[str, typer.Option(help="comma-separated base seeds")] = "0,1,2",
    out: Annotated[Path | None, typer.Option(
        help="output folder (default runs/stability-NAME)")] = None,
    isa: Annotated[str | None, typer.Option(
        help="run under a smaller instruction set: avx2 or avx512")] = None,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", help="field=value for every run (repeatable)")] = None,
):
    """Rerun a pipeline's quick configuration over seeds and report how often each verdict
    comes out the same (stability.md / stability.json in the output folder)."""
    from . import registry
    from .claims_stability import stability, stability_markdown

    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        _fail(f"--seeds must be comma-separated integers, got {seeds!r}")
    if name not in registry.names():
        _fail(f"no pipeline named {name!r} (jaxkit list names them)")
    out = out or Path("runs") / f"stability-{name}"
    try:
        rows, failed = stability(name, seed_list, out, isa=isa, sets=sets or ())
    except ValueError as exc:
        _fail(str(exc))
    done = [s for s in seed_list if s not in failed]
    if rows:
        console.print(stability_markdown(name, rows, done, isa), markup=False,
                      highlight=False, soft_wrap=True)
    for s, e in failed.items():
        console.print(f"seed {s} failed: {e}", markup=False)
    if failed:
        raise typer.Exit(1)

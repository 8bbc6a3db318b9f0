"""``jaxkit cruxbench``: score your own markets and questions, or ask a model for
subquestions (the JSON Lines format: :mod:`jaxkit.cruxbench.data`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from jaxkit._cli_common import check_json_path, console
from jaxkit._cli_common import fail as _fail

cruxbench_app = typer.Typer(help="CruxBench: VOI of subquestions against market prices.",
                            no_args_is_help=True)


def _num(x: float):
    return None if not math.isfinite(x) else float(x)


@cruxbench_app.command("score")
def score_file(
    data: Annotated[Path, typer.Argument(help="CruxBench JSON Lines or CSV file")],
    window: Annotated[float, typer.Option(help="time after the answer's announcement "
                                               "over which the price move is measured")] = 0.0,
    clip: Annotated[float, typer.Option(help="prices clipped to [clip, 1 - clip]")] = 0.01,
    seed: Annotated[int, typer.Option(help="seed of the bootstrap and permutations")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the scores as JSON")]
    = None,
):
    """Per-proposer ex-ante and realised VOI, the agent's usefulness and, with quality
    records, the correlation with quality."""
    from jaxkit.io import DataError, atomic_write

    from .analysis import evaluate
    from .data import read_data
    from .scoring import score

    if not 0 < clip < 0.5:
        _fail(f"--clip must be in (0, 0.5); got {clip}")
    if json_out is not None:
        check_json_path(json_out)
    try:
        ds = read_data(data)
    except DataError as e:
        _fail(str(e))
    sc = score(ds, window=window, clip=(clip, 1 - clip))
    import jax

    st = evaluate(jax.random.key(seed), sc, ds.quality, n_boot=2000, n_perm=10000)
    prop = sc.per_proposer
    t = Table(title=f"CruxBench scores: {len(ds.q)} questions, {len(ds.target_ids)} targets")
    cols = ("proposer", "quality", "ex-ante E|dp|", "realised |dp|", "agent Brier gain")
    for c in cols:
        t.add_column(c, justify="left" if c == "proposer" else "right")
    for m, name in enumerate(ds.proposers):
        t.add_row(name, *(("-" if not math.isfinite(v) else f"{v:.4g}") for v in
                          (ds.quality[m], prop["ex_ante_abs"][m], prop["realised_abs"][m],
                           prop["brier_gain"][m])))
    console.print(t)
    s = st.quality.get("realised_abs")
    if s:
        console.print(f"r(realised VOI, quality) = {s['r']:.3f} [{s['fisher_lo']:.3f}, "
                      f"{s['fisher_hi']:.3f}] (Fisher z 95%), Spearman {s['spearman']:.3f}, "
                      f"permutation p {s['perm_p']:.3g}, n={s['n']}")
    elif st.n_quality:
        console.print(f"{st.n_quality} proposer(s) with a quality measure: too few for a "
                      "correlation with quality (need >= 3)")
    if json_out:
        payload = {"proposers": ds.proposers,
                   "per_proposer": {k: [_num(x) for x in v] for k, v in prop.items()},
                   "quality": [_num(x) for x in ds.quality],
                   "correlation_with_quality": {k: {a: _num(b) for a, b in v.items()}
                                                for k, v in st.quality.items()}}
        atomic_write(json_out, json.dumps(payload, indent=2) + "\n")


@cruxbench_app.command("propose")
def propose_cmd(
    targets: Annotated[Path, typer.Argument(help="JSON Lines file with target records")],
    model: Annotated[str, typer.Option(help="model name at the endpoint")],
    out: Annotated[Path, typer.Option(help="JSON Lines file for the question records")],
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL "
                                                      "(default: JAXKIT_LLM_BASE_URL)")] = None,
    n: Annotated[int, typer.Option(help="subquestions per target")] = 3,
    timeout: Annotated[float, typer.Option(help="seconds per call")] = 60.0,
):
    """Ask a model for ``n`` subquestions per target; writes question records (add
    ``resolved_at`` / ``answer`` when they resolve, then ``jaxkit cruxbench score``)."""
    from jaxkit.io import atomic_write

    from .proposers import ChatProposer, LLMError

    if n < 1:
        _fail(f"--n must be >= 1; got {n}")
    if not targets.is_file():
        _fail(f"{targets}: no such file")
    lines = []
    try:
        body = targets.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        _fail(f"{targets}: not UTF-8 text (byte {e.start}: {e.reason}); JSON Lines files "
              "must be UTF-8")
    for i, text in enumerate(body.splitlines(), 1):
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as e:
            _fail(f"{targets}, line {i}: invalid JSON ({e.msg} at column {e.colno})")
        if isinstance(rec, dict) and rec.get("type") == "target":
            if not isinstance(rec.get("id"), str) or not rec["id"]:
                _fail(f"{targets}, line {i}: 'id' must be a non-empty string")
            lines.append(rec)
    if not lines:
        _fail(f"{targets}: no target records")
    try:
        client = ChatProposer(model, base_url=base_url, timeout=timeout)
    except ValueError as e:
        _fail(str(e))
    records, dollars = [], 0.0
    for r in lines:
        try:
            t_ask, price = (float(x) for x in r["prices"][-1])
        except (KeyError, TypeError, IndexError, ValueError):
            t_ask, price = None, None
        try:
            qs, cost = client.propose_questions(str(r.get("title") or r["id"]), price=price,
                                                n=n)
        except LLMError as e:
            _fail(str(e))
        dollars += cost
        records += [{"type": "question", "target": r["id"], "proposer": model,
                     "asked_at": t_ask, **q} for q in qs]
    atomic_write(out, "".join(json.dumps(x) + "\n" for x in records))
    console.print(f"{len(records)} questions written to {out} (${dollars:.4f})")


@cruxbench_app.command("simulate")
def simulate_cmd(
    out: Annotated[Path, typer.Argument(help="JSON Lines file to write")],
    sets: Annotated[list[str] | None, typer.Option("--set", help="FIELD=VALUE of the "
                                                   "cruxbench config (n_targets, ...)")] = None,
    seed: Annotated[int, typer.Option(help="PRNG seed")] = 0,
):
    """Write a simulated benchmark in the JSON Lines format (an example of the format,
    or test data for ``jaxkit cruxbench score``)."""
    import jax

    from .config import QUICK
    from .data import write_jsonl
    from .simulate import simulate

    try:
        cfg = QUICK.override(sets or [])
    except ValueError as e:
        _fail(str(e))
    sim = simulate(jax.random.key(seed), cfg.sim_settings())
    write_jsonl(out, sim.data)
    console.print(f"{len(sim.data.q)} questions about {len(sim.data.target_ids)} targets "
                  f"from {len(sim.data.proposers)} proposers written to {out}")

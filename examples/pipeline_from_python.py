"""A pipeline from Python: its quick configuration with overrides (the same `field=value`
strings as `jaxkit run --set`), run into a folder of your choice; then its paper claims
and metrics as data."""

import sys
import tempfile
from pathlib import Path

from jaxkit import registry
from jaxkit.claims import paper_claims, tally
from jaxkit.report import write_report


def main(out: str | None = None) -> dict:
    entry = registry.get("pooled-lingam")
    cfg = entry.quick.override(["n_seeds=2", "gies_seeds=1"])   # checked: a typo is one line
    out_dir = Path(out or tempfile.mkdtemp(prefix="pooled-lingam-"))
    ctx = registry.RunContext(out_dir=out_dir, config=cfg, quick=True, seed=0)
    result = entry(ctx)                       # stages saved under out_dir: a rerun resumes
    write_report(out_dir, [result], quick=True, seed=0)
    for c in paper_claims(result.claims):
        print(f"[{c.verdict}] {c.claim}  ({c.measured})")
    print("paper claims by verdict:", tally(result.claims))
    print("report:", out_dir / "report.md")
    return {"claims": result.claims, "out": out_dir}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)

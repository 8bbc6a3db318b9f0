"""How the shipped drug-discovery subsets were made (see README.md); not run at run time.

``python -m jaxkit.data.drug_discovery.build MOLTRANS_GIT DUDE_GIT`` with two git
directories of the source repositories (README.md names them and their commits):

* Davis (binary drug-target interactions): MolTrans' ``dataset/DAVIS/train.csv`` and
  ``val.csv`` pooled (its ``test.csv`` was absent from the snapshot read);
  each (SMILES, sequence) pair kept once (a pair labelled both ways is dropped), drugs and
  targets numbered in order of first appearance; written as three tables.
* DUD-E (actives and property-matched decoys) for the targets in :data:`DUDE_TARGETS`:
  every active of ``actives_final.ism`` and ``DECOYS_PER_ACTIVE`` decoys per active drawn
  without replacement from ``decoys_final.ism`` by ``numpy.random.default_rng(0)``.
"""

from __future__ import annotations

import csv
import gzip
import io
import subprocess
import sys
from pathlib import Path

import numpy as np

DUDE_TARGETS = ("ada", "fak1", "hs90a")
DECOYS_PER_ACTIVE = 10
HERE = Path(__file__).parent


def _show(git_dir: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"HEAD:{path}"], check=True,
                          capture_output=True, text=True).stdout


def _write(name: str, header: list[str], rows: list) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    with gzip.GzipFile(HERE / name, "wb", mtime=0) as fh:
        fh.write(buf.getvalue().encode())


def build_davis(git_dir: str) -> None:
    labels: dict[tuple[str, str], set[int]] = {}
    for part in ("train", "val"):
        for r in csv.DictReader(io.StringIO(_show(git_dir, f"dataset/DAVIS/{part}.csv"))):
            labels.setdefault((r["SMILES"], r["Target Sequence"]), set()).add(int(r["Label"]))
    drugs: dict[str, int] = {}
    targets: dict[str, int] = {}
    pairs = []
    for (smi, seq), ys in labels.items():
        if len(ys) != 1:
            continue
        d = drugs.setdefault(smi, len(drugs))
        t = targets.setdefault(seq, len(targets))
        pairs.append((d, t, ys.pop()))
    _write("davis_drugs.csv.gz", ["drug", "smiles"], [(i, s) for s, i in drugs.items()])
    _write("davis_targets.csv.gz", ["target", "sequence"], [(i, s) for s, i in targets.items()])
    _write("davis_pairs.csv.gz", ["drug", "target", "label"], sorted(pairs))


def build_dude(git_dir: str) -> None:
    rng = np.random.default_rng(0)
    for t in DUDE_TARGETS:
        base = f"input_data_and_code/{t}"
        act = [ln.split() for ln in _show(git_dir, f"{base}/actives_final.ism").splitlines()
               if ln.strip()]
        dec = [ln.split() for ln in _show(git_dir, f"{base}/decoys_final.ism").splitlines()
               if ln.strip()]
        pick = np.sort(rng.choice(len(dec), min(len(dec), DECOYS_PER_ACTIVE * len(act)),
                                  replace=False))
        rows = [(a[0], a[-1], 1) for a in act] + [(dec[i][0], dec[i][-1], 0) for i in pick]
        _write(f"dude_{t}.csv.gz", ["smiles", "id", "active"], rows)


if __name__ == "__main__":
    build_davis(sys.argv[1])
    build_dude(sys.argv[2])

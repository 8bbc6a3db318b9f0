"""How the shipped standard instances were made (see README.md); not run at run time.

``python -m jaxkit.data.standard.build BINPACK_DIR TSPLIB_DIR`` with a folder holding the
OR-Library files ``binpack1.txt`` and ``binpack3.txt`` (Falkenauer's u-class) and a folder
holding the TSPLIB files of :data:`TSPLIB_100` and TSPLIB's table of best known tour
lengths (``solutions``, lines ``name : length``). Writes the JSON files that
``jaxkit.ballad.instances`` reads:

* bin packing: the items of every instance as given, ``best_known`` the best known
  number of bins from each instance's header, and ``optimum`` the objective of Ballad's
  bin-packing problems at that number of bins: ``100 (best_known - L1) / L1`` with
  ``L1 = ceil(sum(items) / 150)``.
* TSP: each instance's coordinates shifted to start at 0 and divided by the larger side
  of its bounding box (the generated instances live in the unit square; the shape is
  kept), ``best_known`` TSPLIB's optimal tour length (EUC_2D: each edge rounded to the
  nearest integer) and ``optimum`` that length divided by the same scale (an
  approximation of the optimal tour's unrounded length in the scaled units, within about
  half a unit per edge before scaling: under 0.3% for these instances).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).parent
TSPLIB_100 = ("kroA100", "kroB100", "kroC100", "kroD100", "kroE100", "rd100")
BIN_CAPACITY = 150


def read_orlib_binpack(path: Path) -> list[dict]:
    """The instances of an OR-Library bin-packing file: name, capacity, items, best known."""
    tokens = path.read_text().split()
    n_inst, pos, out = int(tokens[0]), 1, []
    for _ in range(n_inst):
        name, cap, n, best = tokens[pos], float(tokens[pos + 1]), int(tokens[pos + 2]), \
            int(tokens[pos + 3])
        items = [int(float(t)) for t in tokens[pos + 4: pos + 4 + n]]
        out.append(dict(name=name, capacity=cap, items=items, best_known=best))
        pos += 4 + n
    return out


def read_tsplib(path: Path) -> list[tuple[float, float]]:
    """The NODE_COORD_SECTION of a TSPLIB EUC_2D file, in node order."""
    lines = path.read_text().splitlines()
    if not any("EUC_2D" in ln for ln in lines):
        raise ValueError(f"{path}: not an EUC_2D instance")
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("NODE_COORD_SECTION"))
    coords = []
    for ln in lines[start + 1:]:
        parts = ln.split()
        if not parts or parts[0] == "EOF":
            break
        coords.append((float(parts[1]), float(parts[2])))
    return coords


def binpack_file(path: Path, out: Path) -> None:
    insts = read_orlib_binpack(path)
    assert all(i["capacity"] == BIN_CAPACITY for i in insts)
    l1 = [math.ceil(sum(i["items"]) / BIN_CAPACITY) for i in insts]
    doc = {"problem": "binpacking_or",
           "source": f"OR-Library, Falkenauer (1996) u-class, {path.name}",
           "names": [i["name"] for i in insts],
           "best_known": [i["best_known"] for i in insts],
           "optimum": [100.0 * (i["best_known"] - b) / b for i, b in zip(insts, l1, strict=True)],
           "instances": [{"items": i["items"]} for i in insts]}
    out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def tsplib_file(folder: Path, out: Path) -> None:
    best = {}
    for ln in (folder / "solutions").read_text().splitlines():
        if ":" in ln:
            k, v = ln.split(":")
            best[k.strip()] = int(v.split()[0])
    insts, opts = [], []
    for name in TSPLIB_100:
        c = read_tsplib(folder / f"{name}.tsp")
        xs, ys = [p[0] for p in c], [p[1] for p in c]
        scale = max(max(xs) - min(xs), max(ys) - min(ys))
        insts.append({"coords": [[round((x - min(xs)) / scale, 7), round((y - min(ys)) / scale, 7)]
                                 for x, y in c]})
        opts.append(best[name] / scale)
    doc = {"problem": "tsp",
           "source": "TSPLIB (Reinelt 1991), the six symmetric EUC_2D instances of 100 cities",
           "names": list(TSPLIB_100), "best_known": [best[n] for n in TSPLIB_100],
           "optimum": opts, "instances": insts}
    out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def main(argv=None) -> None:
    binpack_dir, tsplib_dir = map(Path, (argv or sys.argv[1:]))
    binpack_file(binpack_dir / "binpack1.txt", HERE / "or_u120.json")
    binpack_file(binpack_dir / "binpack3.txt", HERE / "or_u500.json")
    tsplib_file(tsplib_dir, HERE / "tsplib_100.json")


if __name__ == "__main__":
    main()

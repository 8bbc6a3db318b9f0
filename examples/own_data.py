"""Your own data: a CSV with a header row, read with errors that name the file and the
line; DirectLiNGAM with prior knowledge; bootstrap probabilities of each edge."""

import sys
import tempfile
from pathlib import Path

import jax
import numpy as np
from jaxkit.kernels import lingam

from jaxkit.io import read_csv_matrix


def write_example_csv(path: Path) -> None:
    """x0 -> x1 -> x2 with uniform (non-Gaussian) noise: what a user's file might hold."""
    rng = np.random.default_rng(0)
    n = 500
    x0 = rng.uniform(-1, 1, n)
    x1 = 0.8 * x0 + rng.uniform(-1, 1, n)
    x2 = -0.6 * x1 + rng.uniform(-1, 1, n)
    rows = "\n".join(f"{a:.6f},{b:.6f},{c:.6f}" for a, b, c in zip(x0, x1, x2, strict=True))
    path.write_text("x0,x1,x2\n" + rows + "\n")


def main(path: str | None = None) -> dict:
    if path is None:
        path = Path(tempfile.mkdtemp()) / "data.csv"
        write_example_csv(path)
    x, names = read_csv_matrix(path)         # ValueError naming the file and line if bad
    # prior knowledge (lingam's convention): pk[i, j] = 0 means "no path j -> i";
    # here: nothing causes x0
    pk = -np.ones((3, 3), int)
    pk[0, 1] = pk[0, 2] = 0
    fit = lingam.direct_lingam(x, prior_knowledge=pk)
    adj = np.asarray(fit.adjacency)
    for i, j in zip(*np.nonzero(np.abs(adj) > 0.1), strict=True):
        print(f"{names[j]} -> {names[i]}: {adj[i, j]:+.2f}")
    boot = lingam.bootstrap(jax.random.key(0), x, 20)
    probs = np.asarray(lingam.bootstrap_probabilities(boot))
    print("bootstrap probability of x0 -> x1:", round(float(probs[1, 0]), 2))
    return {"adjacency": adj, "p_x0_x1": float(probs[1, 0])}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)

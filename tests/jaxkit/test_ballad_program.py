"""Program-space proposers (jaxkit/ballad/program.py): source round trip, the written
best fit scores as the JAX best fit in the sandbox, and a routed search whose children
are edits of their parents' source, with buggy children turned into failed nodes by the
sandbox."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxkit.ballad import program as PG
from jaxkit.ballad import reference as R
from jaxkit.ballad import search as S
from jaxkit.ballad.discover import BEST_FIT_SOURCE
from jaxkit.ballad.llm import Candidate, LLMError
from jaxkit.ballad.pools import SimulatedLLM
from jaxkit.jail.sandbox import evaluate_many

CAP = 100.0
BEST_FIT = np.eye(len(PG.TERMS))[0] * -1.0


@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=len(PG.TERMS),
                max_size=len(PG.TERMS)))
@settings(max_examples=30, deadline=None)
def test_source_round_trip(coefs):
    src = PG.program_source(coefs, CAP)
    np.testing.assert_array_equal(PG.program_terms(src, CAP), np.asarray(coefs))


def test_pruned_terms_are_left_out_and_bad_programs_are_named():
    src = PG.program_source([1.0, 0.01, 0, 0, 0, -0.2, 0, 0, 0, 0], CAP, prune=0.05)
    assert src.count("p = p +") == 2
    np.testing.assert_array_equal(PG.program_terms(src, CAP), [1, 0, 0, 0, 0, -0.2, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="does not parse"):
        PG.program_terms("def priority(:", CAP)
    with pytest.raises(ValueError, match="no function `priority`"):
        PG.program_terms("x = 1", CAP)
    with pytest.raises(ValueError, match="outside the library"):
        PG.program_terms(src.replace("s * s", "s ** 3").replace("(0.01)", "(2.0)")
                         .replace("(item / 100.0) * s", "s ** 3"), CAP)
    # the editor turns an unreadable parent into a failed call that still costs
    ed = PG.SourceEditor(SimulatedLLM("e", cost=0.3, step=0.1))
    with pytest.raises(LLMError, match="cannot read the parent program.*return p") as e:
        ed.propose([Candidate(source=BEST_FIT_SOURCE)], dict(rng=np.random.default_rng(0)))
    assert e.value.cost == 0.3


@pytest.fixture(scope="module")
def items():
    from jaxkit.ballad.discover import weibull_items

    return weibull_items(0, 2, 60)


def test_written_best_fit_packs_as_best_fit_in_the_sandbox(items):
    src = PG.program_source(BEST_FIT, CAP)
    extra = PG.program_source(np.r_[-1.0, 0, 0, 0, 0, 0, 0, 0, 0, 3.0], CAP)
    a, b, c = evaluate_many([src, BEST_FIT_SOURCE, extra], items, CAP, timeout=20)
    assert a.ok and b.ok and c.ok, (a.error, b.error, c.error)
    assert a.score == b.score  # the same packing as the hand-written best fit
    want = -np.mean([R.binpack_excess(R.binpack_theta(np.eye(6)[0] * -1, row, CAP), row, CAP)
                     for row in items])
    assert a.score == pytest.approx(want)  # and as the NumPy replay of the JAX heuristic
    assert c.score != a.score  # a structural edit changes the packing


def test_routed_search_in_program_space_edits_parents_and_jails_bugs(items):
    pool = [PG.SourceEditor(SimulatedLLM("careful", cost=1.0, step=0.2, insight=0.3)),
            PG.SourceEditor(SimulatedLLM("sloppy", cost=0.1, step=0.8, tail_df=2.0),
                            bug_prob=0.5)]
    routers = [r for r in S.standard_routers(2, 2 + 5, [m.name for m in pool], ablations=())
               if r.name in ("ballad", "ballad-cost")]
    init = [Candidate(source=PG.program_source(BEST_FIT, CAP), note="best fit"),
            Candidate(source=PG.program_source(np.r_[-1.0, 0.5, np.zeros(8)], CAP))]
    evaluate = S.source_evaluator(items, CAP, timeout=5.0, max_workers=2)
    logs = S.search(evaluate, pool, routers, [0], init=init, n_calls=5, key=jax.random.key(1))
    nodes = [n for lg in logs for n in lg.genealogy.nodes[2:]]
    assert len(nodes) == 10
    bugs = 0
    for lg in logs:
        g = lg.genealogy
        for n in g.nodes[2:]:
            child = PG.program_terms(n.candidate.source, CAP)
            parents = [PG.program_terms(g.nodes[p].candidate.source, CAP) for p in n.parents]
            assert n.parents and not any(np.array_equal(child, p) for p in parents)
            buggy = "return p[:1]" in n.candidate.source or "raise" in n.candidate.source \
                or "while True" in n.candidate.source
            bugs += buggy
            if buggy:
                assert not n.ok and n.error  # the sandbox refused it, the loop went on
            else:
                assert n.ok and math.isfinite(n.score), n.error
        np.testing.assert_allclose(lg.cost, np.cumsum([pool[a].cost for a in lg.arms]))
    assert bugs >= 1
    # the best program of a run is one of its own edits or a root, never lost
    for lg in logs:
        assert lg.best[-1] == max(n.score for n in lg.genealogy.nodes if n.ok)


@pytest.mark.slow  # test-time budget: 2-11 s CPU; kept in the slow set
def test_program_space_experiment_runs_every_child_in_the_jail():
    """The pipeline's program-space stage (jaxkit.ballad.program_run) at tiny size: every
    router's edits ran in the sandbox, the best programs were scored on held-out
    instances beside the hand-written best fit, and the report counts what the jail
    refused."""
    import dataclasses

    from jaxkit.ballad.config import QUICK
    from jaxkit.ballad.program_run import ROUTERS, program_section, search_programs

    cfg = dataclasses.replace(QUICK, train_instances=1, test_instances=1,
                              program=dataclasses.replace(QUICK.program, calls=2, items=20,
                                                          bug_prob=0.0, timeout=20.0))
    keys = {k: jax.random.key(i) for i, k in enumerate(("train", "test", "search"))}
    res = search_programs(cfg, keys)
    assert res.routers == list(ROUTERS) and res.n_seeds == 1
    assert res.edits_ok == [2, 2, 2, 2] and res.errors == [[], [], [], []]
    assert all(math.isfinite(t) and t >= 0 for t in res.test + [res.baseline_test])
    assert res.cost[0] == pytest.approx(2.0)  # only frontier: $1 a call
    for src in res.best_source:
        PG.program_terms(src, CAP)  # every best program is a readable program
    lines, m = program_section(res)
    assert "## Program space" in lines[0] and set(m["rows"]) == set(ROUTERS)
    assert m["rows"]["only frontier"]["share"] == [1.0, 0.0, 0.0, 0.0]
    assert m["rows"]["ballad"]["failed"] == {"refused by the jail": 0, "time limit": 0,
                                             "proposer failure": 0}

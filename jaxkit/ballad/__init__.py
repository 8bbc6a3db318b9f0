"""Ballad: bandit routing of a pool of LLMs in automated heuristic discovery.

``problems`` (combinatorial problems and parametric heuristics in JAX), ``reference``
(NumPy reference evaluators), ``sandbox`` (Python-source heuristics in a subprocess),
``llm`` (the proposer interface: an OpenAI-compatible client with a response cache and
offline replay), ``pool`` (the hand-made offline pool of simulated LLMs), ``pools``
(pools drawn from stated priors), ``program`` (proposers that edit Python source),
``population`` (genealogy and islands), ``search`` (the routed discovery loop),
``compare`` (the routing comparison of one problem, and over random pools), ``http_run``
(the comparison over real models), ``config`` (its settings), ``report`` /
``report_pools`` (tables, figure, claims). The pipeline is ``jaxkit run ballad``
(``pipeline``).
"""

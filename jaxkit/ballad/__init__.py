"""Ballad: bandit routing of a pool of LLMs in automated heuristic discovery.

In three parts, each where its kind of code lives (DESIGN.md):

* the router is a kernel: :func:`jaxkit.kernels.bandit.ballad` (extreme-value index,
  credit through the genealogy, discounting) and :func:`jaxkit.kernels.bandit.ballad_cost`
  (its cost-aware form); ``search`` composes them with the baselines of
  :mod:`jaxkit.kernels.bandit`;
* the jail that runs model-written programs is infrastructure, :mod:`jaxkit.jail`;
* the experiment and the user's tool are here. The experiment: ``problems``
  (combinatorial problems and parametric heuristics in JAX), ``reference`` (NumPy
  reference evaluators), ``llm`` (the proposer interface: an OpenAI-compatible client
  with a response cache and offline replay), ``pools`` (the offline simulated LLMs: the
  hand-made pool and pools drawn from stated priors), ``program`` (proposers that edit
  Python source), ``population`` (genealogy and islands), ``search`` (the routed
  discovery loop), ``compare`` (the routing comparison of one problem, and over random
  pools), ``program_run`` (the same over programs in the jail), ``http_run`` (the
  comparison over real models), ``smol`` (SmolLM2-135M as real proposers, with the reply
  cache), ``real_run`` (the experiment over them, with simulated members calibrated from
  their statistics), ``plugin`` (the user's problem as a Python file), ``instances``
  (the user's instances), ``config`` (its settings), ``report`` / ``report_pools``
  (tables, figure, claims), and ``pipeline`` (``jaxkit run ballad``). The user's tool:
  ``discover`` (heuristic discovery for the user's own bin-packing instances with real
  models), ``jaxkit ballad`` (``cli``).
"""

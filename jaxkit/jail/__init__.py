"""The jail: untrusted, model-written Python source evaluated in separate processes
(Linux namespaces, no capabilities, a seccomp-BPF filter, Landlock at the fallback,
resource limits), with a score the parent computes itself. Infrastructure: Ballad's
heuristic discovery runs its candidates here, and any pipeline that runs model-written
code can.

* :mod:`~jaxkit.jail.sandbox`: :func:`~jaxkit.jail.sandbox.evaluate_source` /
  :func:`~jaxkit.jail.sandbox.evaluate_many` (one candidate / many in parallel),
  :func:`~jaxkit.jail.sandbox.isolation_level`, :class:`~jaxkit.jail.sandbox.EvalResult`,
  :class:`~jaxkit.jail.sandbox.SandboxError`, :func:`~jaxkit.jail.sandbox.clean_text`;
  the isolation levels and what each keeps out are in its docstring.
* :mod:`~jaxkit.jail.packing`: the bin-packing measures the parent scores with.
* Private, standard library only (they run inside the jail): ``_sandbox_worker`` (the
  supervisor), ``_sandbox_candidate`` (the candidate's fresh interpreter), ``_seccomp``
  (the system-call filter), ``_landlock``; ``_sandbox_check``, ``_sandbox_procs`` and
  ``_sandbox_text`` are the parent's checks of what comes back.

This ``__init__`` imports nothing: the supervisor, which imports
``jaxkit.jail._sandbox_worker`` in a fresh ``python -I``, must load the standard library
only. The public names load on first use (``from jaxkit.jail import evaluate_source``).
"""

__all__ = ["EvalResult", "FAILURE_SCORE", "ISOLATION_LEVELS", "SandboxError", "clean_text",
           "evaluate_many", "evaluate_source", "isolation_level"]


def __getattr__(name: str):
    """The public names of :mod:`jaxkit.jail.sandbox`, imported on first use."""
    if name in __all__:
        from . import sandbox

        return getattr(sandbox, name)
    raise AttributeError(f"module 'jaxkit.jail' has no attribute {name!r}")

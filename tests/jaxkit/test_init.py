"""``import jaxkit`` is light and discoverable: submodules and kernel families load on
first attribute access (``jaxkit.kernels.ica`` after ``import jaxkit``), ``dir()`` lists
them, and importing the package imports nothing else."""

import subprocess
import sys

import pytest


def _fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing of jaxkit imported yet)."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_import_jaxkit_imports_nothing_else():
    out = _fresh("import sys, jaxkit; "
                 "print(sorted(m for m in sys.modules if m.startswith('jaxkit') or "
                 "m in ('jax', 'numpy')))")
    assert out == "['jaxkit']"


def test_kernels_and_submodules_load_on_first_access():
    out = _fresh("import sys, jaxkit\n"
                 "f = jaxkit.kernels.ica.fastica\n"
                 "print(f.__module__, 'jaxkit.kernels.lingam' in sys.modules)\n"
                 "print(jaxkit.stats.superiority.__module__)\n"
                 "print(jaxkit.kernels.lingam.ica_lingam.__module__.split('.')[:3])")
    assert out.splitlines() == ["jaxkit.kernels.ica False", "jaxkit.stats",
                                "['jaxkit', 'kernels', 'lingam']"]


def test_dir_lists_the_submodules_and_families():
    import json

    # in a fresh interpreter: an imported module is an attribute of its package anyway
    names, families = json.loads(_fresh(
        "import json, jaxkit; print(json.dumps([dir(jaxkit), dir(jaxkit.kernels)]))"))
    for n in ("kernels", "stats", "registry", "cli", "pooled_lingam", "compose", "__version__"):
        assert n in names
    assert not [n for n in names if n.startswith("_") and not n.startswith("__")
                and n != "_submodules"]  # private modules (_cli_common) stay hidden
    for n in ("ica", "lingam", "sem", "graph", "bandit", "checks", "wasserstein"):
        assert n in families
    assert "_threefry" not in families and "_batching" not in families


def test_unknown_attributes_are_attribute_errors():
    import jaxkit

    with pytest.raises(AttributeError, match="module 'jaxkit' has no attribute 'nope'"):
        jaxkit.nope  # noqa: B018
    with pytest.raises(AttributeError, match="'jaxkit.kernels' has no attribute 'nope'"):
        jaxkit.kernels.nope  # noqa: B018
    assert not hasattr(jaxkit, "_cli_common_x") and not hasattr(jaxkit.kernels, "_x")
    assert jaxkit.kernels.ica is sys.modules["jaxkit.kernels.ica"]

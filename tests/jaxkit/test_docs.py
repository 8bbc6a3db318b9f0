"""The API reference site: it builds in strict mode, every kernel family and pipeline has a
page, and every example on its pages runs as written (each asserts its own result)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pages_with_examples() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if BLOCK.search(p.read_text()))


# `mkdocs build` with mkdocstrings' signature formatter switched off: it starts one
# `ruff format` process per signature, about half the build's CPU time (19 -> 10 s), and
# only changes line breaks inside signatures of a site this test throws away
_BUILD = """
import sys
try:
    from mkdocstrings_handlers.python._internal import rendering
    rendering._get_formatter = lambda: (lambda text, _line_length: text)
except (ImportError, AttributeError):
    pass  # another mkdocstrings-python: build with its formatter
from mkdocs.__main__ import cli
sys.exit(cli())
"""


def test_site_builds_strict(tmp_path):
    """`mkdocs build --strict`: a module that moved, a broken link or a page missing from
    the navigation fails here (and so in CI)."""
    proc = subprocess.run([sys.executable, "-c", _BUILD, "build", "--strict", "-q",
                           "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ica = (tmp_path / "site" / "kernels" / "ica" / "index.html").read_text()
    assert "fastica" in ica and "amari_distance" in ica  # the reference was generated
    index = (tmp_path / "site" / "index.html").read_text()
    assert "jaxkit run all --quick" in index  # the README is the getting-started page


def test_every_family_and_pipeline_has_a_page():
    from jaxkit import registry

    text = {p.relative_to(DOCS).as_posix(): p.read_text() for p in DOCS.rglob("*.md")}
    api = {m for t in text.values() for m in re.findall(r"<!--\s*api:\s*([\w.]+)", t)}
    families = {p.stem if p.suffix == ".py" else p.name
                for p in (ROOT / "kernels").iterdir()
                if not p.name.startswith(("_", ".")) and (p.suffix == ".py" or
                                                          (p / "__init__.py").exists())}
    missing = sorted(f for f in families if f"kernels.{f}" not in api)
    assert not missing, f"kernel families without a reference page: {missing}"
    nav = (ROOT / "mkdocs.yml").read_text()
    for name in registry.names():
        assert f"pipelines/{name}.md" in text, f"pipeline {name} has no page"
        assert f"pipelines/{name}.md" in nav, f"pipeline {name} is not in mkdocs.yml's nav"


def test_pipeline_pages_name_their_recorded_full_runs():
    """A pipeline page names every ``results/<name>-full*/report.md`` in the repository and
    says "No full run is recorded yet" only when there is none (four pages said it after
    their runs were recorded)."""
    from jaxkit import registry

    for name in registry.names():
        page = (DOCS / "pipelines" / f"{name}.md").read_text()
        records = sorted(p.parent.name for p in (ROOT / "results").glob(f"{name}-full*/report.md"))
        for rec in records:
            assert f"results/{rec}/report.md" in page, f"{name}.md does not name {rec}"
        assert ("No full run is recorded yet" in page) == (not records), name


def test_api_directive_lists_modules_on_disk():
    hooks = _hooks()
    mods = hooks.public_modules("kernels.lingam")
    assert mods[0] == "kernels.lingam" and "kernels.lingam.fit" in mods
    assert not any(m.rsplit(".", 1)[-1].startswith("_") for m in mods)
    with pytest.raises(ValueError, match="neither a module nor a package"):
        hooks.public_modules("kernels.no_such_family")


def test_repository_links_are_rewritten():
    hooks = _hooks()
    md = "[the design](DESIGN.md), [`results/x/report.md`](results/x/report.md), " \
         "[web](https://jax.dev)"

    class Page:
        class file:
            src_uri = "kernels/ica.md"

    out = hooks.on_page_markdown(md, Page, None, None)
    assert "[the design](../design.md)" in out
    assert "`results/x/report.md` (in the repository)" in out
    assert "[web](https://jax.dev)" in out


@pytest.mark.parametrize("page", _pages_with_examples(),
                         ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_examples_run(page):
    """Each page's ```python blocks run in order in one fresh namespace; the examples
    assert their own results, so a changed kernel fails here."""
    if page.name == "index.md" and page.parent == DOCS:
        pytest.skip("the README's blocks are run by test_readme.py")
    ns: dict = {"__name__": "docs_example"}
    with contextlib.redirect_stdout(io.StringIO()):
        for i, block in enumerate(BLOCK.findall(page.read_text())):
            exec(compile(block, f"{page.relative_to(ROOT)}[{i}]", "exec"), ns)

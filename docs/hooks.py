"""MkDocs hooks for the API reference (loaded by mkdocs.yml; not part of the package).

``--8<-- "PATH"`` alone on a line includes a file of the repository (the README, DESIGN.md,
benchmarks/RESULTS.md), so the site and the repository never disagree.

``<!-- api: PACKAGE -->`` alone on a line expands to one mkdocstrings block (``::: module``) per
public module of PACKAGE, found on disk at build time, so a module added to a kernel family
or a pipeline appears in the reference without editing the page. ``PACKAGE`` is a dotted
path relative to the repository root (``kernels.lingam``, ``jaxkit.tempbench``); the
installed name of ``kernels`` is ``jaxkit.kernels``.

``<!-- summary: PACKAGE -->`` expands to the first paragraph of a package's docstring (read
with ``ast``, nothing imported); ``<!-- own-data: NAME -->`` to the README's row for pipeline
NAME in its own-data table; ``<!-- recorded-claims: FOLDER -->`` to the paper-claims table
of a recorded run (``FOLDER/metrics.json``), so the guides never disagree with the
repository.

Links that the README and DESIGN.md make to files of the repository are rewritten: to the
page that includes the file where there is one, otherwise to a code span naming the path
(the file is in the repository, not on the site).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = re.compile(r'^--8<-- "([^"]+)"\s*$', re.M)
API = re.compile(r"^<!--\s*api:\s*([\w.]+)\s*-->\s*$", re.M)
SUMMARY = re.compile(r"^<!--\s*summary:\s*([\w.]+)\s*-->\s*$", re.M)
OWN_DATA = re.compile(r"^<!--\s*own-data:\s*([\w-]+)\s*-->\s*$", re.M)
CLAIMS = re.compile(r"^<!--\s*recorded-claims:\s*([\w./-]+)\s*-->\s*$", re.M)
LINK = re.compile(r"\[([^\]\n]+)\]\((?!https?:|#|mailto:)([^)\s]+)\)")
# repository files that are pages of the site
PAGES = {"DESIGN.md": "design.md", "benchmarks/RESULTS.md": "benchmarks.md",
         "README.md": "index.md", "jaxkit/crosscoder/ACTIVATIONS.md": "activations.md",
         "results/README.md": "results.md"}


def public_modules(package: str) -> list[str]:
    """Dotted names of the public modules of ``package`` (itself first), sorted."""
    base = ROOT.joinpath(*package.split("."))
    if base.with_suffix(".py").is_file():
        return [package]
    if not (base / "__init__.py").is_file():
        raise ValueError(f"api: {package!r} is neither a module nor a package under {ROOT}")
    names = [package]
    for p in sorted(base.rglob("*.py")):
        rel = p.relative_to(base).with_suffix("")
        if any(part.startswith("_") for part in rel.parts) or "__pycache__" in p.parts:
            continue
        if any(not (base.joinpath(*rel.parts[:i]) / "__init__.py").is_file()
               for i in range(1, len(rel.parts))):
            continue  # a folder of scripts or data, not a subpackage
        names.append(".".join((package, *rel.parts)))
    return names


def _expand(match: re.Match) -> str:
    return "\n\n".join(f"::: {m}" for m in public_modules(match.group(1)))


def _link(match: re.Match, page_dir: str) -> str:
    text, target = match.groups()
    path, _, anchor = target.partition("#")
    if (ROOT / "docs" / page_dir / path).exists():
        return match.group(0)  # a page or asset of the site itself
    if path in PAGES:
        up = "../" * len(Path(page_dir).parts)
        return f"[{text}]({up}{PAGES[path]}{'#' + anchor if anchor else ''})"
    if text.strip("`") == path:
        return f"`{path}` (in the repository)"
    return f"{text} (`{path}` in the repository)"


def _include(match: re.Match) -> str:
    path = ROOT / match.group(1)
    if not path.is_file():
        raise ValueError(f"include: {match.group(1)!r} is not a file of the repository")
    return path.read_text()


def _summary(match: re.Match) -> str:
    import ast

    init = ROOT.joinpath(*match.group(1).split(".")) / "__init__.py"
    if not init.is_file():
        raise ValueError(f"summary: {match.group(1)!r} is not a package of the repository")
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    return doc.split("\n\n")[0].strip()


def _own_data(match: re.Match) -> str:
    name = match.group(1)
    for line in (ROOT / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells and cells[0] == name:
            rest = "|".join(line.strip().strip("|").split("|")[1:]).strip()
            return f"Your own data (`jaxkit run {name}`): {rest.replace(chr(92) + '|', '|')}"
    return (f"`{name}` has no own-data row in the README: it runs on data that jaxkit "
            "generates or ships.")


def _claims(match: re.Match) -> str:
    import json

    path = ROOT / match.group(1) / "metrics.json"
    if not path.is_file():
        return f"No recorded run in `{match.group(1)}` yet."
    claims = json.loads(path.read_text()).get("claims", [])
    rows = ["| claim | measured | verdict |", "|---|---|---|"]
    for c in claims:
        if c.get("kind", "paper") != "paper":
            continue
        cells = [" ".join(str(c.get(k, "")).split()).replace("|", "\\|")
                 for k in ("claim", "measured", "verdict")]
        rows.append(f"| {cells[0]} | {cells[1]} | **{cells[2]}** |")
    kinds = all("kind" in c for c in claims)
    note = ("" if kinds else "\n\n(Recorded before claims had kinds: every row is shown "
            "as a paper claim.)")
    return "\n".join(rows) + note


def on_page_markdown(markdown: str, page, config, files) -> str:
    markdown = API.sub(_expand, INCLUDE.sub(_include, markdown))
    markdown = SUMMARY.sub(_summary, markdown)
    markdown = OWN_DATA.sub(_own_data, markdown)
    markdown = CLAIMS.sub(_claims, markdown)
    parent = Path(page.file.src_uri).parent
    page_dir = "" if str(parent) == "." else str(parent)
    return LINK.sub(lambda m: _link(m, page_dir), markdown)

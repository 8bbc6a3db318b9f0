"""MkDocs hooks for the API reference (loaded by mkdocs.yml; not part of the package).

``--8<-- "PATH"`` alone on a line includes a file of the repository (the README, DESIGN.md,
benchmarks/RESULTS.md), so the site and the repository never disagree.

``<!-- api: PACKAGE -->`` alone on a line expands to one mkdocstrings block (``::: module``) per
public module of PACKAGE, found on disk at build time, so a module added to a kernel family
or a pipeline appears in the reference without editing the page. ``PACKAGE`` is a dotted
path relative to the repository root (``kernels.lingam``, ``jaxkit.tempbench``); the
installed name of ``kernels`` is ``jaxkit.kernels``.

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


def on_page_markdown(markdown: str, page, config, files) -> str:
    markdown = API.sub(_expand, INCLUDE.sub(_include, markdown))
    parent = Path(page.file.src_uri).parent
    page_dir = "" if str(parent) == "." else str(parent)
    return LINK.sub(lambda m: _link(m, page_dir), markdown)

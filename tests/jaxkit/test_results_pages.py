"""The two results pages a user reads (issue 70): benchmarks/RESULTS.md is one page of current
figures under 400 lines, each row with the command that produced it; results/README.md has
one row per recorded run. The history stays in benchmarks/RESULTS-archive.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CELL = re.compile(r"(?<!\\)\|")


def _tables(text: str) -> list[list[list[str]]]:
    """Markdown tables as lists of rows of stripped cells (header first, rule dropped)."""
    tables, rows = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in CELL.split(line.strip())[1:-1]]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        elif rows:
            tables.append(rows)
            rows = []
    return tables


def test_benchmark_results_are_one_page_with_every_command():
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    assert len(text.splitlines()) < 400
    assert "## Language model (jaxkit.lm)" in text
    assert "benchmarks/RESULTS-archive.md" in text
    checked = 0
    for table in _tables(text):
        header = [h.lower() for h in table[0]]
        if "command" not in header:
            continue
        col = header.index("command")
        for row in table[1:]:
            assert "`" in row[col] or row[col].startswith(("same", "the two commands")), row
            checked += 1
    assert checked >= 50


def test_archive_keeps_the_history():
    archive = (ROOT / "benchmarks" / "RESULTS-archive.md").read_text()
    assert archive.startswith("> **History")
    assert "# ICA family benchmark results" in archive


def test_results_readme_has_a_row_per_recorded_run():
    text = (ROOT / "results" / "README.md").read_text()
    runs = sorted(p.parent.name for p in (ROOT / "results").glob("*/report.md"))
    table = next(t for t in _tables(text) if t[0][0] == "folder")
    assert [r[0] for r in table[1:]] == [f"`{name}/`" for name in runs]
    assert all(len(r) == len(table[0]) and r[1].startswith("`jaxkit ") for r in table[1:])
    for name in runs:
        assert f"### {name}" in text, name

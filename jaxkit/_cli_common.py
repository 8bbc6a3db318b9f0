"""What every ``jaxkit`` command-line module shares: the consoles, the one-line error
exit, and the check that a ``--json`` output path can be written."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["console", "err_console", "fail", "check_json_path"]

# no emoji codes: a model name such as "name:abc:1" must print as written
console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)


def fail(msg: str, code: int = 2) -> NoReturn:
    """Print ``error: MSG`` on one line of stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {escape(msg)}", soft_wrap=True)  # one line
    raise typer.Exit(code)


def check_json_path(path: Path) -> None:
    """Fail before computing if ``--json PATH`` cannot be written."""
    if path.is_dir():
        fail(f"--json {path}: is a folder; give a file name")
    if not path.parent.is_dir():
        fail(f"--json {path}: the folder {path.parent} does not exist")

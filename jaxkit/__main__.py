"""The ``jaxkit`` command's launcher (its console script, and ``python -m jaxkit``).

:func:`main` first restarts the process once under the glibc ``malloc`` tunables of
:mod:`jaxkit.malloc` (the launcher option ``JAXKIT_MALLOC=tuned|hugepages|system``), then
runs the command line of :mod:`jaxkit.cli`. Only this launcher restarts a process:
``jaxkit.cli.app`` called in-process never does.
"""

from jaxkit import malloc


def main() -> None:
    """The ``jaxkit`` command: :func:`jaxkit.malloc.reexec`, then :data:`jaxkit.cli.app`."""
    malloc.reexec()
    from jaxkit.cli import app

    app()


if __name__ == "__main__":
    main()

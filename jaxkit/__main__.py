"""``python -m jaxkit``: the ``jaxkit`` command (as its console script runs it)."""

from jaxkit.malloc import main

if __name__ == "__main__":
    main()

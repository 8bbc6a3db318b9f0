"""Helpers shared by the peer workers. They run inside the peers' own virtual
environments, where jaxkit is not installed, so they cannot import ``jaxkit.bench``;
each worker imports this file from its own folder (the script's folder is on sys.path)."""

from importlib import metadata


def versions(names):
    """Installed version of each distribution in ``names`` (None when missing)."""
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out

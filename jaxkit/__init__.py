"""jaxkit: JAX-accelerated numerical toolkit for research code."""

__version__ = "0.1.0"

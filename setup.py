"""Package discovery (everything else is in pyproject.toml).

Every package under ``jaxkit/`` is found, and ``kernels/`` with all its subpackages is
installed as ``jaxkit.kernels``, never as a top-level ``kernels`` (HuggingFace's
``kernels`` owns that name on PyPI). Nothing is listed by hand, so a new paper folder or
kernel subpackage cannot be dropped from the wheel by omission.
"""

from setuptools import find_packages, setup

KERNELS = ["jaxkit.kernels"] + [f"jaxkit.kernels.{p}" for p in find_packages("kernels")]

setup(
    packages=find_packages(include=["jaxkit", "jaxkit.*"]) + KERNELS,
    package_dir={"jaxkit.kernels": "kernels"},
)

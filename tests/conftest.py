"""Test configuration: 8 simulated CPU devices and float64 available.

Both settings must be in place before JAX initialises its backends, so they are made
at import time of this conftest, which pytest loads before any test module.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # float64 references; kernels keep input dtypes

import pytest  # noqa: E402


@pytest.fixture
def key():
    return jax.random.key(0)

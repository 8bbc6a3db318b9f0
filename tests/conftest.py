"""Test configuration: 8 simulated CPU devices and float64 available.

Both settings must be in place before JAX initialises its backends, so they are made
at import time of this conftest, which pytest loads before any test module.
"""

import contextlib
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# no persistent compilation cache in tests (a CLI test would otherwise turn it on in-process)
os.environ.setdefault("JAXKIT_NO_COMPILE_CACHE", "1")
flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # float64 references; kernels keep input dtypes

import pytest  # noqa: E402


@pytest.fixture
def key():
    return jax.random.key(0)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop every compiled program after each test module. Each XLA:CPU executable keeps
    its JIT-compiled code in its own memory mappings; the whole suite compiles thousands
    of programs, and keeping them all alive took the process towards the kernel's limit
    of 65,530 mappings (vm.max_map_count), where compilation segfaulted. Tests reuse
    jitted functions within a module, so this costs few recompilations."""
    yield
    jax.clear_caches()


@pytest.fixture(scope="module")
def fast_compile():
    """Compile this module's programs with XLA's cheap settings
    (``jax_disable_most_optimizations``: LLVM at -O0 without its expensive passes; the
    HLO passes, fusion included, still run), restored after the module. Compilation
    dominates these tests on CPU and their programs run briefly, so this cuts their CPU
    time; the results agree with optimised code to float rounding (the same programs,
    the same keys). A module opts in with
    ``pytestmark = pytest.mark.usefixtures("fast_compile")``; one whose programs run long
    rather than compile long gets slower with it and stays out
    (tests/jaxkit/test_amgenc_glass.py: its
    melt-quench schedules took twice the CPU time)."""
    with _cheap_compile():
        yield


@pytest.fixture
def fast_compile_test():
    """:func:`fast_compile` for one test (a module whose other tests run long loops)."""
    with _cheap_compile():
        yield


@contextlib.contextmanager
def _cheap_compile():
    name = "jax_disable_most_optimizations"
    old = jax.config.read(name)
    jax.config.update(name, True)
    try:
        yield
    finally:
        jax.config.update(name, old)

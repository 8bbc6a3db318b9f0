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
def _float64_after_each_module():
    """Float64 on again after each test module: a benchmark's ``main`` switches it off for
    its float32 run (``bench.configure_cpu_devices``), and in a process shared with later
    modules (one xdist worker, or ``pytest -m ""``) their float64 references then ran in
    float32 (the belief tests after the slow causaltab bench test: 9 failures)."""
    yield
    jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop every compiled program after each test module. Each XLA:CPU executable keeps
    its JIT-compiled code in its own memory mappings; the whole suite compiles thousands
    of programs, and keeping them all alive took the process towards the kernel's limit
    of 65,530 mappings (vm.max_map_count), where compilation segfaulted. Tests reuse
    jitted functions within a module, so this costs few recompilations."""
    yield
    jax.clear_caches()


OPTIMIZED = "optimized_compile"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{OPTIMIZED}: compile this module's programs with XLA's full optimisations "
        "(its programs run long rather than compile long); every other module compiles "
        "cheaply (tests/conftest.py::_compile_settings)",
    )


@pytest.fixture(autouse=True, scope="module")
def _compile_settings(request):
    """Compile each module's programs with XLA's cheap settings
    (``jax_disable_most_optimizations``: LLVM at -O0 without its expensive passes; the
    HLO passes, fusion included, still run), restored after the module. Compilation
    dominates most tests on CPU and their programs run briefly, so this cuts their CPU
    time (test_charge 150 -> 107 s, test_flow_discrete 32 -> 15 s); the results agree
    with optimised code to float rounding (the same programs, the same keys).

    A module whose programs run long rather than compile long gets slower unoptimised
    (tests/jaxkit/test_amgenc_glass.py's melt-quench schedules: 44 -> 88 s CPU) and opts
    out with ``pytestmark = pytest.mark.optimized_compile``; it can still compile single
    tests cheaply with :func:`fast_compile_test`. ``JAXKIT_TEST_COMPILE=optimized`` (or
    ``cheap``) forces one setting on every module, to measure a module both ways.
    Autouse, so it is set up before the module's other module-scoped fixtures; programs
    compiled in a session-scoped fixture would not see it (there are none)."""
    forced = os.environ.get("JAXKIT_TEST_COMPILE", "")
    if forced not in ("", "cheap", "optimized"):
        raise pytest.UsageError(f"JAXKIT_TEST_COMPILE={forced!r}: use 'cheap' or 'optimized'")
    if forced:
        cheap = forced == "cheap"
    else:
        cheap = request.node.get_closest_marker(OPTIMIZED) is None
    with _compile_setting(cheap):
        yield


@pytest.fixture
def fast_compile_test():
    """Cheap compilation for one test of a module marked ``optimized_compile`` (a module
    whose other tests run long loops)."""
    with _compile_setting(True):
        yield


@contextlib.contextmanager
def _compile_setting(cheap: bool):
    """Set the flag in this process and, through its environment variable, in the
    Python subprocesses the tests start (CLI runs, multi-process workers), so that a
    worker's result compared with an in-process reference comes from the same setting."""
    name, env = "jax_disable_most_optimizations", "JAX_DISABLE_MOST_OPTIMIZATIONS"
    old, old_env = jax.config.read(name), os.environ.get(env)
    jax.config.update(name, cheap)
    os.environ[env] = "1" if cheap else "0"
    try:
        yield
    finally:
        jax.config.update(name, old)
        if old_env is None:
            os.environ.pop(env, None)
        else:
            os.environ[env] = old_env


@pytest.fixture(autouse=True)
def _own_working_folder(tmp_path_factory, monkeypatch):
    """Every test runs in an empty folder of its own, never in the checkout: a CLI test
    that writes its default output folder (``jaxkit run all`` writes ``runs/all``) or
    anything else relative to the working folder neither touches the clone nor sees what
    an earlier command left there (the README's main job, run before the tests in the same
    clone, leaves ``runs/all``, and ``jaxkit run all --jobs 0`` then met that folder).
    A folder apart from ``tmp_path``, so that tests listing ``tmp_path`` see only theirs."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))

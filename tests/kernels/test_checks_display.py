"""A failed jaxkit check inside a user's own ``jax.jit`` reads as clearly as outside it
(issue 18): the message naming the argument is the first line printed."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest
from jaxkit.kernels import checks, fingerprint

USER_SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp
    from jaxkit.kernels import checks, fingerprint
    checks.install_error_display()  # opt-in: importing jaxkit installs no hook
    bad = jnp.array([[0.0, 2.0]])
    f = jax.jit(lambda x: fingerprint.tanimoto_matrix(x, bad))
    print(f(jnp.array([[0.0, 1.0]])))
""")


def test_uncaught_error_in_a_plain_jit_prints_the_message_first():
    r = subprocess.run([sys.executable, "-c", USER_SCRIPT], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines, r.stderr
    assert lines[0] == ("jaxkit check failed: `b` must be a binary fingerprint (every entry "
                        "0 or 1)"), r.stderr
    # no callback log, no equinox banner, no jaxlib frames; the user's line is kept
    assert "equinox.filter_jit" not in r.stderr and "pure_callback failed" not in r.stderr
    assert "/jax/_src/" not in r.stderr and "<string>" in r.stderr
    assert lines[-1].endswith("CheckError: `b` must be a binary fingerprint (every entry "
                              "0 or 1)")


@pytest.fixture(scope="module")
def user_jit():
    checks.install_error_display()
    return jax.jit(lambda x, b: fingerprint.tanimoto_matrix(x, b))


NO_SIDE_EFFECTS = textwrap.dedent("""
    import logging, sys
    hook = sys.excepthook
    filters = list(logging.getLogger("jax._src.callback").filters)
    handlers = list(logging.getLogger().handlers)
    import jaxkit, jaxkit.kernels
    from jaxkit.kernels import checks, fingerprint, ica, lingam, sem
    from jaxkit import lm, stats, training, report, registry
    assert sys.excepthook is hook, "excepthook changed"
    assert logging.getLogger("jax._src.callback").filters == filters, "filters changed"
    assert logging.getLogger().handlers == handlers, "root handlers changed"
    checks.install_error_display()
    assert sys.excepthook is checks._excepthook
    print("ok")
""")


def test_importing_jaxkit_changes_no_global_hook():
    """Issue 70: importing jaxkit and its kernels leaves sys.excepthook and the logging
    configuration as they were; the display is opt-in (the CLI and the variable opt in)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "JAXKIT_ERROR_DISPLAY"}
    r = subprocess.run([sys.executable, "-c", NO_SIDE_EFFECTS], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    opted = subprocess.run(
        [sys.executable, "-c", "import sys; from jaxkit.kernels import checks; "
         "print(sys.excepthook is checks._excepthook)"],
        capture_output=True, text=True, timeout=120, env={**env, "JAXKIT_ERROR_DISPLAY": "1"})
    assert opted.stdout.strip() == "True", opted.stderr


def test_caught_error_message_and_display(user_jit):
    x, bad = jnp.array([[0.0, 1.0]]), jnp.array([[0.0, 2.0]])
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.block_until_ready(user_jit(x, bad))
    msg = checks.check_message(info.value)
    assert msg == "`b` must be a binary fingerprint (every entry 0 or 1)"
    text = checks.format_check_failure(msg, info.value.__traceback__)
    assert text.splitlines()[0] == f"jaxkit check failed: {msg}"
    # the same error through clear_errors: a CheckError, a ValueError, message alone
    with pytest.raises(checks.CheckError) as info2, checks.clear_errors():
        jax.block_until_ready(user_jit(x, bad))
    assert isinstance(info2.value, ValueError) and str(info2.value) == msg
    # clear_errors must not remove the filter install_error_display installed
    assert checks._is_check_record in logging.getLogger("jax._src.callback").filters
    # a chained error is found through __cause__; other errors are not claimed
    try:
        raise KeyError("outer") from info.value
    except KeyError as e:
        assert checks.check_message(e) == msg
    assert checks.check_message(RuntimeError("unrelated")) is None


def test_excepthook_passes_other_errors_to_the_previous_hook(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(checks, "_PREVIOUS_HOOK", lambda *a: seen.append(a[0]))
    checks._excepthook(KeyError, KeyError("k"), None)
    assert seen == [KeyError] and capsys.readouterr().err == ""
    checks._excepthook(checks.CheckError, checks.CheckError("`k` is bad"), None)
    assert capsys.readouterr().err.startswith("jaxkit check failed: `k` is bad\n")
    assert sys.excepthook is checks._excepthook

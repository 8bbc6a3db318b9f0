"""The allocator tuning is a launcher option (issue 70, item 2): the ``jaxkit`` launcher
(``jaxkit.__main__``) restarts itself once under the glibc tunables of
:mod:`jaxkit.malloc`; importing jaxkit, calling its functions and running its command line
in-process never restart the process, and the option is in ``jaxkit --help``."""

import json
import os
import subprocess
import sys

import pytest

from jaxkit import malloc

_CLEAN = {k: v for k, v in os.environ.items()
          if k not in ("GLIBC_TUNABLES", malloc.MARKER, malloc.ENV_VAR)}

_LIBRARY_USER = r"""
import json, os
calls = []
def _no(*a, **k):
    calls.append(a[:1])
    raise SystemExit("restarted")
for name in ("execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp"):
    setattr(os, name, _no)
import jaxkit, jaxkit.kernels, jaxkit.cli, jaxkit.__main__
from jaxkit import malloc, stats
stats.superiority([0.1, 0.2, 0.15, 0.12])
jaxkit.cli.app(["list"], standalone_mode=False)
print(json.dumps(dict(calls=calls, state=malloc.state())))
"""


def test_a_library_user_is_never_restarted():
    p = subprocess.run([sys.executable, "-c", _LIBRARY_USER], env=_CLEAN,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["calls"] == []
    assert got["state"] == {"glibc_tunables": None, "set_by_jaxkit": False}


def test_the_launcher_documents_its_option():
    p = subprocess.run([sys.executable, "-m", "jaxkit", "--help"],
                       env={**_CLEAN, "COLUMNS": "200"}, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "JAXKIT_MALLOC=tuned|hugepages|system" in " ".join(p.stdout.split())


@pytest.mark.skipif(malloc.tuned_env({}) is None, reason="not Linux with glibc")
def test_the_launcher_restarts_once_under_the_tunables():
    code = ("import sys; sys.argv[1:] = []\n"
            "import jaxkit.cli as c\n"
            "c.app = lambda: print(__import__('json').dumps(__import__('jaxkit').malloc.state()))\n"
            "from jaxkit.__main__ import main; main()")
    p = subprocess.run([sys.executable, "-c", code], env=_CLEAN, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["set_by_jaxkit"] is True
    assert got["glibc_tunables"] == ":".join(f"{k}={v}" for k, v in malloc.TUNABLES.items())
    off = subprocess.run([sys.executable, "-c", code], env={**_CLEAN, malloc.ENV_VAR: "system"},
                         capture_output=True, text=True, timeout=300)
    assert json.loads(off.stdout.strip().splitlines()[-1])["set_by_jaxkit"] is False

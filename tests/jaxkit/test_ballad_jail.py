"""Attacks on the jail of jaxkit.jail.sandbox: every escape must fail.

Each attack is candidate source that tries one escape and raises ``ESCAPED`` if it
worked; the test also checks from outside (files, listeners, processes) that nothing
happened. Most tests need the ``"namespaces"`` level and are skipped where it is
unavailable (the fallback level is tested for what it does promise).
"""

from __future__ import annotations

import os
import socket
import textwrap
import time
import warnings

import numpy as np
import pytest

from jaxkit.jail import _landlock, sandbox
from jaxkit.jail.sandbox import FAILURE_SCORE, evaluate_source

CAPACITY = 150.0
ITEMS = np.random.default_rng(1).integers(20, 101, size=(2, 40)).astype(np.float64)
BEST_FIT = "def priority(item, bins):\n    return -(bins - item)\n"

jailed = pytest.mark.skipif(sandbox.isolation_level() != "namespaces",
                            reason="Linux namespaces unavailable (fallback level only)")


def _attack_source(body: str) -> str:
    """A best-fit candidate that first runs ``body`` (which raises on failure) and raises
    ``ESCAPED`` if it succeeded."""
    return ("import os, sys\n"
            "try:\n" + textwrap.indent(textwrap.dedent(body), "    ") +
            "except BaseException as _exc:\n"
            "    _why = repr(_exc)\n"
            "else:\n"
            "    raise RuntimeError('ESCAPED')\n" + BEST_FIT)


def _attack(body: str, **kw) -> sandbox.EvalResult:
    return evaluate_source(_attack_source(body), ITEMS[:1, :10], CAPACITY, **kw)


def _contained(res: sandbox.EvalResult) -> None:
    assert res.ok, res.error
    assert res.isolation == "namespaces"


@pytest.fixture(scope="module")
def honest():
    res = evaluate_source(BEST_FIT, ITEMS, CAPACITY)
    assert res.ok
    return res


@jailed
def test_result_says_namespaces(honest):
    assert honest.isolation == "namespaces"


@jailed
def test_cannot_write_or_delete_the_parents_files(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    for body in (f"open({str(tmp_path / 'new.txt')!r}, 'w').write('x')\n",
                 f"os.remove({str(victim)!r})\n",
                 f"import shutil\nshutil.rmtree({str(tmp_path)!r})\n",
                 f"open({str(victim)!r}).read()\n",  # nor read them
                 "open(os.path.expanduser('~/.jaxkit-jail-probe'), 'w')\n",
                 f"open({sandbox._ROOT + '/jaxkit/jail-probe'!r}, 'w')\n",  # the package
                 "open('/usr/lib/jail-probe', 'w')\n",  # a bound host directory
                 "open('/jail-probe', 'w')\n"):  # the jail's own root
        _contained(_attack(body))
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]


@jailed
def test_private_tmp_is_writable_and_private():
    src = ("open('/tmp/scratch', 'w').write('x' * 1000)\n"
           "assert open('scratch').read() == 'x' * 1000  # the working directory\n"
           "assert os.listdir('/tmp') == ['scratch']  # nobody else's files\n")
    _contained(_attack(src + "raise KeyError\n"))  # KeyError: the writes worked
    assert not os.path.exists("/tmp/scratch")


@jailed
def test_bound_paths_under_tmp_stay_visible_and_read_only(tmp_path, monkeypatch, honest):
    """An install under /tmp (a clone there) stays readable in the jail: the private /tmp
    is mounted before the binds, not over them; the bind stays read-only."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "data.txt").write_text("visible")
    binds = sandbox._jail_binds()
    monkeypatch.setattr(sandbox, "_jail_binds", lambda: [*binds, str(lib)])
    src = (f"OK = open({str(lib / 'data.txt')!r}).read() == 'visible'\n"
           "try:\n"
           f"    open({str(lib / 'new.txt')!r}, 'w')\n"
           "    WROTE = True\n"
           "except OSError:\n"
           "    WROTE = False\n"
           "def priority(item, bins):\n"
           "    return -(bins - item) if OK and not WROTE else (bins - item)\n")
    res = evaluate_source(src, ITEMS, CAPACITY)
    assert res.ok and res.isolation == "namespaces", res.error
    assert res.score == honest.score  # best fit: read, and the write failed
    assert sorted(p.name for p in lib.iterdir()) == ["data.txt"]


@jailed
def test_no_shell_or_other_programs(tmp_path):
    marker = tmp_path / "shell-ran"
    for body in (f"import subprocess\nsubprocess.run(['/bin/sh', '-c', 'touch {marker}'])\n",
                 f"assert os.system('touch {marker}') == 0\n",
                 "import subprocess\nsubprocess.run([sys.executable, '-c', "
                 f"'open(\"{marker}\", \"w\")'], check=True)\n",
                 "os.execv('/usr/bin/env', ['env'])\n"):
        _contained(_attack(body))
    assert not marker.exists()


@jailed
def test_no_network_even_to_localhost():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.setblocking(False)
        port = server.getsockname()[1]
        body = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        _contained(_attack(body))
        body = ("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                f"s.sendto(b'key', ('127.0.0.1', {port}))\n")
        _contained(_attack(body))
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected


ROOT_SKIP = ("the rlimits level refuses root (run unprivileged by test_ballad_jail_clean.py"
             "::test_rlimits_level_and_kill_all_in_a_disposable_namespace)")


@pytest.mark.parametrize("isolation", ["auto", "rlimits"])
@pytest.mark.filterwarnings("ignore:jaxkit.jail.sandbox:RuntimeWarning")
def test_environment_is_empty(monkeypatch, isolation):
    if isolation == "rlimits" and os.geteuid() == 0:
        pytest.skip(ROOT_SKIP)
    monkeypatch.setenv("JAXKIT_LLM_API_KEY", "sk-test-secret-123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-456")
    src = ("import os\n"
           "leak = [v for v in os.environ.values() if 'secret' in v]\n"
           "for path in ('/proc/self/environ', '/proc/%d/environ' % os.getppid()):\n"
           "    try:\n"
           "        leak += [path] if b'secret' in open(path, 'rb').read() else []\n"
           "    except OSError:\n"
           "        pass\n"
           "if leak:\n"
           "    raise RuntimeError('ESCAPED %s' % leak)\n"
           "assert set(os.environ) <= {'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS',\n"
           "    'MKL_NUM_THREADS', 'LC_CTYPE'}, sorted(os.environ)\n" + BEST_FIT)
    res = evaluate_source(src, ITEMS[:1, :10], CAPACITY, isolation=isolation)
    assert res.ok, res.error


def _comm_pids(name: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as fh:
                    if fh.read().strip() == name:
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


_FORK_SETSID = """
import ctypes, os, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:  # a grandchild in its own session, as a daemon would be
        ctypes.CDLL(None).prctl(15, b"{name}", 0, 0, 0)  # PR_SET_NAME, to find it
        time.sleep({sleep})
        open({marker!r}, "w").write("outlived the evaluation")
    os._exit(0)
"""


@jailed
@pytest.mark.parametrize("ends", ["timeout", "normally"])
def test_fork_setsid_child_dies_with_the_evaluation(tmp_path, ends):
    name = f"jxk-jail-{ends[:4]}"
    marker = tmp_path / "late"
    src = _FORK_SETSID.format(name=name, sleep=2.0, marker=str(marker))
    src += "time.sleep(30)\n" if ends == "timeout" else "time.sleep(0.3)\n"
    src += BEST_FIT
    # the filter refuses fork: turn it off to test the layer under it (the PID namespace)
    res = evaluate_source(src, ITEMS[:1, :10], CAPACITY, timeout=1.5, syscall_filter=False)
    if ends == "timeout":
        assert not res.ok and res.error == "timeout after 1.5 s"
    else:
        assert res.ok, res.error
    # the evaluation has returned: nothing of it may still run
    survivors = _comm_pids(name)
    for pid in survivors:
        os.kill(pid, 9)
    assert not survivors
    time.sleep(2.2)
    assert not marker.exists()


@jailed
def test_process_count_is_limited():
    src = """
import os, time
n = 0
try:
    for _ in range(64):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        n += 1
except OSError:
    pass
if n >= 8:
    raise RuntimeError('ESCAPED: %d processes' % n)
""" + BEST_FIT
    # RLIMIT_NPROC is the layer under the seccomp filter, which refuses every fork
    res = evaluate_source(src, ITEMS[:1, :10], CAPACITY, syscall_filter=False)
    _contained(res)


@jailed
def test_cannot_forge_the_result_through_frames_or_gc(honest):
    # the packing loop runs in the supervisor, another process: whatever the candidate
    # mutates in its own interpreter, the parent counts best fit's bins
    src = """
import gc, sys
def priority(item, bins):
    f = sys._getframe()
    while f is not None:  # overwrite every list of ints on the stack
        for v in list(f.f_locals.values()):
            if isinstance(v, list) and v and all(type(x) is int for x in v):
                v[:] = [0] * len(v)
        f = f.f_back
    for obj in gc.get_objects():
        if isinstance(obj, dict) and ("assignments" in obj or "capacity" in obj):
            obj.update(assignments=[[0]], capacity=1e9, excess=-100.0)
    return -(bins - item)
"""
    res = evaluate_source(src, ITEMS, CAPACITY)
    assert res.ok and res.bins == honest.bins and res.excess == honest.excess


@jailed
def test_cannot_forge_the_result_through_descriptors():
    # the only descriptor the candidate can write to is its own answer pipe: a forged
    # result there is a protocol error, never a score
    forged = '{"ok": true, "assignments": [[0]], "excess": -100.0}\n'
    src = f"""
import os
for fd in range(64):
    try:
        os.write(fd, {forged!r}.encode())
    except OSError:
        pass
""" + BEST_FIT
    res = evaluate_source(src, ITEMS, CAPACITY)
    assert not res.ok and res.score == FAILURE_SCORE
    assert res.error == "protocol error: unexpected message from the candidate"


def test_impossible_results_are_rejected(monkeypatch, honest):
    items = ITEMS[:1, :3]
    bad = [
        ([[0, 0, 0]], "more than its capacity"),
        ([[0, 1]], "expected 3 integer"),
        ([[0, 1, 3]], "out of range"),
        ([[0, 1, -1]], "out of range"),
        ([[0.0, 1.0, 2.0]], "expected 3 integer"),
        ([[True, False, 2]], "expected 3 integer"),
        ([[0, 1, 2], [0, 1, 2]], "for 1 instances"),
        ("garbage", "for 1 instances"),
    ]
    heavy = np.array([[100.0, 100.0, 100.0]])
    for assignments, reason in bad:
        with pytest.raises(sandbox._Impossible, match=reason):
            sandbox._score_packing(assignments, heavy, CAPACITY)
    assert sandbox._score_packing([[0, 1, 2]], heavy, CAPACITY) == ((3,), 50.0)
    assert sandbox._score_packing([[2, 2, 2]], items * 0.3, CAPACITY)[0] == (1,)
    # a supervisor that lies is rejected too (here the whole worker is replaced)
    lie = ("import os, sys; os.write(int(sys.argv[4]), "
           "b'{\"ok\": true, \"assignments\": [[0, 0, 0]], \"excess\": -100.0}')")
    monkeypatch.setattr(sandbox, "_BOOT", lie)
    res = evaluate_source(BEST_FIT, heavy, CAPACITY)
    assert not res.ok and res.score == FAILURE_SCORE
    assert res.error.startswith("impossible result rejected: instance 0: a bin holds more")


@jailed
def test_cannot_see_or_touch_the_parents_processes():
    me = os.getpid()
    for body in (f"open('/proc/{me}/environ').read()\n",
                 "os.listdir('/proc')\n",
                 f"import signal\nos.kill({me}, signal.SIGTERM)\n",
                 "os.kill(1, 9)\n",  # the supervisor (the namespace's init)
                 "import ctypes\n"  # PTRACE_ATTACH to the supervisor, then to the parent
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 f"assert libc.ptrace(16, 1, 0, 0) == 0 or libc.ptrace(16, {me}, 0, 0) == 0\n",
                 "open('/dev/shm/jail-probe', 'w')\n"):
        _contained(_attack(body))


@jailed
def test_cannot_remount_the_jail_writable():
    # a nested user namespace gives capabilities again, but over locked mounts only
    body = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0x10000000 | 0x00020000) == 0  # CLONE_NEWUSER | CLONE_NEWNS
libc.mount(None, b"/", None, 32 | 4096, None)  # MS_REMOUNT | MS_BIND: clear read-only
libc.mount(None, b"/usr/lib", None, 32 | 4096, None)
libc.umount2(b"/usr/lib", 2)
try:
    open('/jail-probe', 'w')
except OSError:
    open('/usr/lib/jail-probe', 'w')
"""
    _contained(_attack(body))
    assert not os.path.exists("/usr/lib/jail-probe")


@jailed
def test_floods_are_contained():
    # stdout goes nowhere; files stop at RLIMIT_FSIZE; the private /tmp is small
    _contained(_attack("for _ in range(256):\n    os.write(1, b'x' * 2**20)\nraise KeyError\n"))
    res = _attack("open('/tmp/big', 'wb').write(b'x' * 2**25)\n")
    _contained(res)
    res = evaluate_source("open('/tmp/big', 'wb').write(b'x' * 2**25)\n" + BEST_FIT,
                          ITEMS[:1, :10], CAPACITY)
    assert not res.ok and "File too large" in res.error


@pytest.mark.skipif(os.geteuid() == 0, reason=ROOT_SKIP)
def test_fallback_warns_once_and_says_so(monkeypatch):
    monkeypatch.setattr(sandbox, "_FLAVOUR", [])
    monkeypatch.setattr(sandbox, "_REASON", [])
    monkeypatch.setattr(sandbox, "_WARNED", [])
    monkeypatch.setattr(sandbox, "_unshare", lambda: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert sandbox.isolation_level() == "rlimits"
        first = evaluate_source(BEST_FIT, ITEMS, CAPACITY)
        again = sandbox.evaluate_many([BEST_FIT], ITEMS, CAPACITY)[0]
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    files = "CAN read your files" if _landlock.abi_version() else "CAN read and write"
    assert len(msgs) == 1 and "no unshare" in msgs[0] and files in msgs[0]
    assert first.ok and first.isolation == again.isolation == "rlimits"
    assert first.landlock == again.landlock == (_landlock.abi_version() > 0)
    assert first.bins == again.bins
    with pytest.raises(ValueError, match="isolation"):
        evaluate_source(BEST_FIT, ITEMS, CAPACITY, isolation="none")


@jailed
def test_user_namespace_flavour_also_holds(tmp_path):
    # the jail a non-root user gets (as root, "auto" uses the root flavour)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    body = (f"os.remove({str(victim)!r})\n")
    res = sandbox._run(_attack_source(body), ITEMS[:1, :10], CAPACITY, timeout=10.0,
                       func_name="priority", memory_bytes=2**31, level="namespaces",
                       flavour="userns")
    if not res.ok and res.error.startswith("jail:"):
        pytest.skip(f"no user namespaces here: {res.error}")
    _contained(res)
    assert victim.exists()
    res = sandbox._run(BEST_FIT, ITEMS, CAPACITY, timeout=10.0, func_name="priority",
                       memory_bytes=2**31, level="namespaces", flavour="userns")
    assert res.ok and res.bins == evaluate_source(BEST_FIT, ITEMS, CAPACITY).bins


"""jaxkit.malloc: the glibc tunables the entry points re-execute with, and that under them
a freed large block is reused without page faults."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from jaxkit import bench, malloc

ALL = ":".join(f"{k}={v}" for k, v in malloc.TUNABLES.items())


def test_tuned_env_adds_the_tunables_and_marks_the_process():
    env = malloc.tuned_env({"PATH": "/bin"}, libc="glibc")
    assert env["GLIBC_TUNABLES"] == ALL
    assert env[malloc.MARKER] == "" and env["PATH"] == "/bin"


def test_tuned_env_keeps_the_users_values_and_adds_only_missing_names():
    user = "glibc.malloc.arena_max=4:glibc.malloc.tcache_count=0"
    env = malloc.tuned_env({"GLIBC_TUNABLES": user}, libc="glibc")
    got = env["GLIBC_TUNABLES"].split(":")
    assert got[:2] == user.split(":")  # the user's values first, unchanged
    assert "glibc.malloc.arena_max=1" not in got
    assert {"glibc.malloc.hugetlb=1", "glibc.malloc.mmap_max=0"} <= set(got)
    assert env[malloc.MARKER] == user


@pytest.mark.parametrize("env, libc", [
    ({}, "musl"),                                   # not glibc
    ({}, ""),                                       # not Linux
    ({malloc.ENV_VAR: "system"}, "glibc"),          # opted out
    ({malloc.ENV_VAR: "SYSTEM"}, "glibc"),
    ({malloc.MARKER: ""}, "glibc"),                 # already re-executed: never twice
    ({"GLIBC_TUNABLES": ALL}, "glibc"),             # every name already set
])
def test_tuned_env_does_nothing_when_it_should_not(env, libc):
    assert malloc.tuned_env(env, libc=libc) is None


def test_hugepages_choice_adds_only_hugetlb_and_a_bad_choice_is_named():
    env = malloc.tuned_env({malloc.ENV_VAR: "hugepages"}, libc="glibc")
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    with pytest.raises(ValueError, match="JAXKIT_MALLOC='fast': must be one of tuned, "
                                         "hugepages, system"):
        malloc.tuned_env({malloc.ENV_VAR: "fast"}, libc="glibc")


def test_a_bad_choice_stops_the_command_with_one_line():
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", malloc.MARKER)}
    p = subprocess.run([sys.executable, "-c", "from jaxkit import malloc; malloc.reexec()"],
                       env={**env, malloc.ENV_VAR: "fast"}, capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "error: JAXKIT_MALLOC='fast': must be one of tuned, hugepages, system"]


def test_original_env_restores_what_the_user_started_with():
    for before in ({}, {"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"}):
        tuned = malloc.tuned_env({"PATH": "/bin", **before}, libc="glibc")
        assert malloc.original_env(tuned) == {"PATH": "/bin", **before}
    assert malloc.original_env({"PATH": "/bin"}) == {"PATH": "/bin"}  # nothing to undo


def test_peer_env_drops_the_tunables_jaxkit_added(monkeypatch):
    for k, v in malloc.tuned_env({}, libc="glibc").items():
        monkeypatch.setenv(k, v)
    env = bench.peer_env()
    assert "GLIBC_TUNABLES" not in env and malloc.MARKER not in env


# Allocates a block of ``MiB`` MiB (64: above glibc's largest mmap threshold, 32 MiB),
# touches every page, frees it, and does it again, in the main thread or (``thread``) in
# one other thread, as XLA runs a program on a thread of its pool: the second round's
# minor page faults say whether the freed block was reused (a few) or given back to the
# system and faulted in again (about 256 per MiB at 4 KiB pages).
_FAULTS = textwrap.dedent("""
    import ctypes, json, os, resource, sys, threading
    from jaxkit import malloc
    malloc.reexec()
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    n = int(sys.argv[2]) << 20
    faults = []
    def rounds():
        for _ in range(2):
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            p = libc.malloc(n)
            libc.memset(p, 1, n)
            libc.free(p)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    if sys.argv[1] == "thread":
        t = threading.Thread(target=rounds)
        t.start()
        t.join()
    else:
        rounds()
    print(json.dumps(dict(faults=faults, state=malloc.state())))
""")


def _clean_env():
    """This process's environment without the allocator's variables."""
    return {k: v for k, v in os.environ.items()
            if k not in ("GLIBC_TUNABLES", malloc.MARKER, malloc.ENV_VAR)}


def _run(env, where="main", mib=64):
    p = subprocess.run([sys.executable, "-c", _FAULTS, where, str(mib)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(malloc.tuned_env({}) is None, reason="not Linux with glibc")
def test_reexec_makes_a_freed_large_block_reusable_without_page_faults():
    base = _clean_env()
    tuned = _run(base)
    assert tuned["state"] == {"glibc_tunables": ALL, "set_by_jaxkit": True}
    system = _run({**base, malloc.ENV_VAR: "system"})
    assert system["state"] == {"glibc_tunables": None, "set_by_jaxkit": False}
    # the system allocator maps the block afresh each round; under the tunables the
    # second round reuses the first round's pages
    assert system["faults"][1] > 4000, system
    assert tuned["faults"][1] < 500, tuned


@pytest.mark.skipif(malloc.tuned_env({}) is None, reason="not Linux with glibc")
def test_a_block_beyond_a_threads_arena_is_reused_only_with_one_arena():
    """``arena_max=1`` is what keeps a block allocated off the main thread on the heap: a
    secondary arena's heaps hold 64 MiB at most, and glibc serves a larger block there with
    ``mmap`` whatever ``mmap_max`` says (jaxkit/malloc.py)."""
    base = _clean_env()
    tuned = _run(base, "thread", 96)
    assert tuned["state"]["set_by_jaxkit"], tuned
    # the other tunables without arena_max=1 (and without huge pages, so that the faults
    # count 4 KiB pages): the thread's block is mapped afresh each round
    rest = ":".join(f"{k}={v}" for k, v in malloc.TUNABLES.items()
                    if k not in ("glibc.malloc.arena_max", "glibc.malloc.hugetlb"))
    no_arena = _run({**base, malloc.ENV_VAR: "system", "GLIBC_TUNABLES": rest},
                    "thread", 96)
    assert no_arena["faults"][1] > 96 * 200, no_arena
    assert tuned["faults"][1] < 500, tuned

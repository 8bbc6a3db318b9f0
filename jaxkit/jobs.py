"""``jaxkit run all --jobs N``: the pipelines of one invocation run N at a time, each in a
worker process of its own.

A quick run is mostly XLA compilation, and one compilation keeps one core busy: on a
2-core machine the twelve quick runs one after another leave the second core idle for
about a third of the time (benchmarks/RESULTS.md, "`run all --jobs`"). A worker is a
fresh ``python -m jaxkit.jobs SPEC RESULT``: it gets the configuration, seed, mesh
specification, resume flag, compilation cache and ``jax_enable_x64`` the parent resolved
(and the parent's environment), runs the pipeline
as ``jaxkit run NAME`` would, and pickles what it returned (or the error it raised) to
``RESULT``. So a pipeline's results do not depend on ``N`` (tested), and a pipeline that
fails or dies does not stop the others. A worker's progress lines and anything it prints
go to ``OUT/NAME/run.log``, written as it goes: a first line when the pipeline starts, a
line as each stage starts, ends or reloads, its progress lines, and a last line (the time,
or the error after its traceback); its standard output is line-buffered (so is that of
the processes it starts, through ``PYTHONUNBUFFERED``), so nothing waits in a buffer
until the worker ends. (A pipeline whose trainings each last a few seconds prints no
progress line, which are periodic: its log used to stay empty until the end.)

Workers run one per CPU core (at most :data:`MAX_AUTO`) by default for quick runs on the
CPU; full runs, which are compute-bound and hold far more memory, default to one at a
time, and so does every run on an accelerator (each process would claim the device's
memory) or across hosts (the pipelines are the hosts' shared program).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MAX_AUTO", "Job", "Outcome", "default_jobs", "portable", "run_jobs"]

#: the most workers the default starts (each quick run holds about 1.3 GB at its peak)
MAX_AUTO = 4
LOG = "run.log"  # a worker's output, in its pipeline's folder


@dataclass(frozen=True)
class Job:
    """What a worker needs to run one pipeline as ``jaxkit run NAME`` would."""

    name: str
    run: Callable  # the pipeline's run(ctx), pickled by reference (module and name)
    config: Any
    out_dir: Path  # as the parent has it (the worker starts in the parent's folder)
    quick: bool
    seed: int
    mesh: dict[str, int]  # the parsed --mesh
    resume: bool
    cache_dir: str | None  # the parent's persistent compilation cache, if on
    x64: bool = False  # the parent's jax_enable_x64


@dataclass
class Outcome:
    """A finished worker: the pipeline's result, or the one-line error and where its log
    is; the stages it reloaded; its wall time in seconds."""

    name: str
    result: Any = None
    error: str | None = None
    reloaded: list[str] = field(default_factory=list)
    seconds: float = 0.0
    resumed: list[dict] = field(default_factory=list)


def default_jobs(n_pipelines: int, *, quick: bool, backend: str, processes: int,
                 cores: int | None = None) -> int:
    """How many pipelines ``run all`` runs at once without ``--jobs`` (module docstring):
    ``min(cores, MAX_AUTO, n_pipelines)`` for quick runs on the CPU in one process, else 1.
    """
    if not quick or backend != "cpu" or processes > 1:
        return 1
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_AUTO, n_pipelines))


def portable(run: Callable) -> bool:
    """Whether a worker process can get ``run`` by reference: a function defined at the
    top level of a module other than ``__main__`` (not one local to another function)."""
    mod = getattr(run, "__module__", None)
    if not mod or mod == "__main__":
        return False
    try:
        return pickle.loads(pickle.dumps(run)) is run
    except (pickle.PicklingError, AttributeError, TypeError):
        return False


def run_jobs(jobs: Sequence[Job], n_at_once: int, *,
             on_done: Callable[[Outcome], None] = lambda out: None,
             poll: float = 0.1) -> list[Outcome]:
    """Run ``jobs`` in worker processes, at most ``n_at_once`` at a time, started in the
    given order; ``on_done`` is called in this process as each ends (in the order they
    end).

    Args:
        jobs: the pipelines to run (distinct names).
        n_at_once: workers at a time (>= 1).
        on_done: the callback.
        poll: seconds between looks at the running workers.

    Returns:
        The outcomes in the order of ``jobs``.
    """
    if not (isinstance(n_at_once, int) and n_at_once >= 1):
        raise ValueError(f"`n_at_once` must be an int >= 1; got {n_at_once!r}")
    if len({j.name for j in jobs}) != len(jobs):
        raise ValueError("`jobs` must have distinct names")
    pending, running, done = list(jobs), {}, {}
    with tempfile.TemporaryDirectory(prefix="jaxkit-jobs-") as tmp:
        try:
            while pending or running:
                while pending and len(running) < n_at_once:
                    job = pending.pop(0)
                    running[job.name] = (job, *_start(job, Path(tmp)))
                time.sleep(poll)
                for name, (job, proc, result, log, t0) in list(running.items()):
                    if proc.poll() is None:
                        continue
                    log.close()
                    del running[name]
                    done[name] = _collect(job, proc.returncode, result,
                                          time.perf_counter() - t0)
                    on_done(done[name])
        finally:  # interrupted: no worker outlives the parent
            for _, proc, _, log, _ in running.values():
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
                if proc.poll() is None:
                    proc.kill()
                log.close()
    return [done[j.name] for j in jobs]


def _start(job: Job, tmp: Path):
    spec, result = tmp / f"{job.name}.spec", tmp / f"{job.name}.result"
    # the parent's import path first: the worker needs it to unpickle the job's function
    spec.write_bytes(pickle.dumps(list(sys.path)) + pickle.dumps(job))
    job.out_dir.mkdir(parents=True, exist_ok=True)
    log = open(job.out_dir / LOG, "w")  # noqa: SIM115 -- closed when the worker ends
    env = dict(os.environ)
    env.setdefault("JAXKIT_PROGRESS", "plain")  # lines in the log, not a bar
    env["PYTHONUNBUFFERED"] = "1"  # the worker's and its children's prints reach the log now
    proc = subprocess.Popen([sys.executable, "-m", "jaxkit.jobs", str(spec), str(result)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env)
    return proc, result, log, time.perf_counter()


def _collect(job: Job, code: int, result: Path, seconds: float) -> Outcome:
    try:
        got = pickle.loads(result.read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError):
        return Outcome(job.name, error=f"worker exited with code {code} and no result "
                                       f"(see {job.out_dir / LOG})", seconds=seconds)
    return Outcome(job.name, result=got.get("result"), error=got.get("error"),
                   reloaded=got.get("reloaded", []), seconds=got.get("seconds", seconds),
                   resumed=got.get("resumed", []))


def _work(spec_path: str, result_path: str) -> int:
    """The worker: run the pipeline of the :class:`Job` pickled at ``spec_path`` (after
    the parent's import path) and pickle ``{"result" | "error", "reloaded", "seconds"}``
    to ``result_path``."""
    t0 = time.perf_counter()
    with contextlib.suppress(AttributeError, ValueError):  # a stream without reconfigure
        sys.stdout.reconfigure(line_buffering=True)
    out: dict[str, Any] = {"reloaded": []}

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        with open(spec_path, "rb") as f:
            sys.path[:0] = [p for p in pickle.load(f) if p not in sys.path]
            job: Job = pickle.load(f)
        say(f"jaxkit run {job.name} ({'quick' if job.quick else 'full'}, seed {job.seed}) "
            f"in {job.out_dir}: started {time.strftime('%Y-%m-%d %H:%M:%S')}, pid "
            f"{os.getpid()}")
        from . import config, registry
        from .distributed import make_mesh
        from .log import make_progress, quiet_third_party_warnings, use_progress

        quiet_third_party_warnings()
        if job.x64:
            import jax

            jax.config.update("jax_enable_x64", True)
        if job.cache_dir is not None:
            config.enable_compile_cache(job.cache_dir)
        progress = make_progress()
        ctx = registry.RunContext(out_dir=job.out_dir, config=job.config, quick=job.quick,
                                  seed=job.seed, mesh=make_mesh(job.mesh), progress=progress,
                                  resume=job.resume, log=say)
        out["reloaded"] = ctx.reloaded  # the same list, filled as stages reload
        out["resumed"] = ctx.resumed  # ... and as trainings resume
        with progress if progress is not None else contextlib.nullcontext(), \
                use_progress(progress):
            from .training import record_resumes, use_fingerprint

            with use_fingerprint(ctx.fingerprint()), record_resumes(ctx.resumed):
                out["result"] = job.run(ctx)
        code = 0
    except Exception as e:  # reported by the parent as this pipeline's failure
        traceback.print_exc()
        sys.stderr.flush()
        out["error"] = f"{type(e).__name__}: {e}"
        code = 1
    out["seconds"] = time.perf_counter() - t0
    say(f"done in {out['seconds']:.1f}s" if code == 0
        else f"FAILED after {out['seconds']:.1f}s (the traceback above)")
    from .io import atomic_write

    atomic_write(result_path, pickle.dumps(out))
    return code


if __name__ == "__main__":
    raise SystemExit(_work(*sys.argv[1:3]))

"""The ``jaxkit`` command line: ``info``, ``list``, ``run``, ``bench``, and the family commands
(``lingam``, ``ballad``, ``crosscoder``, ``causaltab``, ``cruxbench``, ``compose``,
``misaligned``: each assembled from its paper package; ``lm``, the local language model;
``claims``, verdict stability and tallies)."""

from __future__ import annotations

import contextlib
import datetime
import importlib.util
import json
import shutil
import time
from pathlib import Path
from typing import Annotated, NamedTuple

import typer
from rich.markup import escape

from . import malloc
from ._cli_claims import claims_app
from ._cli_common import check_json_path, console, err_console
from ._cli_common import fail as _fail
from .ballad.cli import ballad_app
from .causaltab.cli import causaltab_app
from .compose.cli import app as compose_app
from .contrastive.cli import contrastive_app
from .crosscoder.cli import app as crosscoder_app
from .cruxbench.cli import cruxbench_app
from .lm.cli import lm_app
from .misaligned.cli import app as misaligned_app
from .pooled_lingam.cli import lingam_app

app = typer.Typer(help="jaxkit: JAX kernels and research pipelines.", no_args_is_help=True,
                  pretty_exceptions_enable=False,
                  epilog="Launcher option: JAXKIT_MALLOC=tuned|hugepages|system (default "
                  "tuned): the jaxkit command restarts itself once under glibc malloc "
                  "tunables that keep XLA:CPU's per-call buffers mapped (jaxkit/malloc.py); "
                  "system: no restart. Calling jaxkit.cli.app in-process never restarts.")
app.add_typer(lingam_app, name="lingam")
app.add_typer(ballad_app, name="ballad")
app.add_typer(crosscoder_app, name="crosscoder")
app.add_typer(causaltab_app, name="causaltab")
app.add_typer(cruxbench_app, name="cruxbench")
app.add_typer(compose_app, name="compose")
app.add_typer(contrastive_app, name="contrastive")
app.add_typer(misaligned_app, name="misaligned")
app.add_typer(lm_app, name="lm")
app.add_typer(claims_app, name="claims")


def _version(value: bool):
    if value:
        from . import __version__

        typer.echo(f"jaxkit {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    distributed: Annotated[bool, typer.Option(
        help="Initialise multi-host JAX from JAXKIT_COORDINATOR / JAXKIT_NUM_PROCESSES / "
             "JAXKIT_PROCESS_ID (or JAXKIT_DISTRIBUTED=auto) before anything else.")] = False,
    compile_cache: Annotated[bool, typer.Option(
        help="keep compiled XLA programs in the user cache folder (see 'jaxkit info'), so "
             "a second run compiles nothing; also off with JAXKIT_NO_COMPILE_CACHE=1; never "
             "for 'bench', which times compilation")] = True,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
):
    from .kernels.checks import install_error_display
    from .log import quiet_third_party_warnings

    quiet_third_party_warnings()
    install_error_display()  # a failed check inside jit reads as one clear line
    if distributed:
        from . import distributed as jd

        try:
            started = jd.initialize()
        except (ValueError, RuntimeError) as e:  # not a cluster, bad env, JAX already up
            _fail(f"--distributed: {' '.join(str(e).split())}")
        if not started:
            _fail("--distributed given but no JAXKIT_COORDINATOR or JAXKIT_DISTRIBUTED=auto")
    # benchmarks time compilation themselves: never from a cache
    if compile_cache and ctx.invoked_subcommand != "bench":
        from . import config

        config.enable_compile_cache()


def _clear_checkpoints(out_dir: Path) -> Path | None:
    """``--fresh``: remove the run's own training checkpoints (``OUT/checkpoints``, where
    every pipeline keeps them), so that its trainings start from step 0 instead of
    refusing a folder that holds a previous run's checkpoints. Returns the folder removed,
    or None when there was none. Nothing else in ``OUT`` is touched."""
    ck = out_dir / "checkpoints"
    if not ck.is_dir():
        return None
    shutil.rmtree(ck)
    return ck


@app.command()
def info():
    """jaxkit and JAX versions, jaxkit's dependencies (optional ones too), XLA_FLAGS,
    thread settings, the compilation cache and the devices."""
    from ._cli_info import info_table

    console.print(info_table())


def _one_line(entry) -> str:
    """A pipeline's one line: its registered title, else the first sentence of its paper
    package's docstring."""
    if entry.title:
        return " ".join(entry.title.split())
    import importlib

    pkg = entry.module.rpartition(".")[0] or entry.module
    try:
        doc = importlib.import_module(pkg).__doc__ or ""
    except ImportError:
        doc = ""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    return first.split(". ")[0].rstrip(".") or "(no description)"


@app.command("list")
def list_pipelines():
    """The registered pipelines, one line each: the name 'jaxkit run' takes and the
    paper it reproduces."""
    from . import registry

    names = registry.names()
    width = max(map(len, names), default=0)
    for n in names:
        typer.echo(f"{n:<{width}}  {_one_line(registry.get(n))}")
    typer.echo(f"\n{len(names)} pipelines; run one with 'jaxkit run NAME --quick', all of "
               "them with 'jaxkit run all --quick'")


def _short(verdict: str) -> str:
    return {"yes": "Y", "no": "N", "not shown": "?"}.get(verdict, "-")


def _claims_line(claims) -> str:
    """``YY?- (2 yes, 1 not shown, 1 not tested)``: each claim's verdict, short."""
    if not claims:
        return "no claims"
    from .report import verdict_counts

    counts = ", ".join(f"{v} {k}" for k, v in verdict_counts(claims).items() if v)
    return "".join(_short(c.verdict) for c in claims) + f" ({counts})"


def _resolve_configs(todo: list[str], entries: dict, *, all_: bool, quick: bool,
                     toml: Path | None, sets: list[str]) -> dict:
    """Each pipeline's configuration: QUICK or FULL, then the TOML, then --set; a bad
    value fails with one line naming the pipeline and the field."""
    import difflib

    from .config import read_toml

    def unknown_pipeline(n: str, what: str):
        close = difflib.get_close_matches(n, todo, n=3)
        _fail(f"{what}: unknown pipeline {n!r}"
              + (f"; did you mean {', '.join(close)}?" if close else
                 f"; pipelines: {', '.join(todo)}"))

    tables: dict[str, dict] = {n: {} for n in todo}
    if toml is not None:
        try:
            doc = read_toml(toml)
        except ValueError as e:
            _fail(f"--config {e}")
        if all_:
            for k, v in doc.items():
                if not isinstance(v, dict):
                    _fail(f"--config {toml}: with 'all', top-level keys must be tables "
                          f"named after pipelines ([NAME]); got {k!r}")
                if k not in tables:
                    unknown_pipeline(k, f"--config {toml}")
                tables[k] = v
        else:
            (n,) = todo
            doc = dict(doc)
            inner = doc.pop(n, None)
            tables[n] = {**doc, **inner} if isinstance(inner, dict) else doc
    assigns: dict[str, list[str]] = {n: [] for n in todo}
    for a in sets:
        if all_:
            lhs, eq, rhs = a.partition("=")
            pipe, dot, fld = lhs.partition(".")
            if not eq or not dot:
                _fail(f"--set with 'all' must look like PIPELINE.field=value; got {a!r}")
            if pipe.strip() not in assigns:
                unknown_pipeline(pipe.strip(), "--set")
            assigns[pipe.strip()].append(f"{fld}={rhs}")
        else:
            assigns[todo[0]].append(a)
    configs = {}
    for n in todo:
        cfg = entries[n].config(quick)
        try:
            cfg = cfg.merged(tables[n])
        except ValueError as e:
            _fail(f"{n}: --config {toml}: {e}")
        try:
            cfg = cfg.override(assigns[n])
        except ValueError as e:
            _fail(f"{n}: --set: {e}")
        configs[n] = cfg
    return configs


def _show_config(name: str, configs: dict, quick: bool) -> str:
    from .config import to_toml

    mode = "quick" if quick else "full"
    if name != "all":
        return f"# {name} ({mode})\n{configs[name].to_toml()}\n"
    return f"# all pipelines ({mode})\n" + to_toml(configs)


def _run_record(name: str, configs: dict, *, quick: bool, seed: int) -> dict:
    from . import __version__

    return {"pipeline": name, "mode": "quick" if quick else "full", "seed": seed,
            "configs": {n: c.to_dict() for n, c in configs.items()},
            "digests": {n: c.digest() for n, c in configs.items()},
            "jaxkit": __version__}


class _Ran(NamedTuple):
    """One pipeline of an invocation, the stages it reloaded and the trainings it
    resumed (filled as it runs)."""

    name: str
    reloaded: list
    resumed: list


def _previous_invocations(out_dir: Path, record: dict) -> list:
    """The invocations recorded in ``out_dir/run.json`` by earlier runs of the same
    pipeline, mode, seed and configuration (a resumed run keeps its history, so the
    record says which invocation computed what); ``[]`` for anything else."""
    try:
        old = json.loads((out_dir / "run.json").read_text())
    except (OSError, ValueError):
        return []
    if any(old.get(k) != record[k] for k in ("pipeline", "mode", "seed", "configs")):
        return []
    prev = [dict(p, status="stopped before the end (killed or failed)")
            if p.get("status") == "running" else p for p in old.get("invocations") or []]
    if not prev and "wall_s" in old:  # a record written before invocations were kept
        prev = [dict(wall_s=round(float(old["wall_s"]), 1), status=old.get("status"))]
    elif not prev and old.get("status") == "running":
        prev = [dict(status="stopped before the end (killed or failed)")]
    return prev


def _git_commit() -> str | None:
    """The commit of the jaxkit checkout this runs from, or None (not a git checkout)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def _check_out_dir(out_dir: Path, record: dict, *, force: bool) -> None:
    """Refuse to mix a run into a folder that holds another run's report."""
    if out_dir.exists() and not out_dir.is_dir():
        _fail(f"--out {out_dir}: is a file, not a folder")
    if force or not out_dir.is_dir():
        return
    saved = out_dir / "run.json"
    hint = "; use another --out, or --force to overwrite it"
    if saved.is_file():
        try:
            old = json.loads(saved.read_text())
        except (OSError, ValueError):
            _fail(f"{saved} is unreadable{hint}")
        same = {k: old.get(k) for k in ("pipeline", "mode", "seed", "configs")}
        new = {k: record[k] for k in ("pipeline", "mode", "seed", "configs")}
        if same != new:
            diff = [k for k in new if same[k] != new[k]]
            _fail(f"{out_dir} holds a run of a different {' / '.join(diff)} "
                  f"(see {saved}){hint}")
    elif (out_dir / "report.md").is_file():
        _fail(f"{out_dir} holds a report.md of an unknown configuration (no run.json)"
              f"{hint}")


LOCK = ".jaxkit-run.lock"


def _lock_out_dir(out_dir: Path) -> None:
    """Hold a lock on ``out_dir`` until the command ends: a second run into the same
    folder fails at once with one line instead of interleaving its stages and records."""
    import click
    from filelock import FileLock, Timeout

    out_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(out_dir / LOCK))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        _fail(f"{out_dir}: another jaxkit run is writing to this folder (it holds "
              f"{out_dir / LOCK}); wait for it to finish or choose another --out")
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(lock.release)


@app.command()
def run(
    name: Annotated[str, typer.Argument(help="pipeline name, or 'all'")],
    quick: Annotated[bool, typer.Option(help="small, fast configuration")] = False,
    out: Annotated[Path | None, typer.Option(help="output folder (default runs/NAME)")] = None,
    seed: Annotated[int, typer.Option(help="base PRNG seed")] = 0,
    fresh: Annotated[bool, typer.Option(
        help="recompute every stage and retrain from step 0 (removes OUT/checkpoints) "
             "instead of resuming a killed run's saved stages and checkpoints")] = False,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", help="field=value, overriding the configuration (repeatable); with 'all', "
                      "PIPELINE.field=value")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="TOML file: top-level keys (or a [NAME] table) for one pipeline; "
                         "tables named after pipelines ([pooled-lingam]) for 'all'")] = None,
    show_config: Annotated[bool, typer.Option(
        "--show-config", help="print the resolved configuration and exit")] = False,
    mesh: Annotated[str, typer.Option(
        help="device mesh, e.g. data=8 (-1: every device)")] = "data=-1",
    force: Annotated[bool, typer.Option(
        help="run into a folder that holds a report of a different seed, configuration "
             "or mode")] = False,
    jobs: Annotated[int | None, typer.Option(
        help="with 'all': how many pipelines run at once, each in a process of its own "
             "(its output in OUT/NAME/run.log); default one per CPU core, at most 4, for "
             "--quick on the CPU, else 1")] = None,
):
    """Run a pipeline (or all of them) and write report.md plus PNG figures.

    The configuration is the pipeline's quick or full one, then --config, then each
    --set. Each finished stage is saved (atomically) in the output folder, so a killed
    run resumes where it stopped when started again with the same configuration."""
    from . import registry
    from .io import atomic_write

    all_ = name == "all"
    todo = registry.names() if all_ else [name]
    entries = {}
    for n in todo:
        try:
            entries[n] = registry.get(n)
        except KeyError as e:
            _fail(str(e.args[0]))
    configs = _resolve_configs(todo, entries, all_=all_, quick=quick, toml=config,
                               sets=list(sets or []))
    if show_config:
        typer.echo(_show_config(name, configs, quick), nl=False)
        return
    # every argument checked before the output folder: a bad --jobs or --mesh is named
    # as such, whatever the folder holds
    from .distributed import make_mesh
    from .report import write_report

    axes = _parse_mesh(mesh)
    try:
        the_mesh = make_mesh(axes)
    except ValueError as e:
        _fail(f"--mesh {mesh}: {e}")
    from .jobs import portable

    n_jobs = _n_jobs(jobs, todo, all_=all_, quick=quick)
    out_dir = out or Path("runs") / name
    record = _run_record(name, configs, quick=quick, seed=seed)
    _check_out_dir(out_dir, record, force=force)
    _lock_out_dir(out_dir)
    record["invocations"] = [] if fresh else _previous_invocations(out_dir, record)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    if n_jobs > 1 and (alone := [n for n in todo if not portable(entries[n].run)]):
        n_jobs = 1  # a worker could not find these pipelines
        if jobs is not None:
            err_console.print(f"--jobs {jobs}: the function of {', '.join(alone)} is not at "
                              f"the top level of an importable module; running one at a time")
    out_dir.mkdir(parents=True, exist_ok=True)
    commit = _git_commit()
    atomic_write(out_dir / "run.json", json.dumps(dict(
        record, status="running", invocations=[*record["invocations"], dict(
            started=started, status="running", commit=commit, fresh=fresh, jobs=n_jobs,
            malloc=malloc.state())]), indent=2)
                 + "\n")
    from .io import DataError
    from .jobs import LOG
    from .log import format_duration, make_progress, use_progress
    from .report import last_line

    try:
        progress = make_progress(err_console)  # checks JAXKIT_PROGRESS for the workers too
    except ValueError as e:
        _fail(str(e))
    ran, failed, contexts = {}, [], []  # ran: name -> result
    errors: dict[str, str] = {}  # a failed pipeline's error
    t_all = time.perf_counter()
    if all_:
        console.print(f"running {len(todo)} pipelines ({'quick' if quick else 'full'}"
                      + (f", {n_jobs} at a time, each one's output in "
                         f"{out_dir / '<pipeline>' / LOG}" if n_jobs > 1 else "")
                      + "); verdicts: Y yes, N no, ? not shown, - not tested at this size",
                      soft_wrap=True, highlight=False)
    width = max(map(len, todo))

    def overall() -> None:
        """After each finished pipeline of 'all': how many are done, and an ETA."""
        k = len(ran) + len(failed)
        if not all_ or k >= len(todo):
            return
        el = time.perf_counter() - t_all
        console.print(f"{'':9}{k}/{len(todo)} finished ({len(failed)} failed), elapsed "
                      f"{format_duration(el)}, ETA {format_duration(el / k * (len(todo) - k))}",
                      soft_wrap=True, highlight=False)

    def done(n: str, res, dt: float) -> None:
        if entries[n].title is not None:
            res.title = entries[n].title
        res.metrics.setdefault("wall_s", dt)
        ran[n] = res
        for w in res.warnings:
            err_console.print(f"[yellow]warning ({n}):[/] {escape(w)}", soft_wrap=True)
        console.print(f"[{len(ran) + len(failed):>2}/{len(todo)}] {n:<{width}} {dt:7.1f}s  "
                      f"{escape(_claims_line(res.claims))}", soft_wrap=True, highlight=False)
        overall()

    def fail(n: str, error: str, dt: float) -> None:
        failed.append(n)
        errors[n] = error
        console.print(f"[{len(ran) + len(failed):>2}/{len(todo)}] {n:<{width}} [red]FAILED"
                      f"[/] after {dt:.1f}s: {escape(last_line(error))}", soft_wrap=True)
        overall()

    def fresh_start(d: Path) -> None:
        if fresh and (gone := _clear_checkpoints(d)) is not None:
            err_console.print(f"--fresh: removed the previous run's checkpoints ({gone})")

    if n_jobs > 1:
        import jax

        from .config import compile_cache_in_use
        from .jobs import Job, run_jobs

        specs = [Job(n, entries[n].run, configs[n], out_dir / n, quick, seed, axes,
                     not fresh, compile_cache_in_use(), bool(jax.config.jax_enable_x64))
                 for n in todo]
        for job in specs:
            fresh_start(job.out_dir)
        for o in run_jobs(specs, n_jobs, on_done=lambda o: (
                fail(o.name, o.error, o.seconds) if o.result is None
                else done(o.name, o.result, o.seconds))):
            contexts.append(_Ran(o.name, o.reloaded, o.resumed))
        failed.sort(key=todo.index)
    else:
        with progress if progress is not None else contextlib.nullcontext(), \
                use_progress(progress):
            for n in todo:
                ctx = registry.RunContext(out_dir=out_dir / n if all_ else out_dir,
                                          config=configs[n], quick=quick, seed=seed,
                                          mesh=the_mesh, progress=progress,
                                          resume=not fresh)
                contexts.append(_Ran(n, ctx.reloaded, ctx.resumed))
                ctx.out_dir.mkdir(parents=True, exist_ok=True)
                fresh_start(ctx.out_dir)
                t0 = time.perf_counter()
                try:
                    res = entries[n](ctx)
                except DataError as e:  # the user's own data: one line, no traceback
                    if not all_:
                        _fail(f"{n}: {' '.join(str(e).split())}")
                    fail(n, type(e).__name__ + ": " + str(e), time.perf_counter() - t0)
                    continue
                except Exception as e:  # with 'all', one failure does not stop the others
                    if not all_:
                        raise
                    fail(n, type(e).__name__ + ": " + str(e), time.perf_counter() - t0)
                    continue
                done(n, res, time.perf_counter() - t0)
    results = [ran[n] for n in todo if n in ran]
    logs = {n: out_dir / n / LOG for n in failed} if n_jobs > 1 else None
    report = write_report(out_dir, results, quick=quick, seed=seed,
                          failed={n: errors[n] for n in failed}, logs=logs, order=todo)
    wall = time.perf_counter() - t_all
    status = "failed" if failed else "done"
    this = dict(started=started, wall_s=round(wall, 1), status=status, commit=commit,
                fresh=fresh, jobs=n_jobs,
                reloaded={r.name: r.reloaded for r in contexts if r.reloaded},
                resumed={r.name: r.resumed for r in contexts if r.resumed},
                malloc=malloc.state())
    atomic_write(out_dir / "run.json", json.dumps(
        dict(record, status=status, wall_s=wall, failed=failed,
             errors={n: last_line(errors[n]) for n in failed},
             invocations=[*record["invocations"], this]), indent=2) + "\n")
    if all_:
        console.print(f"{len(results)}/{len(todo)} pipelines in {wall:.1f}s"
                      + (f"; failed: {', '.join(failed)}" if failed else ""))
    console.print(f"report: {report}")
    if failed:
        raise typer.Exit(1)


def _benchmarks_dir() -> Path | None:
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):
        d = base / "benchmarks"
        if d.is_dir() and any(d.glob("bench_*.py")):
            return d
    return None


@app.command()
def bench(
    name: Annotated[str, typer.Argument(help="benchmark name, e.g. 'ica'")],
    json_out: Annotated[Path | None, typer.Option("--json", help="write numbers here")] = None,
    quick: Annotated[bool, typer.Option(help="small sizes")] = False,
):
    """Run a benchmark from the source checkout's benchmarks/ folder (jaxkit vs peers)."""
    if json_out is not None:
        check_json_path(json_out)
    d = _benchmarks_dir()
    if d is None:
        _fail("benchmarks/ not found: benchmarks ship with the source checkout; run from it")
    path = d / f"bench_{name.replace('-', '_')}.py"
    if not path.is_file():
        avail = sorted(p.stem.removeprefix("bench_").replace("_", "-")
                       for p in d.glob("bench_*.py"))
        _fail(f"unknown benchmark {name!r}; available: {', '.join(avail)}")
    spec = importlib.util.spec_from_file_location(f"jaxkit_bench_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    argv = (["--json", str(json_out)] if json_out else []) + (["--quick"] if quick else [])
    raise typer.Exit(int(mod.main(argv) or 0))


def _n_jobs(jobs: int | None, todo: list[str], *, all_: bool, quick: bool) -> int:
    """The pipelines ``run`` runs at once: ``--jobs`` checked, or :func:`jobs.default_jobs`
    for 'all' (one at a time for a single pipeline)."""
    import jax

    from .jobs import default_jobs

    if jobs is None:
        return default_jobs(len(todo), quick=quick, backend=jax.default_backend(),
                            processes=jax.process_count()) if all_ else 1
    if jobs < 1:
        _fail(f"--jobs must be >= 1; got {jobs}")
    if jobs > 1 and not all_:
        _fail(f"--jobs {jobs}: runs the pipelines of 'all' at once; {todo[0]} is one pipeline")
    if jobs > 1 and jax.process_count() > 1:
        _fail(f"--jobs {jobs}: not across hosts (--distributed runs each pipeline as one "
              f"program of all {jax.process_count()} processes); use --jobs 1")
    return min(jobs, len(todo))


def _parse_mesh(spec: str) -> dict[str, int]:
    from jaxkit.distributed import parse_mesh

    try:
        return parse_mesh(spec)
    except ValueError as e:
        _fail(str(e))


if __name__ == "__main__":
    malloc.reexec()
    app()

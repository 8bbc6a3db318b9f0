"""The ``jaxkit`` command line: ``info``, ``run``, ``bench``, and the family commands
(``lingam``, ``ballad``, ``crosscoder``, ``causaltab``, ``cruxbench``, ``compose``,
``misaligned``: each assembled from its paper package)."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ._cli_common import check_json_path, console, err_console
from ._cli_common import fail as _fail
from .ballad.cli import ballad_app
from .causaltab.cli import causaltab_app
from .compose.cli import app as compose_app
from .crosscoder.cli import app as crosscoder_app
from .cruxbench.cli import cruxbench_app
from .misaligned.cli import app as misaligned_app
from .pooled_lingam.cli import lingam_app

app = typer.Typer(help="jaxkit: JAX kernels and research pipelines.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
app.add_typer(lingam_app, name="lingam")
app.add_typer(ballad_app, name="ballad")
app.add_typer(crosscoder_app, name="crosscoder")
app.add_typer(causaltab_app, name="causaltab")
app.add_typer(cruxbench_app, name="cruxbench")
app.add_typer(compose_app, name="compose")
app.add_typer(misaligned_app, name="misaligned")


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("[progress.description]{task.description}"),
                    BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), console=err_console, transient=True)


@app.callback()
def _main(
    distributed: Annotated[bool, typer.Option(
        help="Initialise multi-host JAX from JAXKIT_COORDINATOR / JAXKIT_NUM_PROCESSES / "
             "JAXKIT_PROCESS_ID (or JAXKIT_DISTRIBUTED=auto) before anything else.")] = False,
):
    if distributed:
        from . import distributed as jd

        try:
            started = jd.initialize()
        except (ValueError, RuntimeError) as e:  # not a cluster, bad env, JAX already up
            _fail(f"--distributed: {' '.join(str(e).split())}")
        if not started:
            _fail("--distributed given but no JAXKIT_COORDINATOR or JAXKIT_DISTRIBUTED=auto")


@app.command()
def info():
    """JAX version, backend, devices and process count."""
    import jax

    from . import __version__

    devs = jax.devices()
    t = Table(title="jaxkit environment", show_header=False)
    t.add_row("jaxkit", __version__)
    t.add_row("jax / jaxlib", f"{jax.__version__} / {jax.lib.__version__}")
    t.add_row("python", sys.version.split()[0])
    t.add_row("backend", jax.default_backend())
    t.add_row("devices", f"{len(devs)} x {devs[0].device_kind} "
                         f"({jax.local_device_count()} local)")
    t.add_row("processes", f"{jax.process_count()} (this is {jax.process_index()})")
    t.add_row("x64", str(jax.config.jax_enable_x64))
    console.print(t)


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


@app.command()
def run(
    name: Annotated[str, typer.Argument(help="pipeline name, or 'all'")],
    quick: Annotated[bool, typer.Option(help="small, fast configuration")] = False,
    out: Annotated[Path | None, typer.Option(help="output folder (default runs/NAME)")] = None,
    seed: Annotated[int, typer.Option(help="base PRNG seed")] = 0,
    fresh: Annotated[bool, typer.Option(
        help="recompute every stage instead of resuming a killed run's saved stages")] = False,
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
    out_dir = out or Path("runs") / name
    record = _run_record(name, configs, quick=quick, seed=seed)
    _check_out_dir(out_dir, record, force=force)
    from .distributed import make_mesh
    from .report import write_report

    axes = _parse_mesh(mesh)
    try:
        the_mesh = make_mesh(axes)
    except ValueError as e:
        _fail(f"--mesh {mesh}: {e}")
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(out_dir / "run.json", json.dumps(dict(record, status="running"), indent=2)
                 + "\n")
    results = []
    t_all = time.perf_counter()
    with _progress() as progress:
        for n in todo:
            ctx = registry.RunContext(out_dir=out_dir / n if all_ else out_dir,
                                      config=configs[n], quick=quick, seed=seed,
                                      mesh=the_mesh, progress=progress, resume=not fresh)
            ctx.out_dir.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            res = entries[n].run(ctx)
            if entries[n].title is not None:
                res.title = entries[n].title
            res.metrics.setdefault("wall_s", time.perf_counter() - t0)
            results.append(res)
            for w in res.warnings:
                err_console.print(f"[yellow]warning ({n}):[/] {w}")
            console.print(f"[green]done[/] {n} in {time.perf_counter() - t0:.1f}s")
    report = write_report(out_dir, results, quick=quick, seed=seed)
    atomic_write(out_dir / "run.json", json.dumps(
        dict(record, status="done", wall_s=time.perf_counter() - t_all), indent=2) + "\n")
    console.print(f"report: {report}")


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


def _parse_mesh(spec: str) -> dict[str, int]:
    from jaxkit.distributed import parse_mesh

    try:
        return parse_mesh(spec)
    except ValueError as e:
        _fail(str(e))


if __name__ == "__main__":
    app()

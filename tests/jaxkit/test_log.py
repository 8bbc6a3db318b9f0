"""jaxkit.log: plain progress lines (rate, ETA) off a terminal, rich bars on one, the
progress hook of training.fit, and third-party deprecation warnings shown once."""

import io
import warnings

import jax
import jax.numpy as jnp
import optax
import pytest
from jaxkit.kernels import train as T
from rich.console import Console

from jaxkit import log
from jaxkit.log import PlainProgress, format_duration, make_progress, use_progress
from jaxkit.registry import RunContext
from jaxkit.training import fit


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_plain_progress_prints_periodic_lines_with_rate_and_eta():
    buf, clock = io.StringIO(), Clock()
    p = PlainProgress(buf, every=10, clock=clock)
    t = p.add_task("models", total=10)
    for _ in range(3):
        clock.t += 2.0
        p.advance(t)
    assert buf.getvalue() == ""  # 6 s < every
    clock.t += 4.0
    p.advance(t)  # 10 s: one line
    assert buf.getvalue().splitlines() == ["models: 4/10 (40%), 2.5s each, elapsed 10s, ETA 15s"]
    for _ in range(6):
        clock.t += 0.5
        p.advance(t)  # finishes: a last line even before `every`
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and lines[1] == "models: 10/10 (100%), 1.3s each, elapsed 13s"
    assert "ETA" not in lines[1]
    p.remove_task(t)
    assert len(buf.getvalue().splitlines()) == 2  # nothing twice
    short = p.add_task("short", total=2)
    clock.t += 1.0
    p.update(short, advance=2)  # 1 s < every / 2: a short task prints nothing
    assert len(buf.getvalue().splitlines()) == 2
    u = p.add_task("stream")  # no total: a count, no ETA
    clock.t += 20
    p.update(u, completed=40, loss=0.5)
    assert buf.getvalue().splitlines()[-1] == "stream: 40, 2/s, elapsed 20s, loss 0.5"


def test_format_duration():
    assert [format_duration(s) for s in (3.21, 42, 125, 3725, float("nan"))] == [
        "3.2s", "42s", "2m05s", "1h02m", "?"]


def test_make_progress_modes(monkeypatch):
    from rich.progress import Progress

    off_tty = Console(file=io.StringIO(), force_terminal=False)
    tty = Console(file=io.StringIO(), force_terminal=True)
    monkeypatch.delenv("JAXKIT_PROGRESS", raising=False)
    assert isinstance(make_progress(off_tty), PlainProgress)
    assert isinstance(make_progress(tty), Progress)
    monkeypatch.setenv("JAXKIT_PROGRESS", "off")
    assert make_progress(tty) is None
    monkeypatch.setenv("JAXKIT_PROGRESS", "plain")
    monkeypatch.setenv("JAXKIT_PROGRESS_EVERY", "2.5")
    p = make_progress(tty)
    assert isinstance(p, PlainProgress) and p.every == 2.5
    monkeypatch.setenv("JAXKIT_PROGRESS_EVERY", "often")
    with pytest.raises(ValueError, match="JAXKIT_PROGRESS_EVERY must be a number"):
        make_progress(tty)
    monkeypatch.setenv("JAXKIT_PROGRESS", "fancy")
    with pytest.raises(ValueError, match="JAXKIT_PROGRESS must be rich, plain or off"):
        make_progress(tty)


def test_run_context_track_reports_to_plain_progress():
    buf, clock = io.StringIO(), Clock()
    ctx = RunContext("unused", progress=PlainProgress(buf, every=0, clock=clock))
    assert list(ctx.track(range(3), "cells")) == [0, 1, 2]
    assert buf.getvalue().splitlines()[-1].startswith("cells: 3/3 (100%)")


def _toy_fit(tmp_path, steps, **kw):
    opt = optax.sgd(0.1)

    def loss(p, key, batch, aux):
        return jnp.sum((p["w"] - batch) ** 2), ()

    st = T.init({"w": jnp.zeros(3)}, opt)
    return fit(jax.random.key(0), st, _STEP(loss, opt), lambda i: jnp.ones(3), steps=steps,
               checkpoint_dir=tmp_path / "ckpt", checkpoint_every=100, **kw)


_COMPILED = {}


def _STEP(loss, opt):
    if "step" not in _COMPILED:
        _COMPILED["step"] = jax.jit(T.make_train_step(loss, opt))
    return _COMPILED["step"]


def test_fit_reports_steps_through_the_installed_progress(tmp_path):
    buf = io.StringIO()
    silent = _toy_fit(tmp_path / "a", 6)
    assert buf.getvalue() == ""  # nothing installed: silent
    with use_progress(PlainProgress(buf, every=0)):
        assert log.current_progress() is not None
        loud = _toy_fit(tmp_path / "b", 6)
    assert log.current_progress() is None
    assert buf.getvalue().splitlines()[-1].startswith("train ckpt: 6/6 (100%)")
    assert jnp.array_equal(silent.state.params["w"], loud.state.params["w"])
    # a resumed run counts from its restored step
    buf2 = io.StringIO()
    with use_progress(PlainProgress(buf2, every=0)):
        res = _toy_fit(tmp_path / "b", 10)
    assert res.resumed_from == 6
    assert buf2.getvalue().splitlines()[-1].startswith("train ckpt: 10/10 (100%)")


def test_third_party_deprecations_are_shown_once():
    with warnings.catch_warnings(record=True) as got:
        warnings.resetwarnings()
        log.quiet_third_party_warnings()
        fake = {"__name__": "orbax.checkpoint.fake"}
        for _ in range(3):
            exec("import warnings; warnings.warn('old API', DeprecationWarning)", fake)
        own = {"__name__": "jaxkit.somewhere"}
        for _ in range(2):
            exec("import warnings; warnings.warn('ours', UserWarning)", own)
    msgs = [str(w.message) for w in got]
    assert msgs.count("old API") == 1
    assert msgs.count("ours") >= 1

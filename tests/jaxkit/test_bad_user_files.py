"""``jaxkit run <pipeline> --set <file setting>=<bad file>`` ends in one ``error:`` line
naming the file (or folder) and the problem, with exit code 2, before any compilation
(issue 58, section 3): for every pipeline that reads the user's data, and every kind of
bad file (missing, a folder for a file, empty, binary, Latin-1, wrong columns,
non-numeric, NaN / inf, one row, wrong shape; for folders: missing, a file, empty,
unreadable, NaN, wrong shape, too few rows).

The CLI runs in-process (typer's ``CliRunner``); a JAX compilation listener proves that
no program was compiled before the error."""

import json
import os

import jax
import numpy as np
import pytest
from typer.testing import CliRunner

from jaxkit.cli import app

os.environ.setdefault("JAXKIT_NO_COMPILE_CACHE", "1")  # the CLI's cache: never from tests
runner = CliRunner()
_COMPILES: list[str] = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: _COMPILES.append(event) if "backend_compile" in event else None)

GENERIC = ("missing", "directory", "empty", "binary", "latin1")
CSV_TABLE = {"wrong_columns": "a\n1\n2\n3\n4\n",
             "nonnumeric": "a,b,c\n1,2,3\n4,x,6\n7,8,9\n1,5,2\n",
             "naninf": "a,b,c\n1,2,3\n4,nan,6\n7,8,inf\n1,5,2\n",
             "one_row": "a,b,c\n1,2,3\n",
             "wrong_shape": "a,b,c\n1,2,3\n4,5\n7,8,9,10\n"}
SEQUENCES = {"wrong_columns": "seq\nAAA\nCCC\n", "one_row": "sequence\nAC\n",
             "wrong_shape": "sequence,x\nAC,1\nGG\n",
             "nonnumeric": "sequence\nAC\n\x01\x02\n"}
CELL = 'Lattice="5 0 0 0 5 0 0 0 5" Properties=species:S:1:pos:R:3'
XYZ = {"wrong_shape": "5\ncomment\nSi 0 0 0\n",
       "nonnumeric": f"1\n{CELL}\nSi a b c\n",
       "naninf": f"1\n{CELL}\nSi nan 0 inf\n",
       "one_row": f"1\n{CELL}\nSi 0 0 0\n",
       "wrong_columns": f"1\n{CELL}\nXx 0 0 0\n"}
TSP = {"wrong_columns": json.dumps({"problem": "tsp", "instances": [
           {"cities": [[0, 1], [1, 0], [1, 1]]}]}),
       "nonnumeric": json.dumps({"problem": "tsp", "instances": [
           {"coords": [["a", 1], [1, 0], [1, 1]]}]}),
       "naninf": '{"problem": "tsp", "instances": [{"coords": [[NaN, 1], [1, 0], [1, '
                 'Infinity]]}]}',
       "one_row": json.dumps({"problem": "tsp", "instances": [{"coords": [[0, 1]]}]}),
       "wrong_shape": json.dumps({"problem": "tsp", "instances": [
           {"coords": [[0, 1, 2], [1, 0, 3]]}]})}
LIK = {"a": [0.5, 0.5], "b": [0.5, 0.5]}
HYPOTHESES = {
    "wrong_columns": json.dumps({"foo": 1}),
    "nonnumeric": json.dumps({"hypotheses": ["a", "b"], "outcomes": ["x", "y"],
                              "experiments": [{"name": "e", "cost": "cheap",
                                               "likelihood": LIK}]}),
    "naninf": '{"hypotheses": ["a", "b"], "outcomes": ["x", "y"], "experiments": [{"name": '
              '"e", "cost": 1, "likelihood": {"a": [NaN, 0.5], "b": [0.5, 0.5]}}]}',
    "one_row": json.dumps({"hypotheses": ["a"], "outcomes": ["x"], "experiments": []}),
    "wrong_shape": json.dumps([1, 2, 3])}
JSONL = {"wrong_columns": '{"type": "target", "name": "x", "values": [[0, 0.5]]}\n',
         "nonnumeric": '{"type": "target", "id": "t", "prices": [[0, "x"], [1, 0.5]], '
                       '"outcome": 1}\n',
         "naninf": '{"type": "target", "id": "t", "prices": [[0, NaN], [1, Infinity]], '
                   '"outcome": 1}\n',
         "wrong_shape": '{"type": "target", "id": "t", "prices": [0.5, 0.6], "outcome": 1}\n'}
FOLDER_KINDS = ("missing", "file", "empty", "binary", "naninf", "wrong_shape", "one_row")

# (pipeline, setting, suffix, the format's own bad contents or "folder", other settings)
SETTINGS = [
    ("actflow", "user_data", ".csv", SEQUENCES, ["domains=user", "user_verifier=json:dumps"]),
    ("amgenc", "user_train", ".xyz", XYZ, []),
    ("amgenc", "user_test", ".xyz", XYZ, []),
    ("ballad", "instances", ".json", TSP, ["instances_problem=tsp"]),
    ("causal-audit", "data", ".csv", CSV_TABLE, []),
    ("aira-compose", "text", ".txt", {"one_row": "ab"}, []),  # any bytes are text here
    ("contrastive", "data", ".json", HYPOTHESES, []),
    ("cruxbench", "data", ".jsonl", JSONL, []),
    ("pooled-lingam", "data", ".csv", CSV_TABLE, ["env_column="]),
    ("universal-circuits", "activations", "", "folder", []),
    ("tempbench", "acts_dir", "", "folder", ["panel=real"]),  # wants .safetensors shards
]
CASES = [pytest.param(pipe, setting, suffix, kind, spec, extra,
                       id=f"{pipe}-{setting}-{kind}")
         for pipe, setting, suffix, spec, extra in SETTINGS
         for kind in (FOLDER_KINDS if spec == "folder" else
                      [k for k in GENERIC if not (pipe == "aira-compose"
                                                  and k in ("binary", "latin1"))]
                      + list(spec))]


def _bad_file(d, kind, suffix, spec):
    p = d / f"{kind}{suffix}"
    if kind == "directory":
        p.mkdir()
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "binary":
        p.write_bytes(bytes(range(256)) * 4)
    elif kind == "latin1":
        p.write_bytes("caf\xe9,na\xefve\n1,2\n3,4\n".encode("latin-1"))
    elif kind != "missing":
        p.write_text(spec[kind])
    return p


def _bad_folder(d, kind):
    """A folder of per-model subfolders of .npy site files, bad in one way."""
    p = d / f"{kind}_dir"
    if kind == "missing":
        return p
    if kind == "file":
        p.write_text("x")
        return p
    p.mkdir()
    if kind == "empty":
        return p
    for m in ("m1", "m2"):
        (p / m).mkdir()
        for s in ("s0", "s1"):
            if kind == "binary":
                (p / m / f"{s}.npy").write_bytes(bytes(range(256)))
                continue
            x = {"naninf": np.ones((300, 4), np.float32), "wrong_shape": np.ones(8, np.float32),
                 "one_row": np.ones((1, 4), np.float32)}[kind]
            if kind == "naninf":
                x[5, 0] = np.nan
            np.save(p / m / f"{s}.npy", x)
    return p


@pytest.mark.parametrize("pipe,setting,suffix,kind,spec,extra", CASES)
def test_bad_user_file_is_one_line_before_any_work(tmp_path, pipe, setting, suffix, kind,
                                                   spec, extra):
    path = _bad_folder(tmp_path, kind) if spec == "folder" else \
        _bad_file(tmp_path, kind, suffix, spec)
    args = ["run", pipe, "--quick", "--out", str(tmp_path / "out"),
            "--set", f"{setting}={path}", *[a for e in extra for a in ("--set", e)]]
    _COMPILES.clear()
    r = runner.invoke(app, args)
    compiled = list(_COMPILES)
    assert r.exit_code == 2, (r.output, r.exception)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), r.output
    assert "Traceback" not in r.output
    assert path.name in " ".join(r.output.split()), r.output  # names the file / folder
    assert not compiled, f"compiled {len(compiled)} program(s) before the error"


@pytest.mark.parametrize("spec,what", [("nosuchmod:f", "cannot be imported"),
                                       ("json:__doc__", "is not callable"),
                                       ("json.dumps", "must be 'module:function'")])
def test_bad_actflow_verifier_is_one_line_before_any_work(tmp_path, spec, what):
    data = tmp_path / "seqs.csv"
    data.write_text("sequence\nACGT\nAGGT\nCCGA\n")
    _COMPILES.clear()
    r = runner.invoke(app, ["run", "actflow", "--quick", "--out", str(tmp_path / "out"),
                            "--set", "domains=user", "--set", f"user_data={data}",
                            "--set", f"user_verifier={spec}"])
    assert r.exit_code == 2, (r.output, r.exception)
    out = " ".join(r.output.split())
    assert out.startswith("error:") and "`user_verifier`" in out and what in out, out
    assert not _COMPILES


def _nan_store(d):
    """A TempBench activation store (one safetensors shard, user labels) with a NaN."""
    from safetensors.numpy import save_file

    d.mkdir()
    rng = np.random.default_rng(0)
    a = rng.normal(size=(8, 6, 4)).astype(np.float32)
    a[3, 2, 1] = np.nan
    save_file({"activations": a, "tokens": rng.integers(0, 10, (8, 6)).astype(np.int32),
               "label.x": rng.integers(0, 2, (8, 6)).astype(np.int8)},
              str(d / "shard0.safetensors"))
    (d / "acts.json").write_text(json.dumps({"vocab_size": 10}))
    return d / "shard0.safetensors"


@pytest.mark.parametrize("setting", ["acts_dir", "lm_model"])
def test_bad_tempbench_store_or_model_is_one_line_before_any_work(tmp_path, setting):
    if setting == "acts_dir":
        named = _nan_store(tmp_path / "store")
        value = named.parent
    else:
        named = value = tmp_path / "model.gguf"
        named.write_bytes(b"not a model")
    _COMPILES.clear()
    r = runner.invoke(app, ["run", "tempbench", "--quick", "--out", str(tmp_path / "out"),
                            "--set", "panel=real", "--set", f"{setting}={value}"])
    assert r.exit_code == 2, (r.output, r.exception)
    out = " ".join(r.output.split())
    assert out.startswith("error:") and named.name in out and len(r.output.strip()
                                                                   .splitlines()) == 1, out
    assert not _COMPILES

"""Bad input at the command line ends in one ``error:`` line naming the problem, not a
traceback: corrupt or unusable activation shards, a safetensors file with several tensors
(``--tensor``), ``--distributed`` off a cluster, unparseable LLM prices."""

import os
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from jaxkit.cli import app

# the CLI turns on the persistent compilation cache: never from tests
os.environ.setdefault("JAXKIT_NO_COMPILE_CACHE", "1")
runner = CliRunner()


def _one_line_error(r) -> str:
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    out = " ".join(r.output.split())
    assert out.startswith("error:"), r.output
    return out


def _train(tmp_path, activations, *extra):
    return runner.invoke(app, [
        "crosscoder", "train", "--activations", str(activations), "--n-latents", "8",
        "--k", "2", "--steps", "2", "--batch-size", "8", "--log-every", "1",
        "--checkpoint-every", "2", "--out", str(tmp_path / "out"), *extra])


@pytest.fixture
def shards(tmp_path):
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype(np.float32)
    np.save(tmp_path / "ok.npy", x)
    raw = (tmp_path / "ok.npy").read_bytes()
    (tmp_path / "truncated.npy").write_bytes(raw[:-7])
    np.save(tmp_path / "objects.npy", np.array([[None, 1.0]], dtype=object),
            allow_pickle=True)
    save_file({"resid": x, "mlp": 2 * x}, str(tmp_path / "two.safetensors"))
    (tmp_path / "corrupt.safetensors").write_bytes(
        (tmp_path / "two.safetensors").read_bytes()[:-9])
    return tmp_path


@pytest.mark.parametrize("name,what", [
    ("corrupt.safetensors", "is not a readable .safetensors file"),
    ("truncated.npy", "is truncated"),
    ("objects.npy", "holds Python objects (dtype object)"),
    ("two.safetensors", "holds several tensors ('mlp', 'resid'); choose one with `tensor` "
                        "(`--tensor NAME` on the command line)"),
])
def test_crosscoder_train_bad_shards(shards, name, what):
    out = _one_line_error(_train(shards, shards / name))
    assert what in out and name in out
    assert not (shards / "out").exists()


def test_crosscoder_train_tensor_option(shards):
    out = _one_line_error(_train(shards, shards / "two.safetensors", "--tensor", "attn"))
    assert "`tensor` 'attn' not in shard" in out and "'mlp', 'resid'" in out
    r = _train(shards, shards / "two.safetensors", "--tensor", "mlp")
    assert r.exit_code == 0, r.output
    assert (shards / "out" / "params.safetensors").is_file()


def test_ballad_unparseable_price_names_the_entry(tmp_path):
    # ':abc:' is also an emoji code: the consoles must print it as written
    r = runner.invoke(app, ["ballad", "discover", "--models", "good:1:2,name:abc:1",
                            "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path)])
    out = _one_line_error(r)
    assert "'name:abc:1'" in out and "price_in 'abc' is not a number" in out


def test_distributed_auto_off_a_cluster_is_one_line():
    """A fresh process (JAX must not have started): JAXKIT_DISTRIBUTED=auto on a machine
    JAX finds no cluster on."""
    drop = ("JAX_COORDINATOR_ADDRESS", "JAXKIT_COORDINATOR", "SLURM_JOB_ID",
            "OMPI_MCA_orte_hnp_uri", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
            "TPU_WORKER_HOSTNAMES", "MEGASCALE_COORDINATOR_ADDRESS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(JAXKIT_DISTRIBUTED="auto", JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, "-m", "jaxkit.cli", "--distributed", "info"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --distributed:"), p.stderr
    assert "detected no cluster" in lines[0] and "JAXKIT_COORDINATOR" in lines[0]


def test_the_cli_imports_without_library_deprecation_warnings():
    """A guard: importing the CLI and listing the pipelines calls no deprecated API."""
    code = "import jaxkit.cli; from jaxkit import registry; registry.names()"
    p = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert p.returncode == 0, p.stderr
    assert "DeprecationWarning" not in p.stderr and "FutureWarning" not in p.stderr, p.stderr


def test_run_with_unusable_user_data_is_one_line(tmp_path):
    """``jaxkit run NAME --set FILE-FIELD=...``: a file the pipeline cannot use (a
    :class:`jaxkit.io.DataError`, AMGenC's ``UserDataError`` among them) is one line
    naming the pipeline and the file, not a traceback."""
    from jaxkit.amgenc.userdata import UserDataError
    from jaxkit.io import DataError

    assert issubclass(UserDataError, DataError)
    bad = tmp_path / "bad.xyz"
    bad.write_text("2\nnot a lattice\nSi 0 0 0\nO 1 1 1\n")
    r = runner.invoke(app, ["run", "amgenc", "--quick", "--out", str(tmp_path / "a"),
                            "--set", f"user_train={bad}", "--set", f"user_test={bad}"])
    out = _one_line_error(r)
    assert out.startswith("error: amgenc: ") and "bad.xyz:2: frame 0" in out
    assert len(r.output.strip().splitlines()) == 1
    r = runner.invoke(app, ["run", "aira-compose", "--quick", "--out", str(tmp_path / "c"),
                            "--set", f"text={tmp_path / 'missing.txt'}"])
    out = _one_line_error(r)
    assert out.startswith("error: aira-compose: ") and "missing.txt: cannot read it" in out


def test_binary_or_latin1_input_is_one_line(tmp_path):
    """Issue 58: Latin-1 or binary files gave a raw UnicodeDecodeError."""
    from jaxkit.cruxbench.data import read_jsonl as load
    from jaxkit.io import DataError

    bad = tmp_path / "markets.jsonl"
    bad.write_bytes('{"type": "market", "id": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8 text") as e:
        load(bad)
    assert "\n" not in str(e.value)
    r = runner.invoke(app, ["cruxbench", "score", str(bad)])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "not UTF-8" in r.output or "not UTF-8" in str(r.exception)


def test_lingam_fit_on_data_too_large_to_fit_is_one_line(tmp_path):
    """Issue 58: data scaled by 1e300 gave every weight NaN and exit 0."""
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-1, 1, 300)
    x = np.c_[x0, 0.8 * x0 + rng.uniform(-1, 1, 300)] * 1e300
    csv = tmp_path / "huge.csv"
    csv.write_text("a,b\n" + "\n".join(f"{u:.6e},{v:.6e}" for u, v in x) + "\n")
    r = runner.invoke(app, ["lingam", "fit", str(csv)])
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and ("not finite" in out or "must be finite" in out), r.output

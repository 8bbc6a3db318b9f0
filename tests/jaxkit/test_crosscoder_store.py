"""jaxkit.crosscoder.store: formats, window boundaries, shuffling, resume, processes, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxkit.crosscoder.store import ActivationStore, StorePosition, write_shards


def tagged(lengths, d=3, start=0):
    """Shards whose entries encode (shard, token): x[t, j] = 1000 * shard + t + j / 10."""
    return [(1000.0 * (start + s) + np.arange(n)[:, None] + np.arange(d)[None] / 10
             ).astype(np.float32) for s, n in enumerate(lengths)]


def make(path, **kw):
    kw.setdefault("process_index", 0)
    kw.setdefault("process_count", 1)
    return ActivationStore(path, **kw)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    arrs = tagged([23, 10, 17])
    write_shards(root / "npy", arrs)
    write_shards(root / "st", arrs, fmt="safetensors")
    return root, arrs


def all_windows(arrs, w, stride):
    """Every window of every shard in store order (reference enumeration)."""
    return np.stack([a[s:s + w] for a in arrs for s in range(0, len(a) - w + 1, stride)])


@pytest.mark.parametrize("fmt", ["npy", "st"])
@pytest.mark.parametrize("w,stride", [(4, None), (3, 2), (None, None)])
def test_round_trip_reads_every_window(stores, fmt, w, stride):
    root, arrs = stores
    s = make(root / fmt, batch_size=4, window=w, stride=stride)
    ref = all_windows(arrs, w or 1, stride or (w or 1))
    if w is None:
        ref = ref[:, 0]
    assert s.n_windows == len(ref) and s.d == 3
    np.testing.assert_array_equal(s.read(np.arange(s.n_windows)), ref)


def test_npy_and_safetensors_give_identical_batches(stores):
    root, _ = stores
    a, b = make(root / "npy", batch_size=5, window=4), make(root / "st", batch_size=5, window=4)
    for pos in [(0, 0), (0, 2), (3, 1)]:
        np.testing.assert_array_equal(a.batch(pos)[0], b.batch(pos)[0])


def test_npy_shards_are_memory_mapped_not_loaded(stores):
    root, _ = stores
    s = make(root / "npy", batch_size=4, window=4)
    s.batch((0, 0))
    assert s._mmaps and all(isinstance(m, np.memmap) for m in s._mmaps.values())


def test_single_file_store(stores, tmp_path):
    _, arrs = stores
    np.save(tmp_path / "one.npy", arrs[0])
    s = make(tmp_path / "one.npy", batch_size=2, window=5)
    assert s.n_windows == 4
    np.testing.assert_array_equal(s.read(np.arange(4)), all_windows(arrs[:1], 5, 5))


def test_windows_never_cross_shard_boundaries(stores):
    root, _ = stores
    s = make(root / "npy", batch_size=8, window=4, stride=1)
    for pos in [(0, c) for c in range(s.batches_per_epoch)]:
        x = s.batch(pos)[0][..., 0]  # (B, W): 1000 * shard + token
        shard = np.floor(x / 1000)
        assert (shard == shard[:, :1]).all()  # one shard per window
        np.testing.assert_array_equal(np.diff(x, axis=1), 1.0)  # consecutive tokens


def test_documents_in_3d_shards_are_boundaries(tmp_path):
    docs = np.stack([np.full((7, 2), i, np.float32) + np.arange(7)[:, None] / 100
                     for i in range(5)])  # (n_docs=5, T=7, d=2)
    write_shards(tmp_path, [docs], fmt="safetensors")
    s = make(tmp_path, batch_size=3, window=3, stride=2)
    assert s.n_windows == 5 * 3  # starts 0, 2, 4 per document
    x = s.read(np.arange(s.n_windows))[..., 0]
    assert (np.floor(x) == np.floor(x[:, :1])).all()
    np.testing.assert_allclose(x[:3, 0], [0.0, 0.02, 0.04])


def test_shuffle_deterministic_by_seed_and_different_across_seeds(stores):
    root, _ = stores
    a = make(root / "npy", batch_size=4, window=2, seed=1)
    b = make(root / "npy", batch_size=4, window=2, seed=1)
    c = make(root / "npy", batch_size=4, window=2, seed=2)
    np.testing.assert_array_equal(a.permutation(0), b.permutation(0))
    assert not np.array_equal(a.permutation(0), c.permutation(0))
    assert not np.array_equal(a.permutation(0), a.permutation(1))  # new order each epoch
    np.testing.assert_array_equal(np.sort(a.permutation(3)), np.arange(a.n_windows))


def test_resume_position_continues_the_same_stream(stores):
    root, _ = stores
    s = make(root / "npy", batch_size=5, window=3, seed=4)
    it = s.iterate()
    straight = [next(it) for _ in range(12)]  # crosses epochs (bpe = 3)
    assert s.batches_per_epoch == 3 and straight[-1][1] == StorePosition(4, 0)
    pos = straight[6][1]
    fresh = make(root / "npy", batch_size=5, window=3, seed=4)  # a new process
    it2 = fresh.iterate(pos)
    for x, p in straight[7:]:
        y, q = next(it2)
        np.testing.assert_array_equal(x, y)
        assert p == q


def test_processes_read_disjoint_parts_of_the_global_batch(stores):
    root, _ = stores
    full = make(root / "npy", batch_size=8, window=2, seed=3)
    parts = [make(root / "npy", batch_size=8, window=2, seed=3, process_index=i,
                  process_count=4) for i in range(4)]
    for pos in [(0, 0), (1, 2)]:
        ids = [p.batch_ids(pos, p.local_rows()) for p in parts]
        assert len(np.unique(np.concatenate(ids))) == 8
        np.testing.assert_array_equal(np.concatenate([p.batch(pos)[0] for p in parts]),
                                      full.batch(pos)[0])


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(1, 30), min_size=1, max_size=4),
       w=st.integers(1, 6), stride=st.integers(1, 4))
def test_window_count_and_contents_property(tmp_path_factory, lengths, w, stride):
    lengths = [max(n, w) for n in lengths]
    d = tmp_path_factory.mktemp("prop")
    arrs = tagged(lengths)
    write_shards(d, arrs)
    s = make(d, batch_size=1, window=w, stride=stride)
    ref = all_windows(arrs, w, stride)
    assert s.n_windows == len(ref) == sum((n - w) // stride + 1 for n in lengths)
    np.testing.assert_array_equal(s.read(np.arange(s.n_windows)), ref)


# --------------------------------------------------------------------------- errors


def test_empty_or_missing_store(tmp_path):
    with pytest.raises(ValueError, match="`path`.*no .npy or .safetensors"):
        make(tmp_path, batch_size=1)
    with pytest.raises(ValueError, match="`path`.*does not exist"):
        make(tmp_path / "nope.npy", batch_size=1)
    np.save(tmp_path / "empty.npy", np.zeros((0, 3), np.float32))
    with pytest.raises(ValueError, match="`path`.*holds no activations"):
        make(tmp_path, batch_size=1)


def test_inconsistent_d_names_the_shards(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((5, 3), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((5, 4), np.float32))
    with pytest.raises(ValueError, match=r"`path` shards disagree.*a.npy has d=3.*b.npy has d=4"):
        make(tmp_path, batch_size=1)


def test_window_longer_than_a_shard(tmp_path):
    write_shards(tmp_path, tagged([10, 4]))
    with pytest.raises(ValueError, match=r"`window` 5 is longer than the shard length 4.*00001"):
        make(tmp_path, batch_size=1, window=5)


def test_nan_in_a_batch_names_the_shard(tmp_path):
    arrs = tagged([8, 8])
    arrs[1][5, 2] = np.nan
    write_shards(tmp_path, arrs)
    s = make(tmp_path, batch_size=4, window=2)  # opening is lazy: no full scan
    s.read(np.arange(4))  # shard 0 is clean
    with pytest.raises(ValueError, match=r"NaN or inf.*shard_00001.npy.*tokens 4..5"):
        s.read(np.arange(s.n_windows))


def test_bad_arguments(stores, tmp_path):
    root, _ = stores
    with pytest.raises(ValueError, match="`batch_size` 1000 exceeds"):
        make(root / "npy", batch_size=1000)
    with pytest.raises(ValueError, match="`batch_size` 6 must be a multiple of the process"):
        make(root / "npy", batch_size=6, process_count=4, process_index=1)
    with pytest.raises(ValueError, match="`window`"):
        make(root / "npy", batch_size=2, window=0)
    with pytest.raises(ValueError, match="`process_index`"):
        make(root / "npy", batch_size=2, process_index=2, process_count=2)
    from safetensors.numpy import save_file

    save_file({"a": np.zeros((4, 2), np.float32), "b": np.zeros((4, 2), np.float32)},
              str(tmp_path / "two.safetensors"))
    with pytest.raises(ValueError, match="several tensors.*`tensor`"):
        make(tmp_path / "two.safetensors", batch_size=1)
    assert make(tmp_path / "two.safetensors", batch_size=1, tensor="b").d == 2
    np.save(tmp_path / "bad.npy", np.zeros((2, 3, 4, 5), np.float32))
    with pytest.raises(ValueError, match="expected \\(n_tokens, d\\)"):
        make(tmp_path / "bad.npy", batch_size=1)


def _broken_files(d):
    """Files that used to give a raw library error (or none naming the file)."""
    from safetensors.numpy import save_file

    np.save(d / "ok.npy", np.ones((10, 4), np.float32))
    raw = (d / "ok.npy").read_bytes()
    (d / "truncated.npy").write_bytes(raw[:-20])
    (d / "header.npy").write_bytes(raw[:30])
    (d / "empty.npy").write_bytes(b"")
    (d / "text.npy").write_bytes(b"not an npy file at all")
    np.save(d / "objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    np.save(d / "strings.npy", np.array([["a", "b"], ["c", "d"]]))
    save_file({"x": np.ones((10, 4), np.float32)}, str(d / "ok.safetensors"))
    raw = (d / "ok.safetensors").read_bytes()
    (d / "truncated.safetensors").write_bytes(raw[:-20])
    (d / "junk.safetensors").write_bytes(b"\xff" * 64)


@pytest.mark.parametrize("name,what", [
    ("truncated.npy", r"is truncated: its header promises shape \(10, 4\) float32"),
    ("header.npy", "not a readable .npy file"),
    ("empty.npy", "not a readable .npy file"),
    ("text.npy", "not a readable .npy file"),
    ("objects.npy", r"holds Python objects \(dtype object\)"),
    ("strings.npy", "activations must be real numbers"),
    ("truncated.safetensors", "not a readable .safetensors file"),
    ("junk.safetensors", "not a readable .safetensors file"),
])
def test_corrupt_or_unusable_shards_are_value_errors_naming_the_file(tmp_path, name, what):
    _broken_files(tmp_path)
    with pytest.raises(ValueError, match=what) as e:
        make(tmp_path / name, batch_size=1)
    assert repr(str(tmp_path / name)) in str(e.value)
    with pytest.raises(ValueError, match=what):  # in a directory of shards too
        d = tmp_path / "dir"
        d.mkdir(exist_ok=True)
        (d / "a.npy").write_bytes((tmp_path / "ok.npy").read_bytes())
        (d / name).write_bytes((tmp_path / name).read_bytes())
        make(d, batch_size=1)


def test_tensor_choice_lists_the_names(tmp_path):
    from safetensors.numpy import save_file

    save_file({"resid": np.zeros((4, 2), np.float32), "mlp": np.zeros((4, 3), np.float32)},
              str(tmp_path / "two.safetensors"))
    with pytest.raises(ValueError, match=r"several tensors \('mlp', 'resid'\).*--tensor"):
        make(tmp_path / "two.safetensors", batch_size=1)
    with pytest.raises(ValueError, match=r"`tensor` 'attn' not in shard.*'mlp', 'resid'"):
        make(tmp_path / "two.safetensors", batch_size=1, tensor="attn")
    assert make(tmp_path / "two.safetensors", batch_size=1, tensor="mlp").d == 3

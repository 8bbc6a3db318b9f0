"""AIRA-Compose on the user's own text: ``--set text=FILE`` (jaxkit.compose.pipeline)."""

import pytest


def test_compose_reads_the_users_text(tmp_path):
    from jaxkit.compose.config import QUICK
    from jaxkit.compose.pipeline import corpus_of

    p = tmp_path / "mine.txt"
    p.write_bytes(bytes(range(256)) * 8)
    c = corpus_of(QUICK.override([f"text={p}", "val_fraction=0.25"]))
    assert len(c.train) == 1536 and len(c.val) == 512 and c.plays == ("mine.txt",)
    short = tmp_path / "short.txt"
    short.write_bytes(b"x" * 500)
    with pytest.raises(ValueError, match=r"short.txt: 500 bytes; a language model needs"):
        corpus_of(QUICK.override([f"text={short}"]))
    with pytest.raises(ValueError, match="val_fraction"):
        QUICK.override(["val_fraction=1.5"])

"""jaxkit.lm.replies: the shared reply cache reads shipped replies, writes only its own
file, replays call for call by occurrence, and generates misses in one batch."""

import json

import pytest

from jaxkit.lm.replies import Backend, ReplyCache, reply_key

MSG = [{"role": "user", "content": "hi"}]
ST = dict(temperature=0.0, top_p=0.95, max_tokens=4)


def _rec(key, k, reply):
    return dict(key=key, k=k, model="m", settings=ST, reply=reply, prompt_tokens=1,
                completion_tokens=1, finish="stop")


class _Fake(Backend):
    def _generate(self, requests, rows, st):
        self.batches = [*getattr(self, "batches", []), len(rows)]
        return [_rec(key, k, f"new {k}") for _, key, k in rows]


def test_shipped_replies_are_read_never_written_and_occurrences_replay(tmp_path):
    key = reply_key("m", MSG, ST)
    assert key == reply_key("m", MSG, dict(reversed(ST.items())))  # order-free
    assert key != reply_key("m2", MSG, ST)
    shipped = tmp_path / "shipped.jsonl"
    shipped.write_text(json.dumps(_rec(key, 0, "shipped 0")) + "\n{torn")
    before = shipped.read_bytes()
    mine = tmp_path / "out" / "replies.jsonl"
    b = _Fake(ReplyCache(mine, shipped=shipped), model="m")
    out = b.complete([(MSG, ST), (MSG, ST), (MSG, ST)])
    assert [r["reply"] for r in out] == ["shipped 0", "new 1", "new 2"]
    assert b.batches == [2] and (b.hits, b.misses) == (1, 2)
    assert shipped.read_bytes() == before
    assert len(mine.read_text().splitlines()) == 2
    again = Backend(ReplyCache(mine, shipped=shipped), model="m", offline=True)
    assert [r["reply"] for r in again.complete([(MSG, ST)] * 3)] == [
        "shipped 0", "new 1", "new 2"]
    miss = again.complete([(MSG, ST)])[0]
    assert isinstance(miss, str) and "not in the cache" in miss


def test_a_folder_is_not_a_cache(tmp_path):
    with pytest.raises(ValueError, match="folder"):
        ReplyCache(tmp_path)
    with pytest.raises(ValueError, match="folder"):
        ReplyCache(tmp_path / "x.jsonl", shipped=tmp_path)

"""PipelineConfig: typed field=value overrides, TOML merging, validation, digests."""

import dataclasses
import json
from dataclasses import dataclass
from typing import Literal

import pytest

import jaxkit
from jaxkit.config import PipelineConfig, read_toml, require, to_toml


@dataclass(frozen=True)
class Toy(PipelineConfig):
    rounds: int = 3
    lr: float = 1e-3
    prune: bool = True
    method: str = "ica"
    ds: tuple[int, ...] = (4, 8)
    lrs: tuple[float, ...] = (0.5,)
    tags: tuple[str, ...] = ()
    max_d: int | None = None
    mode: Literal["fast", "exact"] = "fast"

    def validate(self):
        require(self.rounds >= 1, "rounds", f"must be >= 1; got {self.rounds}")
        require(self.lr > 0, "lr", f"must be > 0; got {self.lr}")


def test_override_parses_every_supported_type():
    c = Toy().override(["rounds=5", "lr=2e-2", "prune=no", "method=direct", "ds=1, 2,3",
                        "lrs=0.1,1", "tags=a,b", "max_d=7", "mode=exact"])
    assert c == Toy(rounds=5, lr=0.02, prune=False, method="direct", ds=(1, 2, 3),
                    lrs=(0.1, 1.0), tags=("a", "b"), max_d=7, mode="exact")
    assert isinstance(c.lrs[1], float) and isinstance(c.ds[0], int)
    assert c.override(["max_d=none"]).max_d is None
    assert c.override(["ds="]).ds == ()
    for text, value in [("true", True), ("1", True), ("YES", True), ("false", False),
                        ("0", False), ("no", False)]:
        assert Toy().override([f"prune={text}"]).prune is value
    assert Toy().override(["method=a=b"]).method == "a=b"  # only the first = splits


@pytest.mark.parametrize(("assignment", "match"), [
    ("rond=1", r"unknown field `rond` for Toy; did you mean rounds\?"),
    ("zzz=1", r"unknown field `zzz`.*fields: rounds, lr"),
    ("rounds=x", r"`rounds` expects int; got 'x'"),
    ("rounds=1.5", r"`rounds` expects int"),
    ("lr=fast", r"`lr` expects float"),
    ("prune=maybe", r"`prune` expects bool \(true/false/yes/no/1/0\)"),
    ("ds=1,x", r"`ds` expects tuple\[int, \.\.\.\] \(comma-separated\)"),
    ("max_d=1.5", r"`max_d` expects int \| none"),
    ("mode=slow", r"`mode` expects one of 'fast', 'exact'"),
    ("rounds=0", r"`rounds` must be >= 1; got 0"),
    ("lr=-1", r"`lr` must be > 0"),
    ("rounds", r"expected field=value"),
])
def test_override_errors_name_the_field(assignment, match):
    with pytest.raises(ValueError, match=match):
        Toy().override([assignment])


def test_construction_checks_types_and_validates():
    assert Toy(lr=1).lr == 1.0 and isinstance(Toy(lr=1).lr, float)
    assert Toy(ds=[1, 2]).ds == (1, 2)  # lists become tuples: hashable, stable digest
    with pytest.raises(ValueError, match="`rounds` of Toy must be int; got 2.5"):
        Toy(rounds=2.5)
    with pytest.raises(ValueError, match="`rounds` must be >= 1; got 0"):
        Toy(rounds=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Toy().rounds = 2


def test_merged_is_typed_for_toml_values():
    c = Toy().merged({"rounds": 2, "lr": 1, "ds": [1, 2], "max_d": "none", "prune": False})
    assert c == Toy(rounds=2, lr=1.0, ds=(1, 2), max_d=None, prune=False)
    with pytest.raises(ValueError, match=r"`rounds` expects int; got 2.0"):
        Toy().merged({"rounds": 2.0})
    with pytest.raises(ValueError, match=r"`prune` expects bool; got 1"):
        Toy().merged({"prune": 1})
    with pytest.raises(ValueError, match=r"`ds` expects tuple\[int, \.\.\.\]; got '1,2'"):
        Toy().merged({"ds": "1,2"})
    with pytest.raises(ValueError, match=r"unknown field `round`.*did you mean rounds"):
        Toy().merged({"round": 2})


def test_toml_round_trip(tmp_path):
    c = Toy(rounds=4, lrs=(0.25, 2.0), tags=("x",), max_d=None, mode="exact", prune=False)
    path = tmp_path / "c.toml"
    path.write_text(c.to_toml() + "\n")
    assert read_toml(path)["rounds"] == 4
    assert Toy.from_toml(path) == c
    assert Toy.from_toml(path, base=Toy(method="direct")).method == "ica"  # file wins
    path.write_text("rounds = 0\n")
    with pytest.raises(ValueError, match=r"c.toml: `rounds` must be >= 1"):
        Toy.from_toml(path)
    path.write_text("rounds = \n")
    with pytest.raises(ValueError, match="not valid TOML"):
        read_toml(path)
    with pytest.raises(ValueError, match="no such file"):
        read_toml(tmp_path / "missing.toml")
    text = to_toml({"toy": c, "other": Toy()})
    assert "[toy]\nrounds = 4" in text and "[other]\nrounds = " in text


def test_to_dict_is_json_and_digest_tracks_config_and_version(monkeypatch):
    c = Toy(ds=(1, 2), max_d=None)
    d = c.to_dict()
    assert d["ds"] == [1, 2] and d["max_d"] is None
    assert json.loads(json.dumps(d)) == d
    assert c.digest() == Toy(ds=[1, 2]).digest()
    assert c.digest() != c.override(["rounds=4"]).digest()
    assert len(c.digest()) == 64
    old = c.digest()
    monkeypatch.setattr(jaxkit, "__version__", jaxkit.__version__ + ".post1")
    assert c.digest() != old


def test_path_fields():
    from pathlib import Path

    @dataclass(frozen=True)
    class WithPath(PipelineConfig):
        data: Path = Path("a.csv")

    c = WithPath().override(["data=b/c.csv"])
    assert c.data == Path("b/c.csv") and c.to_dict() == {"data": "b/c.csv"}
    assert WithPath().merged({"data": "d.csv"}).data == Path("d.csv")
    assert WithPath(data="e.csv").data == Path("e.csv")
    assert 'data = "b/c.csv"' in c.to_toml()


@dataclass(frozen=True)
class Inner(PipelineConfig):
    hidden: int = 8
    rate: float = 0.5
    steps: int | None = None

    def validate(self):
        require(0 <= self.rate <= 1, "rate", f"must lie in [0, 1]; got {self.rate}")


@dataclass(frozen=True)
class Outer(PipelineConfig):
    rounds: int = 3
    dfm: Inner = Inner()
    peptide: Inner = Inner(hidden=16)


def test_section_set_by_dotted_path_keeps_the_other_fields():
    c = Outer().override(["dfm.hidden=32", "peptide.steps=4", "rounds=2", "dfm.rate=0.25"])
    assert c == Outer(rounds=2, dfm=Inner(hidden=32, rate=0.25), peptide=Inner(hidden=16, steps=4))
    assert c.override(["peptide.rate=1"]).peptide == Inner(hidden=16, rate=1.0, steps=4)
    assert Outer(dfm={"hidden": 2}).dfm == Inner(hidden=2)  # a mapping builds the section
    assert hash(c) == hash(Outer().override(["dfm.hidden=32", "peptide.steps=4", "rounds=2",
                                             "dfm.rate=0.25"]))


@pytest.mark.parametrize(("assignment", "match"), [
    ("dfm.hiden=1", r"unknown field `dfm.hiden` for Inner; did you mean dfm.hidden\?"),
    ("dfm_hidden=1", r"unknown field `dfm_hidden` for Outer; did you mean dfm.hidden"),
    ("dfm.hidden=x", r"`dfm.hidden` expects int; got 'x'"),
    ("peptide.rate=2", r"`peptide.rate` must lie in \[0, 1\]; got 2.0"),
    ("rounds.x=1", r"unknown field `rounds.x` for Outer"),
    ("dfm=3", r"`dfm` expects the section Inner \(set its fields as NAME.field=value\)"),
])
def test_section_errors_name_the_dotted_path(assignment, match):
    with pytest.raises(ValueError, match=match):
        Outer().override([assignment])


def test_section_toml_round_trip_and_digest(tmp_path):
    c = Outer(rounds=5, dfm=Inner(hidden=3, steps=None), peptide=Inner(steps=7))
    path = tmp_path / "c.toml"
    path.write_text(c.to_toml() + "\n")
    assert read_toml(path)["dfm"] == {"hidden": 3, "rate": 0.5, "steps": "none"}
    assert Outer.from_toml(path) == c
    path.write_text("[dfm]\nrate = 0.75\n")  # a partial table changes those fields only
    assert Outer.from_toml(path, base=c) == Outer(rounds=5, dfm=Inner(hidden=3, rate=0.75),
                                                  peptide=Inner(steps=7))
    path.write_text("[peptide]\nrate = 3\n")
    with pytest.raises(ValueError, match=r"c.toml: `peptide.rate` must lie in \[0, 1\]"):
        Outer.from_toml(path)
    text = to_toml({"outer": c})
    assert "[outer]\nrounds = 5" in text and "[outer.dfm]\nhidden = 3" in text
    (tmp_path / "all.toml").write_text(text)
    assert Outer().merged(read_toml(tmp_path / "all.toml")["outer"]) == c
    assert c.to_dict()["dfm"] == {"hidden": 3, "rate": 0.5, "steps": None}
    assert c.digest() != c.override(["peptide.hidden=17"]).digest()

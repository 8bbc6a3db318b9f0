"""jaxkit.plotting: clipped intervals, named reference lines, legends outside the data,
and the figure checker each pipeline's figure tests use."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxkit.plotting import (
    bars,
    clip_interval,
    figure_problems,
    interval,
    label_axes,
    legend_outside,
    reference_line,
)
from jaxkit.report import new_figure, save_figure


def test_clip_interval_keeps_auc_inside_unit_range():
    err = clip_interval([0.9, 0.5, np.nan], half=[0.3, 0.1, 0.2], bounds=(0, 1))
    assert err.shape == (2, 3)
    np.testing.assert_allclose(err[:, 0], [0.3, 0.1])  # 0.6 .. 1.0, not 1.2
    np.testing.assert_allclose(err[:, 1], [0.1, 0.1])
    assert np.all(err[:, 2] == 0)  # NaN: no bar
    np.testing.assert_allclose(clip_interval(0.2, -0.5, 0.4, bounds=(0, None)),
                               [[0.2], [0.2]])
    with pytest.raises(ValueError, match="`lo` and `hi`"):
        clip_interval([1.0])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=5), st.floats(0, 2))
def test_clipped_bar_ends_stay_in_bounds(means, half):
    m = np.asarray(means)
    err = clip_interval(m, half=half, bounds=(0, 1))
    assert np.all(err >= 0)
    assert np.all(m - err[0] >= -1e-12) and np.all(m + err[1] <= 1 + 1e-12)


def test_a_styled_figure_has_no_problems_and_saves(tmp_path):
    fig, ax = new_figure(ncols=2)
    interval(ax[0, 0], [1, 2, 3], [0.7, 0.9, 0.95], half=[0.1, 0.2, 0.3], bounds=(0, 1),
             label="method A")
    reference_line(ax[0, 0], 0.5, "chance")
    label_axes(ax[0, 0], "samples", "AUC", bounds=(0, 1))
    assert ax[0, 0].get_ylim()[1] < 1.05
    bars(ax[0, 1], ["TSP", "CVRP"], {"a": ([1.0, 2.0], [0.5, 1.5], [1.5, 2.5]),
                                     "b": ([1.5, np.nan],)}, bounds=(0, None))
    label_axes(ax[0, 1], "problem", "gap (%)")
    lg = legend_outside(fig)
    assert [t.get_text() for t in lg.get_texts()] == ["chance", "method A", "a", "b"]
    assert figure_problems(fig) == []
    # the error bar of the 0.95 point ends at 1, not 1.25
    seg = ax[0, 0].containers[0].lines[2][0].get_segments()
    assert max(s[:, 1].max() for s in seg) <= 1.0 + 1e-9
    p = save_figure(fig, tmp_path / "f.png")
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_figure_problems_names_what_is_missing():
    fig, ax = new_figure()
    a = ax[0, 0]
    a.plot([0, 1], [0, 1], label="x")
    a.axhline(0.5, ls=":")  # unnamed reference line
    a.legend(loc="upper left")  # over the data
    probs = figure_problems(fig)
    assert any("no x label" in p for p in probs)
    assert any("no y label" in p for p in probs)
    assert any("reference line at 0.5" in p for p in probs)
    assert any("legend lies inside" in p for p in probs)
    with pytest.raises(ValueError, match="`label` is required"):
        reference_line(a, 1.0, "")
    with pytest.raises(ValueError, match="`xlabel` and `ylabel`"):
        label_axes(a, "x", "")
    with pytest.raises(ValueError, match="`where`"):
        legend_outside(a, where="inside")
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_save_figure_warns_about_an_unfinished_figure(tmp_path):
    from jaxkit.report import FigureWarning

    fig, ax = new_figure()
    im = ax[0, 0].imshow(np.eye(3))
    fig.colorbar(im, ax=ax[0, 0], label="value")  # images and colour bars need no labels
    with warnings.catch_warnings():
        warnings.simplefilter("error", FigureWarning)
        save_figure(fig, tmp_path / "ok.png")
    fig, ax = new_figure()
    ax[0, 0].plot([0, 1], [1, 2])
    with pytest.warns(FigureWarning, match=r"figure bad.png: axes 0: no x label"):
        save_figure(fig, tmp_path / "bad.png")
    assert (tmp_path / "bad.png").is_file()  # still written

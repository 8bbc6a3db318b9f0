"""The one plotting style of jaxkit's reports: labelled axes, legends outside the data,
intervals clipped to the metric's range, reference lines named in the legend.

Every pipeline's ``report.py`` draws through these helpers (on figures from
:func:`jaxkit.report.new_figure`, saved by :func:`jaxkit.report.save_figure`)::

    from jaxkit.plotting import (bars, interval, label_axes, legend_outside,
                                 reference_line)
    from jaxkit.report import new_figure, save_figure

    fig, ax = new_figure(ncols=2)
    a = ax[0, 0]
    # a metric in [0, 1] (AUC, F1, a share): mean and a 95% interval per x
    interval(a, xs, mean, lo, hi, bounds=(0, 1), label="pooled LiNGAM")
    reference_line(a, 0.5, "chance (AUC 0.5)")          # in the legend, not bare
    label_axes(a, "samples per environment", "AUC", bounds=(0, 1))
    # grouped bars with clipped error bars, one series per method
    bars(ax[0, 1], ["TSP", "CVRP"], {"ballad": (m1, lo1, hi1), "uniform": (m2, lo2, hi2)},
         bounds=(0, None))
    label_axes(ax[0, 1], "problem", "gap to best (%)")
    legend_outside(fig)                                  # one legend, right of the axes
    save_figure(fig, out / "sweep.png")                  # keeps the outside legend

Rules the helpers enforce: an interval never extends past ``bounds`` (two seeds give
wide t intervals; an AUC interval drawn to 1.2 is a plotting error, not a result);
a reference line always has a label; :func:`figure_problems` lists what a figure
still lacks (unlabelled axes, unnamed lines, a legend drawn over the data) and is
what the tests of each pipeline's figures call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["STYLE", "apply_style", "clip_interval", "interval", "bars", "reference_line",
           "label_axes", "legend_outside", "figure_problems", "PALETTE"]

# rcParams every jaxkit figure uses (applied by jaxkit.report.new_figure)
STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "errorbar.capsize": 2,
    "lines.markersize": 4,
    "figure.dpi": 100,
}

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442",
           "#000000")  # Okabe-Ito: distinguishable in colour-blind vision and greyscale


def apply_style() -> None:
    """Set :data:`STYLE` (and the colour cycle :data:`PALETTE`) in matplotlib's rcParams
    and select the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    from cycler import cycler

    matplotlib.rcParams.update(STYLE)
    matplotlib.rcParams["axes.prop_cycle"] = cycler(color=list(PALETTE))


def _bounds(bounds) -> tuple[float, float]:
    if bounds is None:
        return -np.inf, np.inf
    lo, hi = bounds
    return (-np.inf if lo is None else float(lo)), (np.inf if hi is None else float(hi))


def clip_interval(mean, lo=None, hi=None, *, half=None, bounds=None):
    """The interval ``[lo, hi]`` (or ``mean -+ half``) clipped to ``bounds``, as the
    asymmetric error-bar lengths ``(mean - lo', hi' - mean)`` matplotlib's ``yerr`` /
    ``xerr`` take.

    Args:
        mean: the point estimates, shape ``(n,)`` (or a scalar).
        lo, hi: the interval ends; or give ``half`` (the half-width) instead.
        half: the half-width (``mean -+ half``); NaN draws no bar.
        bounds: ``(low, high)`` of the metric (``None`` on a side: unbounded), e.g.
            ``(0, 1)`` for AUC, F1 or a share.

    Returns:
        ``np.ndarray`` of shape ``(2, n)``: lengths below and above the mean, never
        negative, NaN turned into 0 (no bar).
    """
    m = np.atleast_1d(np.asarray(mean, float))
    if half is not None:
        h = np.broadcast_to(np.asarray(half, float), m.shape)
        lo, hi = m - h, m + h
    elif lo is None or hi is None:
        raise ValueError("`lo` and `hi` (or `half`) are required")
    b0, b1 = _bounds(bounds)
    lo = np.clip(np.broadcast_to(np.asarray(lo, float), m.shape), b0, b1)
    hi = np.clip(np.broadcast_to(np.asarray(hi, float), m.shape), b0, b1)
    err = np.stack([m - lo, hi - m])
    return np.nan_to_num(np.maximum(err, 0.0), nan=0.0)


def interval(ax, x, mean, lo=None, hi=None, *, half=None, bounds=None, label=None,
             band: bool = False, horizontal: bool = False, **kw):
    """Points (or a line) with their interval, clipped to ``bounds``.

    Args:
        ax: the matplotlib axes.
        x: positions, shape ``(n,)``.
        mean, lo, hi, half, bounds: as in :func:`clip_interval`.
        label: the legend entry.
        band: draw a line with a shaded band (a curve) instead of error bars.
        horizontal: the interval runs along x (a forest plot: ``x`` are the rows).
        **kw: passed to ``ax.errorbar`` (or ``ax.plot``).

    Returns:
        The artist drawn (an ``ErrorbarContainer`` or a ``Line2D``).
    """
    x = np.atleast_1d(np.asarray(x, float))
    m = np.atleast_1d(np.asarray(mean, float))
    err = clip_interval(m, lo, hi, half=half, bounds=bounds)
    if band:
        (line,) = ax.plot(x, m, label=label, **kw)
        ax.fill_between(x, m - err[0], m + err[1], alpha=0.15, color=line.get_color(),
                        linewidth=0)
        return line
    kw.setdefault("marker", "o")
    kw.setdefault("capsize", 2)
    if horizontal:
        kw.setdefault("linestyle", "none")
        return ax.errorbar(m, x, xerr=err, label=label, **kw)
    return ax.errorbar(x, m, yerr=err, label=label, **kw)


def bars(ax, groups: Sequence[str], series: Mapping[str, tuple], *, bounds=None,
         width: float = 0.8, colors: Sequence[str] | None = None):
    """Grouped bars, one bar per series in each group, with clipped error bars.

    Args:
        ax: the matplotlib axes.
        groups: the group names on the x axis.
        series: ``{label: (mean, lo, hi)}`` (or ``(mean,)`` for no interval), each of
            length ``len(groups)``; NaN means: no bar.
        bounds: the metric's range (see :func:`clip_interval`).
        width: total width of one group's bars.
        colors: one colour per series (default :data:`PALETTE`).

    Returns:
        The x positions of the groups.
    """
    xs = np.arange(len(groups), dtype=float)
    k = max(len(series), 1)
    w = width / k
    colors = list(colors or PALETTE)
    for i, (name, vals) in enumerate(series.items()):
        mean = np.asarray(vals[0], float)
        pos = xs + (i - (k - 1) / 2) * w
        err = clip_interval(mean, vals[1], vals[2], bounds=bounds) if len(vals) >= 3 else None
        ax.bar(pos, np.nan_to_num(mean), w, yerr=err, label=name,
               color=colors[i % len(colors)], capsize=2, error_kw={"linewidth": 0.8})
    ax.set_xticks(xs)
    ax.set_xticklabels(groups, rotation=30 if max(map(len, groups), default=0) > 6 else 0,
                       ha="right" if max(map(len, groups), default=0) > 6 else "center")
    return xs


def reference_line(ax, value: float, label: str, *, axis: str = "y", **kw):
    """A horizontal (``axis="y"``) or vertical (``axis="x"``) reference line that is
    named in the legend (``label`` is required: "chance", "paper: 0.89", "y = x").

    Returns:
        The ``Line2D``.
    """
    if not label:
        raise ValueError("`label` is required: every reference line is named in the legend")
    kw.setdefault("color", "0.4")
    kw.setdefault("linestyle", ":")
    kw.setdefault("linewidth", 1.0)
    if axis == "y":
        return ax.axhline(value, label=label, **kw)
    if axis == "x":
        return ax.axvline(value, label=label, **kw)
    raise ValueError(f"`axis` must be 'x' or 'y'; got {axis!r}")


def label_axes(ax, xlabel: str, ylabel: str, *, title: str | None = None, bounds=None,
               pad: float = 0.03) -> None:
    """Label both axes (both are required) and, with ``bounds``, limit the y axis to the
    metric's range plus a small margin (``pad`` of the range) so clipped intervals end
    inside the frame.

    Args:
        ax: the matplotlib axes.
        xlabel, ylabel: the axis labels, with units.
        title: the panel title.
        bounds: ``(low, high)`` of the metric; a ``None`` side keeps matplotlib's limit.
        pad: the margin, as a fraction of the range.
    """
    if not xlabel or not ylabel:
        raise ValueError("`xlabel` and `ylabel` are required")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if bounds is not None:
        cur = ax.get_ylim()
        lo = cur[0] if bounds[0] is None else float(bounds[0])
        hi = cur[1] if bounds[1] is None else float(bounds[1])
        m = pad * (hi - lo)
        ax.set_ylim(lo - m if bounds[0] is not None else lo,
                    hi + m if bounds[1] is not None else hi)


def legend_outside(target, *, where: str = "right", ncol: int = 1, **kw):
    """One legend outside the data: of one axes (``target`` an Axes) or of a whole
    figure (``target`` a Figure: the entries of all its axes, each label once).

    Args:
        target: a matplotlib ``Axes`` or ``Figure``.
        where: ``"right"`` (beside the axes) or ``"below"`` (under them).
        ncol: legend columns.
        **kw: passed to ``legend``.

    Returns:
        The ``Legend``, or None when nothing is labelled.
    """
    if where not in ("right", "below"):
        raise ValueError(f"`where` must be 'right' or 'below'; got {where!r}")
    is_fig = hasattr(target, "axes") and not hasattr(target, "plot")
    axes = target.axes if is_fig else [target]
    handles, labels = [], []
    for a in axes:
        for h, lab in zip(*a.get_legend_handles_labels(), strict=True):
            if lab not in labels and not lab.startswith("_"):
                handles.append(h)
                labels.append(lab)
    if not handles:
        return None
    if where == "right":
        kw.setdefault("loc", "center left")
        kw.setdefault("bbox_to_anchor", (1.0, 0.5))
    else:
        kw.setdefault("loc", "upper center")
        kw.setdefault("bbox_to_anchor", (0.5, -0.02) if is_fig else (0.5, -0.18))
        ncol = max(ncol, min(len(labels), 4))
    for a in axes:
        old = a.get_legend()
        if old is not None:
            old.remove()
    return target.legend(handles, labels, ncol=ncol, **kw)


def _is_reference(line) -> bool:
    x, y = line.get_xdata(), line.get_ydata()
    try:
        return (len(x) == 2 and len(y) == 2
                and (np.ptp(np.asarray(y, float)) == 0 or np.ptp(np.asarray(x, float)) == 0)
                and line.get_transform() != line.axes.transData)
    except (TypeError, ValueError):
        return False


def figure_problems(fig) -> list[str]:
    """What a figure still lacks, as sentences (empty: none): an axes with data but no x
    or y label, a reference line (``axhline`` / ``axvline``) without a legend label or
    absent from every legend, a legend inside an axes' data area.

    Image panels (``imshow``) and colour bars need no axis labels.
    :func:`jaxkit.report.save_figure` warns with these (``FigureWarning``)."""
    problems = []
    legends = [a.get_legend() for a in fig.axes if a.get_legend() is not None]
    legends += list(fig.legends)
    named = {t.get_text() for lg in legends for t in lg.get_texts()}
    for i, a in enumerate(fig.axes):
        has_data = bool(a.lines or a.collections or a.patches or a.containers)
        if not has_data or a.images or a.get_label() == "<colorbar>":
            continue
        tag = f"axes {i}" + (f" ({a.get_title()!r})" if a.get_title() else "")
        if not a.get_xlabel():
            problems.append(f"{tag}: no x label")
        if not a.get_ylabel():
            problems.append(f"{tag}: no y label")
        for ln in a.lines:
            if _is_reference(ln):
                lab = ln.get_label()
                if not lab or lab.startswith("_") or lab not in named:
                    problems.append(f"{tag}: a reference line at "
                                    f"{ln.get_ydata()[0]:.3g} is not in a legend")
        lg = a.get_legend()
        if lg is not None and lg.get_bbox_to_anchor() is not None:
            if _legend_inside(fig, a, lg):
                problems.append(f"{tag}: the legend lies inside the axes (use "
                                f"legend_outside)")
    return problems


def _legend_inside(fig, ax, lg) -> bool:
    """The legend's box overlaps the axes' box by more than a tenth of the legend."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    lb, ab = lg.get_window_extent(r), ax.get_window_extent(r)
    w = max(0.0, min(lb.x1, ab.x1) - max(lb.x0, ab.x0))
    h = max(0.0, min(lb.y1, ab.y1) - max(lb.y0, ab.y0))
    area = max(lb.width * lb.height, 1e-9)
    return w * h / area > 0.1

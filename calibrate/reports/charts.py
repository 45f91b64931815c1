"""Charts of a calibration report as inline SVG: pure functions, text in, SVG text out.

No JavaScript, no external fonts or images: each chart is one `<svg>` element that a browser,
a printer and a PDF converter draw the same way. Every piece of text that reaches the SVG
(labels, task names, axis titles) goes through `html.escape`, since labels and task names
come from users' data.

- `confusion_heatmap`: human gold (rows) × judge (columns), cells shaded by count.
- `score_scatter`: human gold against judge for ordinal and continuous tasks, with a
  deterministic jitter and the diagonal where they agree.
- `agreement_chart`: one row per task, the alignment statistic with its confidence interval,
  the threshold as a vertical line and the human–human ceiling as a marker.
- `difference_chart`: an A/B difference with its confidence interval against zero.
- `windows_chart`: production windows (`calibrate monitor`): the live estimate with its CI band, the judge-only
  number, the minimum, and the windows without an estimate marked.
"""

from __future__ import annotations

import html
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from calibrate import i18n
from calibrate.i18n import N_
from calibrate.reports.summary import interval, number, threshold_text

FONT = "-apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
INK = "#1f2328"
MUTED = "#59636e"
GRID = "#d1d9e0"
# The three-state decision (pass, fail, undecided) and the older passed / not passed wording.
OUTCOME_COLOURS = {"pass": "#1a7f37", "fail": "#cf222e", "undecided": "#9a6700", "passed": "#1a7f37", "not passed": "#cf222e",
                   "undefined": "#6e7781", "not judged": "#6e7781"}
# The outcomes as people read them (tooltips translate the stored word).
OUTCOME_NAMES = (N_("pass"), N_("fail"), N_("undecided"), N_("passed"), N_("not passed"), N_("undefined"), N_("not judged"))
CEILING_COLOUR = "#8250df"
THRESHOLD_COLOUR = "#bc4c00"
POINT_COLOUR = "#0969da"
CHAR_WIDTH = 6.6  # average width of a 12px sans-serif character, for layout only


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _f(x: float) -> str:
    """Return a coordinate with at most one decimal."""
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(chars - 1, 1)] + "…"


def _svg(width: float, height: float, body: list[str], *, label: str, kind: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart chart-{kind}" viewBox="0 0 {_f(width)} {_f(height)}" '
        f'width="{_f(width)}" height="{_f(height)}" role="img" aria-label="{_e(label)}" '
        f'font-family="{_e(FONT)}" font-size="12" fill="{INK}">'
        f"<title>{_e(label)}</title>{''.join(body)}</svg>"
    )


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: float | None = None, fill: str | None = None,
          weight: str | None = None, extra: str = "", title: str | None = None) -> str:
    attrs = f'x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}"'
    if size:
        attrs += f' font-size="{_f(size)}"'
    if fill:
        attrs += f' fill="{fill}"'
    if weight:
        attrs += f' font-weight="{weight}"'
    tip = f"<title>{_e(title)}</title>" if title else ""
    return f"<text {attrs}{extra}>{tip}{_e(text)}</text>"


# --------------------------------------------------------------------------- confusion matrix


def _shade(t: float) -> str:
    """Return a blue from near-white (t=0) to dark (t=1)."""
    low, high = (246, 248, 250), (9, 64, 140)
    r, g, b = (round(a + (c - a) * t) for a, c in zip(low, high, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def confusion_heatmap(labels: Sequence[str], matrix: Sequence[Sequence[int]], *, title: str = "Confusion matrix",
                      row_axis: str = "human gold", column_axis: str = "judge") -> str:
    """Return a confusion-matrix heat map: rows are `row_axis` labels, columns `column_axis` labels.

    Cells are shaded by count (darkest = the largest cell) and carry their count; the
    diagonal (agreement) is outlined.
    """
    k = len(labels)
    counts = [[int(v) for v in row] for row in matrix]
    biggest = max((v for row in counts for v in row), default=0)
    shown = [_clip(str(lab), 18) for lab in labels]
    label_px = max((len(s) for s in shown), default=1) * CHAR_WIDTH
    cell = min(120, max(72, label_px + 16)) if k <= 3 else max(36, 288 // max(k, 1))
    rotate = label_px > cell - 8
    left = 28 + label_px + 8
    top = 24 + (label_px * 0.75 + 12 if rotate else 22)
    overhang = max(0.0, 0.77 * label_px - cell / 2) if rotate else 0.0  # a slanted last label reaches right
    width = left + k * cell + 16 + overhang
    height = top + k * cell + 16
    body = [
        _text(left + k * cell / 2, 16, column_axis, anchor="middle", weight="600"),
        f'<text x="14" y="{_f(top + k * cell / 2)}" text-anchor="middle" font-weight="600" '
        f'transform="rotate(-90 14 {_f(top + k * cell / 2)})">{_e(row_axis)}</text>',
    ]
    for j, lab in enumerate(shown):
        cx = left + j * cell + cell / 2
        if rotate:
            body.append(_text(cx, top - 8, lab, anchor="start", extra=f' transform="rotate(-40 {_f(cx)} {_f(top - 8)})"',
                              title=str(labels[j])))
        else:
            body.append(_text(cx, top - 8, lab, anchor="middle", title=str(labels[j])))
    for i, lab in enumerate(shown):
        cy = top + i * cell + cell / 2
        body.append(_text(left - 8, cy + 4, lab, anchor="end", title=str(labels[i])))
        for j in range(k):
            value = counts[i][j] if i < len(counts) and j < len(counts[i]) else 0
            t = value / biggest if biggest else 0.0
            x, y = left + j * cell, top + i * cell
            stroke = f' stroke="{INK}" stroke-width="1.5"' if i == j else f' stroke="{GRID}" stroke-width="1"'
            tip = f"{row_axis}: {labels[i]} · {column_axis}: {labels[j]} · {value}"
            body.append(f'<rect class="cell" x="{_f(x)}" y="{_f(y)}" width="{_f(cell)}" height="{_f(cell)}" '
                        f'fill="{_shade(t)}"{stroke}><title>{_e(tip)}</title></rect>')
            body.append(_text(x + cell / 2, y + cell / 2 + 5, str(value), anchor="middle", size=14 if cell >= 56 else 11,
                              fill="#ffffff" if t > 0.55 else INK, weight="600", extra=' class="count"'))
    return _svg(width, height, body, label=f"{title}: {row_axis} in rows, {column_axis} in columns", kind="confusion")


# --------------------------------------------------------------------------- scatter


def _ticks(lo: float, hi: float, *, integers: bool) -> list[float]:
    if integers and hi - lo <= 10:
        return [float(v) for v in range(math.ceil(lo), math.floor(hi) + 1)]
    raw = (hi - lo) / 5
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=mag)
    start = math.ceil(lo / step) * step
    out, v = [], start
    while v <= hi + 1e-9:
        out.append(round(v, 10))
        v += step
    return out


def _jitter(key: str, salt: str) -> float:
    """Return a deterministic offset in [-1, 1] from a point's key."""
    return (zlib.crc32(f"{salt}:{key}".encode()) % 20001) / 10000 - 1


def _tick_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def score_scatter(points: Sequence[tuple[float, float, str]], *, scale: Sequence[float] | None = None,
                  x_axis: str = "human gold", y_axis: str = "judge", title: str = "Human gold against judge",
                  x_name: str = "gold", y_name: str = "judge") -> str:
    """Return a scatter of (gold, judge, key) points with the diagonal judge = gold.

    `x_name` and `y_name` name the two values in each point's tooltip (the A/B report plots
    system A against system B with the same chart).

    Points are jittered by an offset derived from their key (the same report draws the same
    picture), by up to 3.5% of the axis range, so that ties on an integer scale stay visible.
    """
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    values = xs + ys + (list(scale) if scale else [])
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi <= lo:
        lo, hi = lo - 1, hi + 1
    integers = all(float(v).is_integer() for v in ([lo, hi]))
    pad = 0.5 if integers and hi - lo <= 10 else 0.05 * (hi - lo)
    d_lo, d_hi = lo - pad, hi + pad
    size, left, bottom, top, right = 300.0, 56.0, 46.0, 14.0, 16.0
    width, height = left + size + right, top + size + bottom

    def sx(v: float) -> float:
        return left + (v - d_lo) / (d_hi - d_lo) * size

    def sy(v: float) -> float:
        return top + size - (v - d_lo) / (d_hi - d_lo) * size

    body = [f'<rect x="{_f(left)}" y="{_f(top)}" width="{_f(size)}" height="{_f(size)}" fill="#ffffff" stroke="{GRID}"/>']
    for v in _ticks(lo, hi, integers=integers):
        body.append(f'<line x1="{_f(sx(v))}" y1="{_f(top)}" x2="{_f(sx(v))}" y2="{_f(top + size)}" stroke="{GRID}" stroke-width="0.6"/>')
        body.append(f'<line x1="{_f(left)}" y1="{_f(sy(v))}" x2="{_f(left + size)}" y2="{_f(sy(v))}" stroke="{GRID}" stroke-width="0.6"/>')
        body.append(_text(sx(v), top + size + 16, _tick_text(v), anchor="middle", fill=MUTED))
        body.append(_text(left - 8, sy(v) + 4, _tick_text(v), anchor="end", fill=MUTED))
    body.append(f'<line class="diagonal" x1="{_f(sx(d_lo))}" y1="{_f(sy(d_lo))}" x2="{_f(sx(d_hi))}" y2="{_f(sy(d_hi))}" '
                f'stroke="{MUTED}" stroke-width="1.2" stroke-dasharray="5 4"><title>{_e(f"{y_axis} = {x_axis}")}</title></line>')
    amplitude = 0.035 * (hi - lo)
    for x, y, key in points:
        jx, jy = x + amplitude * _jitter(key, "x"), y + amplitude * _jitter(key, "y")
        body.append(f'<circle class="point" cx="{_f(sx(jx))}" cy="{_f(sy(jy))}" r="3.6" fill="{POINT_COLOUR}" '
                    f'fill-opacity="0.45" stroke="{POINT_COLOUR}" stroke-width="0.8">'
                    f"<title>{_e(f'{key}: {x_name} {x:g}, {y_name} {y:g}')}</title></circle>")
    if not points:
        body.append(_text(left + size / 2, top + size / 2, "no scored targets", anchor="middle", fill=MUTED))
    body.append(_text(left + size / 2, height - 8, x_axis, anchor="middle", weight="600"))
    body.append(f'<text x="14" y="{_f(top + size / 2)}" text-anchor="middle" font-weight="600" '
                f'transform="rotate(-90 14 {_f(top + size / 2)})">{_e(y_axis)}</text>')
    return _svg(width, height, body, label=f"{title} ({len(points)} points)", kind="scatter")


# --------------------------------------------------------------------------- agreement against the threshold


@dataclass(frozen=True)
class AgreementRow:
    """One task in the agreement chart."""

    label: str
    value: float | None
    ci: tuple[float, float] | None
    outcome: str
    ceiling: float | None = None


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def agreement_chart(rows: Sequence[AgreementRow], *, threshold: float, ceiling_label: str = "human–human agreement",
                    ci_label: str = "95% CI") -> str:
    """Return one row per task: the estimate (dot, coloured by outcome), its CI, the threshold and the human ceiling."""
    numbers = [threshold, 0.0, 1.0]
    for row in rows:
        numbers += [v for v in (row.value, row.ceiling, *(row.ci or ())) if _finite(v)]
    lo = max(-1.0, math.floor(min(numbers) * 10 + 1e-9) / 10)
    hi = min(1.0, math.ceil(max(numbers) * 10 - 1e-9) / 10) if max(numbers) <= 1 else math.ceil(max(numbers))
    label_chars = min(max((len(r.label) for r in rows), default=10), 34)
    left = 16 + label_chars * CHAR_WIDTH + 12
    plot = 420.0
    value_col = 150.0
    row_h, top, bottom = 34.0, 34.0, 64.0
    width = left + plot + value_col
    height = top + row_h * max(len(rows), 1) + bottom

    def sx(v: float) -> float:
        return left + (min(max(v, lo), hi) - lo) / (hi - lo) * plot

    body = []
    step = 0.1 if hi - lo <= 1.2 else 0.2 if hi - lo <= 2.01 else 0.5
    lo = max(-1.0, math.floor(lo / step + 1e-9) * step)  # start the axis on a tick
    tick = lo
    base = top + row_h * max(len(rows), 1)
    while tick <= hi + 1e-9:
        body.append(f'<line x1="{_f(sx(tick))}" y1="{_f(top - 6)}" x2="{_f(sx(tick))}" y2="{_f(base)}" stroke="{GRID}" stroke-width="0.6"/>')
        body.append(_text(sx(tick), base + 16, number(tick, 1), anchor="middle", fill=MUTED))
        tick = round(tick + step, 10)
    for i, row in enumerate(rows):
        cy = top + row_h * i + row_h / 2
        if i % 2 == 0:
            body.append(f'<rect x="0" y="{_f(top + row_h * i)}" width="{_f(width)}" height="{_f(row_h)}" fill="#f6f8fa"/>')
        body.append(_text(left - 12, cy + 4, _clip(row.label, 34), anchor="end", title=row.label))
        colour = OUTCOME_COLOURS.get(row.outcome, MUTED)
        if row.ci and all(_finite(v) for v in row.ci):
            a, b = sx(row.ci[0]), sx(row.ci[1])
            body.append(f'<g class="ci" stroke="{colour}" stroke-width="2.2">'
                        f'<line x1="{_f(a)}" y1="{_f(cy)}" x2="{_f(b)}" y2="{_f(cy)}"/>'
                        f'<line x1="{_f(a)}" y1="{_f(cy - 6)}" x2="{_f(a)}" y2="{_f(cy + 6)}"/>'
                        f'<line x1="{_f(b)}" y1="{_f(cy - 6)}" x2="{_f(b)}" y2="{_f(cy + 6)}"/></g>')
        if _finite(row.ceiling):
            c = sx(row.ceiling)
            body.append(f'<path class="ceiling" d="M{_f(c)} {_f(cy - 7)} L{_f(c + 7)} {_f(cy)} L{_f(c)} {_f(cy + 7)} '
                        f'L{_f(c - 7)} {_f(cy)} Z" fill="#ffffff" stroke="{CEILING_COLOUR}" stroke-width="2">'
                        f"<title>{_e(f'{ceiling_label}: {number(row.ceiling)}')}</title></path>")
        if _finite(row.value):
            body.append(f'<circle class="estimate" cx="{_f(sx(row.value))}" cy="{_f(cy)}" r="6" fill="{colour}" stroke="#ffffff" '
                        f'stroke-width="1.5"><title>{_e(f"{row.label}: {number(row.value)} ({i18n.gettext(row.outcome)})")}</title></circle>')
            ci_text = " " + interval(row.ci, 2) if row.ci and all(_finite(v) for v in row.ci) else ""
            body.append(_text(left + plot + 14, cy + 4, f"{number(row.value)}{ci_text}", fill=colour, weight="600"))
        else:
            body.append(_text(sx(lo) + 8, cy + 4, "undefined", fill=MUTED, extra=' font-style="italic"'))
            body.append(_text(left + plot + 14, cy + 4, "undefined", fill=MUTED, weight="600"))
    tx = sx(threshold)
    body.append(f'<line class="threshold" x1="{_f(tx)}" y1="{_f(top - 10)}" x2="{_f(tx)}" y2="{_f(base)}" '
                f'stroke="{THRESHOLD_COLOUR}" stroke-width="1.6" stroke-dasharray="6 4"/>')
    body.append(_text(tx, top - 16, i18n.gettext("threshold %(t)s", t=threshold_text(threshold)), anchor="middle", fill=THRESHOLD_COLOUR,
                      weight="600"))
    ly = base + 42
    lx = left
    body.append(f'<circle cx="{_f(lx)}" cy="{_f(ly - 4)}" r="5" fill="{OUTCOME_COLOURS["passed"]}"/>')
    body.append(f'<circle cx="{_f(lx + 12)}" cy="{_f(ly - 4)}" r="5" fill="{OUTCOME_COLOURS["not passed"]}"/>')
    body.append(_text(lx + 22, ly, i18n.gettext("judge vs gold (passed / not passed), bar: %(ci)s", ci=ci_label), fill=MUTED))
    cx = lx + 22 + 50 * CHAR_WIDTH
    body.append(f'<path d="M{_f(cx)} {_f(ly - 10)} L{_f(cx + 6)} {_f(ly - 4)} L{_f(cx)} {_f(ly + 2)} L{_f(cx - 6)} {_f(ly - 4)} Z" '
                f'fill="#ffffff" stroke="{CEILING_COLOUR}" stroke-width="2"/>')
    body.append(_text(cx + 12, ly, ceiling_label, fill=MUTED))
    return _svg(width, height, body, label=i18n.gettext("Agreement with %(ci)s against the threshold %(t)s", ci=ci_label, t=threshold_text(threshold)),
                kind="agreement")


# --------------------------------------------------------------------------- a difference against zero


def difference_chart(value: float | None, ci: Sequence[float] | None, *, label: str, ci_label: str = "95% CI") -> str:
    """Return one estimate of a difference (dot) with its interval (bar) on an axis through zero (dashed)."""
    numbers = [0.0] + [v for v in (value, *(ci or ())) if _finite(v)]
    span = max(abs(v) for v in numbers) or 1.0
    lo, hi = -span * 1.15, span * 1.15
    left, plot, right = 24.0, 520.0, 24.0
    top, row_h, bottom = 30.0, 40.0, 54.0
    width, height = left + plot + right, top + row_h + bottom

    def sx(v: float) -> float:
        return left + (v - lo) / (hi - lo) * plot

    base = top + row_h
    body = [f'<rect x="0" y="{_f(top)}" width="{_f(width)}" height="{_f(row_h)}" fill="#f6f8fa"/>']
    for tick in _ticks(lo, hi, integers=False):
        body.append(f'<line x1="{_f(sx(tick))}" y1="{_f(top)}" x2="{_f(sx(tick))}" y2="{_f(base)}" stroke="{GRID}" stroke-width="0.6"/>')
        body.append(_text(sx(tick), base + 16, _tick_text(tick), anchor="middle", fill=MUTED))
    zero = sx(0.0)
    body.append(f'<line class="zero" x1="{_f(zero)}" y1="{_f(top - 8)}" x2="{_f(zero)}" y2="{_f(base)}" stroke="{THRESHOLD_COLOUR}" '
                f'stroke-width="1.6" stroke-dasharray="6 4"/>')
    body.append(_text(zero, top - 12, "no difference", anchor="middle", fill=THRESHOLD_COLOUR, weight="600"))
    cy = top + row_h / 2
    if ci and all(_finite(v) for v in ci):
        a, b = sx(ci[0]), sx(ci[1])
        body.append(f'<g class="ci" stroke="{POINT_COLOUR}" stroke-width="2.2"><line x1="{_f(a)}" y1="{_f(cy)}" x2="{_f(b)}" y2="{_f(cy)}"/>'
                    f'<line x1="{_f(a)}" y1="{_f(cy - 6)}" x2="{_f(a)}" y2="{_f(cy + 6)}"/>'
                    f'<line x1="{_f(b)}" y1="{_f(cy - 6)}" x2="{_f(b)}" y2="{_f(cy + 6)}"/></g>')
    if _finite(value):
        body.append(f'<circle class="estimate" cx="{_f(sx(value))}" cy="{_f(cy)}" r="6" fill="{POINT_COLOUR}" stroke="#ffffff" '
                    f'stroke-width="1.5"><title>{_e(f"{label}: {value:.3f}")}</title></circle>')
    else:
        body.append(_text(zero + 8, cy + 4, "undefined", fill=MUTED, extra=' font-style="italic"'))
    body.append(_text(left, height - 8, f"{label}; bar: {ci_label}", fill=MUTED))
    return _svg(width, height, body, label=f"{label} with its {ci_label}", kind="difference")


def _series_axes(n: int, *, left: float, top: float, plot_w: float, plot_h: float, lo: float,
                 hi: float) -> tuple[Callable[[int], float], Callable[[float], float]]:
    """Return the x of the i-th of n points spread over the plot (one point: its middle) and the y of a value (clipped)."""

    def sx(i: int) -> float:
        return left + (plot_w / 2 if n == 1 else i * plot_w / (n - 1))

    def sy(v: float) -> float:
        return top + (hi - min(max(v, lo), hi)) / (hi - lo) * plot_h

    return sx, sy


# --------------------------------------------------------------------------- alignment across versions


@dataclass(frozen=True)
class VersionPoint:
    """One judge (a prompt version or an imported judge) in the versions chart."""

    label: str
    value: float | None
    ci: tuple[float, float] | None
    outcome: str
    # Points of one series are joined by the trend line (and CI band); None: the prompt of a
    # "PROMPT@N" label, and an imported judge (any other label) stands alone.
    series: str | None = None

    def series_key(self) -> str | None:
        """Return the series the point belongs to, or None when it is joined to no other point."""
        if self.series is not None:
            return self.series
        name, at, version = self.label.rpartition("@")
        return name if at and name and version.isdigit() else None


def version_series(points: Sequence[VersionPoint]) -> list[list[int]]:
    """Return the positions of the points of each series with two or more points, in order of first appearance."""
    runs: dict[str, list[int]] = {}
    for i, p in enumerate(points):
        key = p.series_key()
        if key is not None:
            runs.setdefault(key, []).append(i)
    return [run for run in runs.values() if len(run) > 1]


def versions_chart(points: Sequence[VersionPoint], *, threshold: float, ceiling: float | None = None,
                   metric: str = "alignment", ci_label: str = "95% CI") -> str:
    """Return the alignment of each version in order: a line (and CI band) through the versions of each prompt,
    the threshold as a dashed line and the human–human ceiling as a dotted line."""
    numbers = [threshold, 0.0, 1.0]
    for p in points:
        numbers += [v for v in (p.value, *(p.ci or ())) if _finite(v)]
    if _finite(ceiling):
        numbers.append(ceiling)
    lo = max(-1.0, math.floor(min(numbers) * 5 + 1e-9) / 5)
    hi = min(1.0, math.ceil(max(numbers) * 5 - 1e-9) / 5)
    left, top, plot_h, bottom, right = 96.0, 30.0, 240.0, 70.0, 150.0  # left: room for the first slanted label
    step_x = 64.0 if len(points) <= 12 else 36.0
    plot_w = max(step_x * max(len(points) - 1, 1), 240.0)
    width, height = left + plot_w + right, top + plot_h + bottom
    sx, sy = _series_axes(len(points), left=left, top=top, plot_w=plot_w, plot_h=plot_h, lo=lo, hi=hi)

    body = []
    tick = lo
    while tick <= hi + 1e-9:
        body.append(f'<line x1="{_f(left)}" y1="{_f(sy(tick))}" x2="{_f(left + plot_w)}" y2="{_f(sy(tick))}" stroke="{GRID}" stroke-width="0.6"/>')
        body.append(_text(left - 8, sy(tick) + 4, number(tick, 1), anchor="end", fill=MUTED))
        tick = round(tick + 0.2, 10)
    # One line (and band) per prompt through its versions: unrelated judges are never joined.
    for run in version_series(points):
        with_ci = [(i, points[i]) for i in run if points[i].ci and all(_finite(v) for v in points[i].ci)]
        if len(with_ci) > 1:
            upper = " ".join(f"{_f(sx(i))},{_f(sy(p.ci[1]))}" for i, p in with_ci)
            lower = " ".join(f"{_f(sx(i))},{_f(sy(p.ci[0]))}" for i, p in reversed(with_ci))
            body.append(f'<polygon class="ci-band" points="{upper} {lower}" fill="{POINT_COLOUR}" fill-opacity="0.15" '
                        f'stroke="none"><title>{_e(ci_label)}</title></polygon>')
        defined = [(i, points[i]) for i in run if _finite(points[i].value)]
        if len(defined) > 1:
            path = " ".join(f"{_f(sx(i))},{_f(sy(p.value))}" for i, p in defined)
            body.append(f'<polyline class="trend" points="{path}" fill="none" stroke="{POINT_COLOUR}" stroke-width="1.6"/>')
    ty = sy(threshold)
    body.append(f'<line class="threshold" x1="{_f(left)}" y1="{_f(ty)}" x2="{_f(left + plot_w)}" y2="{_f(ty)}" '
                f'stroke="{THRESHOLD_COLOUR}" stroke-width="1.6" stroke-dasharray="6 4"/>')
    body.append(_text(left + plot_w + 8, ty + 4, i18n.gettext("threshold %(t)s", t=threshold_text(threshold)), fill=THRESHOLD_COLOUR, weight="600"))
    if _finite(ceiling):
        cy = sy(ceiling)
        body.append(f'<line class="ceiling" x1="{_f(left)}" y1="{_f(cy)}" x2="{_f(left + plot_w)}" y2="{_f(cy)}" '
                    f'stroke="{CEILING_COLOUR}" stroke-width="1.6" stroke-dasharray="2 3"/>')
        body.append(_text(left + plot_w + 8, cy + 4 + (14 if abs(cy - ty) < 14 else 0), i18n.gettext("human–human %(value)s", value=number(ceiling, 2)),
                          fill=CEILING_COLOUR, weight="600"))
    for i, p in enumerate(points):
        x = sx(i)
        body.append(_text(x, top + plot_h + 18, _clip(p.label, 14), anchor="end", fill=MUTED, title=p.label,
                          extra=f' transform="rotate(-30 {_f(x)} {_f(top + plot_h + 18)})"'))
        if _finite(p.value):
            colour = OUTCOME_COLOURS.get(p.outcome, MUTED)
            ci_text = " " + interval(p.ci) if p.ci and all(_finite(v) for v in p.ci) else ""
            body.append(f'<circle class="estimate" cx="{_f(x)}" cy="{_f(sy(p.value))}" r="5" fill="{colour}" stroke="#ffffff" '
                        f'stroke-width="1.5"><title>{_e(f"{p.label}: {number(p.value)}{ci_text} ({i18n.gettext(p.outcome)})")}</title></circle>')
    body.append(f'<text x="14" y="{_f(top + plot_h / 2)}" text-anchor="middle" font-weight="600" '
                f'transform="rotate(-90 14 {_f(top + plot_h / 2)})">{_e(metric)}</text>')
    label = i18n.gettext("%(metric)s across %(n)s versions with %(ci)s, threshold %(t)s", metric=metric, n=len(points), ci=ci_label,
                         t=threshold_text(threshold))
    return _svg(width, height, body, label=label, kind="versions")


# --------------------------------------------------------------------------- production windows


@dataclass(frozen=True)
class WindowPoint:
    """One production window in the windows chart: its live estimate and interval, the judge-only number, its status."""

    label: str
    value: float | None
    ci: tuple[float, float] | None
    judge_only: float | None
    status: str  # ok | alert | undecided | too_few | no data
    word: str = ""  # the status as the reader says it


STATUS_COLOURS = {"ok": "#1a7f37", "alert": "#cf222e", "undecided": "#9a6700", "too_few": "#6e7781", "no data": "#6e7781"}
JUDGE_COLOUR = "#8c959f"


def windows_chart(points: Sequence[WindowPoint], *, minimum: float | None = None, share: bool = True, metric: str = "estimate",
                  ci_label: str = "95% CI", too_few_label: str = "too few", judge_label: str = "judge only",
                  minimum_label: str = "minimum") -> str:
    """Return the windows of `calibrate monitor` oldest first: the estimate (points, coloured by status) with its CI band,
    the judge-only number as a dashed grey line, the minimum as a line, and windows without an estimate marked.

    A share's axis runs from 0 to 1; a mean's from its data. Readable at 390 px: the SVG scales (viewBox), and only every
    k-th window is labelled when there are many."""
    lo, hi = _window_range(points, minimum, share)
    frame = _WindowFrame(points, left=64.0, top=16.0, plot_w=320.0, plot_h=180.0, lo=lo, hi=hi)
    left, top, plot_w, plot_h, sy = frame.left, frame.top, frame.plot_w, frame.plot_h, frame.sy
    width, height = left + plot_w + 96.0, top + plot_h + 50.0  # about 480 wide in all: on a 390 px phone the text stays near 10 px

    body = []
    for tick in _ticks(lo, hi, integers=False):
        body.append(f'<line x1="{_f(left)}" y1="{_f(sy(tick))}" x2="{_f(left + plot_w)}" y2="{_f(sy(tick))}" stroke="{GRID}" stroke-width="0.6"/>')
        body.append(_text(left - 6, sy(tick) + 4, number(tick, 2 if share else 1), anchor="end", fill=MUTED))
    body += frame.no_estimate(too_few_label)
    body += frame.bands(ci_label)
    judged = [(i, p) for i, p in enumerate(points) if _finite(p.judge_only)]
    body += frame.judge_line(judged, judge_label)
    if _finite(minimum):
        my = sy(float(minimum))
        body.append(f'<line class="minimum" x1="{_f(left)}" y1="{_f(my)}" x2="{_f(left + plot_w)}" y2="{_f(my)}" '
                    f'stroke="{THRESHOLD_COLOUR}" stroke-width="1.6" stroke-dasharray="6 4"/>')
        body.append(_text(left + plot_w + 8, my + 4 + (14 if judged and abs(sy(judged[-1][1].judge_only) - my) < 14 else 0),
                          f"{minimum_label} {number(float(minimum), 2)}", fill=THRESHOLD_COLOUR, weight="600"))
    body += frame.estimates()
    label = i18n.gettext("%(metric)s per window with %(ci)s", metric=metric, ci=ci_label)
    return _svg(width, height, body, label=label, kind="windows")


def _window_range(points: Sequence[WindowPoint], minimum: float | None, share: bool) -> tuple[float, float]:
    """Return the windows chart's axis: 0 to 1 for a share (or without numbers), else the data's range and a margin."""
    numbers = [v for p in points for v in (p.value, p.judge_only, *(p.ci or ())) if _finite(v)]
    if _finite(minimum):
        numbers.append(float(minimum))
    if share or not numbers:
        return 0.0, 1.0
    span = max(max(numbers) - min(numbers), 0.1)
    return min(numbers) - span * 0.1, max(numbers) + span * 0.1


class _WindowFrame:
    """The windows chart's plot area and its parts, each a list of SVG elements in drawing order."""

    def __init__(self, points: Sequence[WindowPoint], *, left: float, top: float, plot_w: float, plot_h: float,
                 lo: float, hi: float) -> None:
        self.points, self.left, self.top, self.plot_w, self.plot_h = points, left, top, plot_w, plot_h
        self.column = min(18.0, plot_w / max(len(points), 1) * 0.6)
        self.sx, self.sy = _series_axes(len(points), left=left, top=top, plot_w=plot_w, plot_h=plot_h, lo=lo, hi=hi)

    def no_estimate(self, too_few_label: str) -> list[str]:
        """A grey column at each window without an estimate, so a gap is never mistaken for a line's end."""
        out, column, top, plot_h = [], self.column, self.top, self.plot_h
        for i, p in enumerate(self.points):
            if _finite(p.value):
                continue
            x = self.sx(i)
            out.append(f'<rect class="no-estimate" x="{_f(x - column / 2)}" y="{_f(top)}" width="{_f(column)}" height="{_f(plot_h)}" fill="{GRID}" '
                       f'fill-opacity="0.5"><title>{_e(f"{p.label}: {too_few_label}")}</title></rect>')
            if column >= 8:
                out.append(_text(x, top + plot_h - 6, "?", anchor="middle", fill=MUTED, weight="600"))
        return out

    def bands(self, ci_label: str) -> list[str]:
        """The CI band and the estimate's line, broken where a window has no estimate."""
        points, sx, sy = self.points, self.sx, self.sy
        runs: list[list[int]] = [[]]
        for i, p in enumerate(points):
            if _finite(p.value) and p.ci and all(_finite(v) for v in p.ci):
                runs[-1].append(i)
            elif runs[-1]:
                runs.append([])
        out = []
        for run in (run for run in runs if len(run) > 1):
            upper = " ".join(f"{_f(sx(i))},{_f(sy(points[i].ci[1]))}" for i in run)
            lower = " ".join(f"{_f(sx(i))},{_f(sy(points[i].ci[0]))}" for i in reversed(run))
            out.append(f'<polygon class="ci-band" points="{upper} {lower}" fill="{POINT_COLOUR}" fill-opacity="0.15" stroke="none">'
                       f'<title>{_e(ci_label)}</title></polygon>')
            path = " ".join(f"{_f(sx(i))},{_f(sy(points[i].value))}" for i in run)
            out.append(f'<polyline class="trend" points="{path}" fill="none" stroke="{POINT_COLOUR}" stroke-width="1.6"/>')
        return out

    def judge_line(self, judged: list[tuple[int, WindowPoint]], judge_label: str) -> list[str]:
        """The judge-only number as a dashed grey line, named at its last window."""
        out = []
        if len(judged) > 1:
            path = " ".join(f"{_f(self.sx(i))},{_f(self.sy(p.judge_only))}" for i, p in judged)
            out.append(f'<polyline class="judge-only" points="{path}" fill="none" stroke="{JUDGE_COLOUR}" stroke-width="1.4" '
                       f'stroke-dasharray="4 3"><title>{_e(judge_label)}</title></polyline>')
        if judged:
            out.append(_text(self.left + self.plot_w + 8, self.sy(judged[-1][1].judge_only) + 4, judge_label, fill=JUDGE_COLOUR))
        return out

    def estimates(self) -> list[str]:
        """Every k-th window's label along the axis (six at most), and each estimate as a point coloured by its status."""
        points, sx, sy, base = self.points, self.sx, self.sy, self.top + self.plot_h + 16
        every = max(1, math.ceil(len(points) / 6))
        out = []
        for i, p in enumerate(points):
            x = sx(i)
            if i % every == 0 or i == len(points) - 1:
                out.append(_text(x, base, _clip(p.label, 10), anchor="end", fill=MUTED, title=p.label, size=11,
                                 extra=f' transform="rotate(-25 {_f(x)} {_f(base)})"'))
            if _finite(p.value):
                ci_text = " " + interval(p.ci) if p.ci and all(_finite(v) for v in p.ci) else ""
                colour = STATUS_COLOURS.get(p.status, MUTED)
                out.append(f'<circle class="estimate status-{_e(p.status.replace(" ", "-"))}" cx="{_f(x)}" cy="{_f(sy(p.value))}" r="5" '
                           f'fill="{colour}" stroke="#ffffff" stroke-width="1.5">'
                           f'<title>{_e(f"{p.label}: {number(p.value)}{ci_text} ({p.word or p.status})")}</title></circle>')
        return out

package main

import (
	"cmp"
	"fmt"
	"html"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// The plot: outboxkit's drain events/s against the number of keys (log x axis), one solid line
// per (database, payload); the ceiling of the same (database, payload) as a dashed horizontal
// line and the stock forwarder as a dotted line with square markers, in the same colour.
// Hand-written SVG, no dependencies.

const (
	plotW, plotH                               = 820, 480
	marginL, marginR, marginT, marginB float64 = 78, 250, 62, 70
)

var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"}

type plotSeries struct {
	label   string
	color   string
	points  [][2]float64 // keys, events/s of outboxkit
	stock   [][2]float64
	ceiling float64
}

func writePlot(path string, r *results, o options) error {
	var series []plotSeries
	for _, d := range o.dbs {
		for _, size := range o.payloads {
			s := plotSeries{label: d.label + ", " + sizeLabel(size), color: plotColors[len(series)%len(plotColors)],
				ceiling: r.rate(r.ceilingKey(d.name, size))}
			for _, keys := range slices.Sorted(slices.Values(o.keys)) {
				if v := r.rate(drainKey{db: d.name, size: size, keys: keys, relay: relayOutboxkit}); v > 0 {
					s.points = append(s.points, [2]float64{float64(keys), v})
				}
				if v := r.rate(drainKey{db: d.name, size: size, keys: keys, relay: relayStock}); v > 0 {
					s.stock = append(s.stock, [2]float64{float64(keys), v})
				}
			}
			if len(s.points) > 0 || len(s.stock) > 0 || s.ceiling > 0 {
				series = append(series, s)
			}
		}
	}
	if len(series) == 0 {
		return fmt.Errorf("nothing to plot: no drain was measured")
	}
	svg := renderPlot(series, o, time.Now().UTC())
	if err := os.WriteFile(path, []byte(svg), 0o644); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// renderPlot draws the drain rate of every series against the number of keys, with each
// series' ceiling and stock forwarder, as an SVG document.
func renderPlot(series []plotSeries, o options, when time.Time) string {
	f := newDrainFrame(series, o)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%g" y="24" font-size="16" font-weight="bold">outboxkit forwarder: backlog drain against the number of keys</text>`+"\n", marginL)
	fmt.Fprintf(&b, `<text x="%g" y="44" fill="#444">%s</text>`+"\n", marginL, esc(fmt.Sprintf(
		"%d events per drain, median of %d run(s), Kafka compression %s, %s", o.events, o.repeat, orDefault(o.compress, "lz4"),
		when.Format("2006-01-02 15:04 UTC"))))
	f.writeAxes(&b, o.keys)
	f.writeValueLabels(&b, f.writeSeries(&b, series))
	f.writeLegend(&b, series, maxInt(o.keys))
	fmt.Fprintf(&b, `<text x="8" y="%d" font-size="10" fill="#666">%s</text>`+"\n", plotH-8, esc(o.command))
	b.WriteString("</svg>\n")
	return b.String()
}

// drainFrame is the drain plot's area: x the number of keys on a log scale, from the decade lo
// to the decade hi; y events/s from 0 to yTop, with grid lines every step.
type drainFrame struct {
	lo, hi, yTop, step float64
	x0, x1, y0, y1     float64
}

// newDrainFrame fits the frame to the keys of o and the highest value of series: x from the decade
// at or below the fewest keys to the one at or above the most.
func newDrainFrame(series []plotSeries, o options) drainFrame {
	lo := math.Pow(10, math.Floor(math.Log10(float64(minInt(o.keys)))))
	hi := math.Pow(10, math.Ceil(math.Log10(float64(maxInt(o.keys)))))
	if hi <= lo {
		hi = lo * 10
	}
	yMax := 0.0
	for _, s := range series {
		yMax = max(yMax, s.ceiling)
		for _, p := range append(append([][2]float64(nil), s.points...), s.stock...) {
			yMax = max(yMax, p[1])
		}
	}
	step := niceStep(yMax / 5)
	yTop := math.Ceil(yMax*1.08/step) * step
	if yTop <= 0 {
		yTop, step = 1, 1
	}
	return drainFrame{lo: lo, hi: hi, yTop: yTop, step: step,
		x0: marginL, x1: plotW - marginR, y0: plotH - marginB, y1: marginT}
}

// px is the x of a number of keys.
func (f drainFrame) px(keys float64) float64 {
	return f.x0 + (math.Log10(keys)-math.Log10(f.lo))/(math.Log10(f.hi)-math.Log10(f.lo))*(f.x1-f.x0)
}

// py is the y of a rate, in events/s.
func (f drainFrame) py(v float64) float64 { return f.y0 - v/f.yTop*(f.y0-f.y1) }

// writeAxes writes the grid, the y axis, and the x axis: every decade, and each measured number
// of keys that is not one.
func (f drainFrame) writeAxes(b *strings.Builder, keys []int) {
	for v := 0.0; v <= f.yTop+f.step/2; v += f.step {
		y := f.py(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", f.x0, y, f.x1, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", f.x0-6, y, kilo(v))
	}
	for d := f.lo; d <= f.hi*1.0001; d *= 10 {
		x := f.px(d)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", x, f.y0, x, f.y1)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, f.y0+18, esc(fmt.Sprintf("%.0f", d)))
	}
	for _, k := range keys {
		if isDecade(float64(k)) {
			continue
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#666">%d</text>`+"\n", f.px(float64(k)), f.y0+18, k)
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", f.x0, f.y0, f.x1, f.y0)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", f.x0, f.y0, f.x0, f.y1)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">aggregate ids in the backlog (log scale)</text>`+"\n", (f.x0+f.x1)/2, f.y0+40)
	fmt.Fprintf(b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">events/s drained</text>`+"\n", (f.y0+f.y1)/2)
}

// writeSeries writes each series' ceiling, stock forwarder and outboxkit lines, and returns the
// value labels of outboxkit's points by number of keys (written after, by writeValueLabels).
func (f drainFrame) writeSeries(b *strings.Builder, series []plotSeries) map[float64][]valueLabel {
	labels := map[float64][]valueLabel{}
	for _, s := range series {
		if s.ceiling > 0 {
			y := f.py(s.ceiling)
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="7 4"><title>%s</title></line>`+"\n",
				f.x0, y, f.x1, y, s.color, esc(fmt.Sprintf("ceiling, %s: %.0f events/s", s.label, s.ceiling)))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="%s">ceiling %s</text>`+"\n", (f.x0+f.x1)/2, y-4, s.color, kilo(s.ceiling))
		}
		if len(s.stock) > 0 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.2" stroke-dasharray="2 3" points="%s"/>`+"\n", s.color, polyPoints(s.stock, f.px, f.py))
			for _, p := range s.stock {
				fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="7" height="7" fill="white" stroke="%s" stroke-width="1.5"><title>%s</title></rect>`+"\n",
					f.px(p[0])-3.5, f.py(p[1])-3.5, s.color, esc(fmt.Sprintf("stock forwarder, %s, %.0f keys: %.0f events/s", s.label, p[0], p[1])))
			}
		}
		if len(s.points) > 0 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2.5" points="%s"/>`+"\n", s.color, polyPoints(s.points, f.px, f.py))
			for _, p := range s.points {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s</title></circle>`+"\n", f.px(p[0]), f.py(p[1]), s.color,
					esc(fmt.Sprintf("outboxkit, %s, %.0f keys: %.0f events/s", s.label, p[0], p[1])))
				labels[p[0]] = append(labels[p[0]], valueLabel{y: f.py(p[1]) - 8, text: kilo(p[1]), color: s.color})
			}
		}
	}
	return labels
}

// writeValueLabels writes the value labels at each number of keys, pushed apart where they would
// overlap: from the lowest up, each at least one line above the one below it.
func (f drainFrame) writeValueLabels(b *strings.Builder, labels map[float64][]valueLabel) {
	for _, keys := range slices.Sorted(maps.Keys(labels)) {
		ls := labels[keys]
		slices.SortStableFunc(ls, func(a, b valueLabel) int { return cmp.Compare(b.y, a.y) })
		x, anchor := f.px(keys), "middle"
		switch {
		case x-f.x0 < 20:
			x, anchor = x+5, "start"
		case f.x1-x < 20:
			x, anchor = x-5, "end"
		}
		for i := range ls {
			if i > 0 && ls[i].y > ls[i-1].y-11 {
				ls[i].y = ls[i-1].y - 11
			}
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="10" fill="%s">%s</text>`+"\n",
				x, ls[i].y, anchor, ls[i].color, ls[i].text)
		}
	}
}

// writeLegend writes the legend right of the plot: the series' colours, then the relays' lines.
func (f drainFrame) writeLegend(b *strings.Builder, series []plotSeries, ceilingKeys int) {
	lx, ly := f.x1+22, f.y1+6
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-weight="bold">database, payload</text>`+"\n", lx, ly)
	for i, s := range series {
		y := ly + 20 + float64(i)*18
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"/>`+"\n", lx, y-4, lx+24, y-4, s.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+32, y, esc(s.label))
	}
	ly += 20 + float64(len(series))*18 + 16
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-weight="bold">relay</text>`+"\n", lx, ly)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333" stroke-width="2.5"/><circle cx="%.1f" cy="%.1f" r="4" fill="#333"/>`+"\n",
		lx, ly+16, lx+24, ly+16, lx+12, ly+16)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f">outboxkit</text>`+"\n", lx+32, ly+20)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333" stroke-width="1.5" stroke-dasharray="7 4"/>`+"\n", lx, ly+34, lx+24, ly+34)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f">ceiling (%d keys)</text>`+"\n", lx+32, ly+38, ceilingKeys)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333" stroke-width="1.2" stroke-dasharray="2 3"/><rect x="%.1f" y="%.1f" width="7" height="7" fill="white" stroke="#333" stroke-width="1.5"/>`+"\n",
		lx, ly+52, lx+24, ly+52, lx+8.5, ly+48.5)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f">Watermill stock forwarder</text>`+"\n", lx+32, ly+56)
}

type valueLabel struct {
	y     float64
	text  string
	color string
}

func polyPoints(points [][2]float64, px, py func(float64) float64) string {
	parts := make([]string, len(points))
	for i, p := range points {
		parts[i] = fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1]))
	}
	return strings.Join(parts, " ")
}

// niceStep rounds a raw axis step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func isDecade(v float64) bool {
	l := math.Log10(v)
	return math.Abs(l-math.Round(l)) < 1e-9
}

// kilo formats an events/s figure: 950, 12k, 48.1k.
func kilo(v float64) string {
	switch {
	case v >= 100000:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 1000:
		s := fmt.Sprintf("%.1fk", v/1000)
		return strings.Replace(s, ".0k", "k", 1)
	}
	return fmt.Sprintf("%.0f", v)
}

func minInt(list []int) int {
	m := list[0]
	for _, v := range list[1:] {
		m = min(m, v)
	}
	return m
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func esc(s string) string { return html.EscapeString(s) }

package main

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// The relays plot (-relays-svg): on the left, each relay's drain events/s per number of keys
// (bars at the median, a whisker from the slowest to the fastest run); on the right, each
// relay's commit → consumed latency in the steady run as a percentile curve (x: the share of
// events at or below a latency, in nines up to 99.9 %, then the maximum; y: milliseconds, log
// scale). Hand-written SVG, no dependencies, like the keys plot (plot.go).

const (
	relaysW, relaysH = 1060, 470
	relaysTop        = 70.0
	relaysBottom     = 400.0
)

// latencyNines are the x positions of the percentile curve: the quantile 1 - 10^-x.
const (
	latencyNines     = 3.0  // up to p99.9
	latencyNinesStep = 0.05 // 61 points
)

// latencyQuantiles returns sorted's latencies at the quantiles the plot draws, then the maximum.
func latencyQuantiles(sorted []time.Duration) []time.Duration {
	if len(sorted) == 0 {
		return nil
	}
	var out []time.Duration
	for i := 0; float64(i)*latencyNinesStep <= latencyNines+1e-9; i++ {
		q := 1 - math.Pow(10, -float64(i)*latencyNinesStep)
		out = append(out, sorted[min(len(sorted)-1, int(q*float64(len(sorted))))])
	}
	return append(out, sorted[len(sorted)-1])
}

// relayBars is one group of bars: the relays' drains of one (database, payload, keys).
type relayBars struct {
	label string
	bars  []relayBar
}

type relayBar struct {
	relay               string
	rate, slowest, fast float64
}

// relayCurve is one relay's latency curve.
type relayCurve struct {
	relay     string
	quantiles []time.Duration // latencyQuantiles
	p50, p99  time.Duration
}

func writeRelaysPlot(path string, r *results, steadyRows []steadyResult, o options) error {
	var groups []relayBars
	for _, d := range o.dbs {
		for _, size := range o.payloads {
			for _, keys := range slices.Sorted(slices.Values(o.keys)) {
				g := relayBars{label: fmt.Sprintf("%s, %s, %s", d.label, sizeLabel(size), keysLabel(keys))}
				for _, relay := range o.relays {
					if s, ok := r.stat(drainKey{db: d.name, size: size, keys: keys, relay: relay}); ok {
						g.bars = append(g.bars, relayBar{relay: relay, rate: s.rate, slowest: s.min, fast: s.max})
					}
				}
				if len(g.bars) > 0 {
					groups = append(groups, g)
				}
			}
		}
	}
	var curves []relayCurve
	for _, s := range medianSteadyRuns(steadyRows) {
		if len(s.quantiles) > 0 && s.relays == 1 {
			curves = append(curves, relayCurve{relay: s.relay, quantiles: s.quantiles, p50: s.p50, p99: s.p99})
		}
	}
	if len(groups) == 0 && len(curves) == 0 {
		return fmt.Errorf("nothing to plot: no drain and no steady run was measured")
	}
	svg := renderRelaysPlot(groups, curves, o, time.Now().UTC())
	if err := os.WriteFile(path, []byte(svg), 0o644); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// relayColor gives each relay of the run its colour, in the order of -relays.
func relayColor(o options, relay string) string {
	i := slices.Index(o.relays, relay)
	if i < 0 {
		i = len(o.relays)
	}
	return plotColors[i%len(plotColors)]
}

func renderRelaysPlot(groups []relayBars, curves []relayCurve, o options, when time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		relaysW, relaysH, relaysW, relaysH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", relaysW, relaysH)
	fmt.Fprintf(&b, `<text x="20" y="24" font-size="16" font-weight="bold">outboxkit relays: backlog drain and steady-rate latency</text>`+"\n")
	fmt.Fprintf(&b, `<text x="20" y="44" fill="#444">%s</text>`+"\n", esc(fmt.Sprintf(
		"drains of %d events, median of %d run(s) (whisker: slowest to fastest); steady %d events/s for %d s, one run; %s",
		o.events, o.repeat, o.rate, o.seconds, when.Format("2006-01-02 15:04 UTC"))))
	renderDrainBars(&b, groups, o, 70, 470)
	renderLatencyCurves(&b, curves, o, 560, 880)
	// Legend: the relays in -relays order.
	lx, ly := 900.0, relaysTop+6
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-weight="bold">relay</text>`+"\n", lx, ly)
	for i, relay := range o.relays {
		y := ly + 20 + float64(i)*18
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="14" height="10" fill="%s"/>`+"\n", lx, y-9, relayColor(o, relay))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+20, y, esc(relay))
	}
	fmt.Fprintf(&b, `<text x="8" y="%d" font-size="10" fill="#666">%s</text>`+"\n", relaysH-8, esc(o.command))
	b.WriteString("</svg>\n")
	return b.String()
}

// renderDrainBars draws the drain panel between x0 and x1.
func renderDrainBars(b *strings.Builder, groups []relayBars, o options, x0, x1 float64) {
	y0, y1 := relaysBottom, relaysTop
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-weight="bold">drain, events/s</text>`+"\n", x0, y1-8)
	if len(groups) == 0 {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#666">no drain in this run</text>`+"\n", x0+10, (y0+y1)/2)
		return
	}
	yMax := 0.0
	for _, g := range groups {
		for _, bar := range g.bars {
			yMax = max(yMax, bar.fast)
		}
	}
	step := niceStep(yMax / 5)
	yTop := math.Ceil(yMax*1.08/step) * step
	py := func(v float64) float64 { return y0 - v/yTop*(y0-y1) }
	for v := 0.0; v <= yTop+step/2; v += step {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", x0, py(v), x1, py(v))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x0-6, py(v), kilo(v))
	}
	groupW := (x1 - x0) / float64(len(groups))
	for i, g := range groups {
		gx := x0 + float64(i)*groupW
		barW := min(40, (groupW-16)/float64(len(g.bars)))
		start := gx + (groupW-barW*float64(len(g.bars)))/2
		for j, bar := range g.bars {
			x := start + float64(j)*barW
			c := relayColor(o, bar.relay)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
				x+1, py(bar.rate), barW-2, y0-py(bar.rate), c, esc(fmt.Sprintf("%s, %s: %.0f events/s (%.0f–%.0f)", bar.relay, g.label, bar.rate, bar.slowest, bar.fast)))
			mid := x + barW/2
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", mid, py(bar.slowest), mid, py(bar.fast))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9">%s</text>`+"\n", mid, py(bar.fast)-4, kilo(bar.rate))
		}
		for k, line := range strings.SplitN(g.label, ", ", 3) {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`+"\n", gx+groupW/2, y0+16+float64(k)*13, esc(line))
		}
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x0, y0, x1, y0)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x0, y0, x0, y1)
}

// renderLatencyCurves draws the latency panel between x0 and x1.
func renderLatencyCurves(b *strings.Builder, curves []relayCurve, o options, x0, x1 float64) {
	y0, y1 := relaysBottom, relaysTop
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-weight="bold">commit → consumed at %d events/s, ms (log scale)</text>`+"\n", x0, y1-8, o.rate)
	if len(curves) == 0 {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#666">no steady run in this run</text>`+"\n", x0+10, (y0+y1)/2)
		return
	}
	lo, hi := math.Inf(1), 0.0
	for _, c := range curves {
		lo = min(lo, ms(c.quantiles[0]))
		hi = max(hi, ms(c.quantiles[len(c.quantiles)-1]))
	}
	decLo := math.Floor(math.Log10(max(lo, 0.01)))
	decHi := math.Max(math.Ceil(math.Log10(max(hi, 0.01))), decLo+1)
	py := func(v float64) float64 {
		return y0 - (math.Log10(max(v, 0.01))-decLo)/(decHi-decLo)*(y0-y1)
	}
	// x: 0..latencyNines nines, then a gap and the maximum.
	xMax := x1 - 30
	px := func(nines float64) float64 { return x0 + nines/latencyNines*(xMax-x0-10) }
	for d := decLo; d <= decHi; d++ {
		v := math.Pow(10, d)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", x0, py(v), x1, py(v))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x0-6, py(v), esc(strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")))
	}
	for n, label := range []string{"p0", "p90", "p99", "p99.9"} {
		x := px(float64(n))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", x, y0, x, y1)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+16, label)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">max</text>`+"\n", x1, y0+16)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">share of events at or below (nines)</text>`+"\n", (x0+x1)/2, y0+36)
	for i, c := range curves {
		col := relayColor(o, c.relay)
		pts := make([][2]float64, 0, len(c.quantiles))
		for k, q := range c.quantiles[:len(c.quantiles)-1] {
			pts = append(pts, [2]float64{float64(k) * latencyNinesStep, ms(q)})
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"><title>%s</title></polyline>`+"\n", col, polyPoints(pts, px, py),
			esc(fmt.Sprintf("%s: p50 %v, p99 %v, max %v", c.relay, c.p50.Round(100*time.Microsecond), c.p99.Round(100*time.Microsecond), c.quantiles[len(c.quantiles)-1].Round(100*time.Microsecond))))
		last := pts[len(pts)-1]
		maxV := ms(c.quantiles[len(c.quantiles)-1])
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1" stroke-dasharray="2 3"/>`+"\n", px(last[0]), py(last[1]), x1, py(maxV), col)
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x1, py(maxV), col)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" fill="%s">%s p99 %s ms</text>`+"\n", x0+6, y1+12+float64(i)*12, col,
			esc(c.relay), esc(fmt.Sprintf("%.1f", ms(c.p99))))
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x0, y0, x1, y0)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x0, y0, x0, y1)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// medianSteadyRuns keeps one steady run per (relay, number of relays): of a relay measured
// several times (-source wal repeats its own), the run of the median p99, so that the plot
// draws one curve per relay.
func medianSteadyRuns(rows []steadyResult) []steadyResult {
	type key struct {
		relay  string
		relays int
	}
	runs := map[key][]steadyResult{}
	var order []key
	for _, s := range rows {
		k := key{s.relay, s.relays}
		if _, seen := runs[k]; !seen {
			order = append(order, k)
		}
		runs[k] = append(runs[k], s)
	}
	out := make([]steadyResult, 0, len(order))
	for _, k := range order {
		rs := slices.SortedFunc(slices.Values(runs[k]), func(a, b steadyResult) int { return cmp.Compare(a.p99, b.p99) })
		out = append(out, rs[(len(rs)-1)/2])
	}
	return out
}

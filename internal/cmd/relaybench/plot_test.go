package main

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"
)

func TestRenderPlotIsWellFormedSVG(t *testing.T) {
	o := options{events: 20000, repeat: 3, keys: []int{1, 10, 1000}, payloads: []int{256, 4096}, command: "relaybench -svg x.svg & <co>"}
	series := []plotSeries{
		{label: "PostgreSQL, 256 B", color: plotColors[0], ceiling: 60000,
			points: [][2]float64{{1, 40000}, {10, 45000}, {1000, 48000}}, stock: [][2]float64{{1, 2000}, {10, 2100}, {1000, 2050}}},
		{label: "MariaDB, 256 B", color: plotColors[1], ceiling: 50000,
			points: [][2]float64{{1, 39900}, {10, 44900}, {1000, 47900}}},
	}
	svg := renderPlot(series, o, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	checkSVG(t, svg, ">1000<", ">100<", ">10<", ">1<", "ceiling 60k", "48k", "&amp; &lt;co&gt;")
	if svg != renderPlot(series, o, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Error("the same results render differently")
	}
}

// checkSVG fails t unless svg is well-formed XML holding every wanted text.
func checkSVG(t *testing.T, svg string, wants ...string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
	}
	for _, want := range wants {
		if !strings.Contains(svg, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
}

func TestParseRefusesBadFlags(t *testing.T) {
	cases := []struct{ keys, dbs, payloads, relays, want string }{
		{"0", "postgres", "256", "outboxkit", `-keys: "0"`},
		{"1,x", "postgres", "256", "outboxkit", `-keys: "x"`},
		{"1", "oracle", "256", "outboxkit", `-dbs: "oracle"`},
		{"1", "postgres", "8", "outboxkit", `-payloads: "8"`},
		{"1", "postgres", "256", "kafka", `-relays: "kafka"`},
		{"1", "", "256", "outboxkit", `-dbs: ""`},
	}
	for _, c := range cases {
		o := options{events: 1, repeat: 1}
		err := o.parse("127.0.0.1:9092", c.keys, c.dbs, c.payloads, c.relays)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parse(keys %q, dbs %q, payloads %q, relays %q) = %v, want an error containing %s", c.keys, c.dbs, c.payloads, c.relays, err, c.want)
		}
	}
	o := options{events: 1, repeat: 1}
	if err := o.parse("b:1", "1, 10,1000", "postgres,mariadb", "256,4096", "outboxkit,stock,ceiling"); err != nil {
		t.Fatal(err)
	}
	if len(o.keys) != 3 || len(o.dbs) != 2 || o.dbs[1].dialect != "mysql" || len(o.relays) != 3 {
		t.Errorf("parsed %+v", o)
	}
}

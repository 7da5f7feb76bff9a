package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// node is an element of a parsed SVG document.
type node struct {
	name     string
	attrs    map[string]string
	text     string // character data directly inside
	children []*node
}

// parseSVG decodes the whole document strictly, failing t if it is not well-formed XML.
func parseSVG(t *testing.T, doc []byte) *node {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var root *node
	var stack []*node
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &node{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				top.children = append(top.children, n)
			} else if root != nil {
				t.Fatal("the SVG has more than one root element")
			} else {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(tok)
			}
		}
	}
	if root == nil || root.name != "svg" || root.attrs["xmlns"] != "http://www.w3.org/2000/svg" {
		t.Fatalf("the document's root is not an svg element in the SVG namespace: %+v", root)
	}
	return root
}

// all returns the elements under n, n included, for which keep is true, in document order.
func (n *node) all(keep func(*node) bool) []*node {
	var out []*node
	if keep(n) {
		out = append(out, n)
	}
	for _, c := range n.children {
		out = append(out, c.all(keep)...)
	}
	return out
}

func class(c string) func(*node) bool {
	return func(n *node) bool { return n.attrs["class"] == c }
}

func (n *node) float(t *testing.T, attr string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(n.attrs[attr], 64)
	if err != nil {
		t.Fatalf("%s %s=%q: %v", n.name, attr, n.attrs[attr], err)
	}
	return v
}

// fakeRow is a row of a fabricated scenario: a rate of 0 makes a row left out by -impls; no
// waits, a lock that made no acquisition; cut waits, waits cut off by the slice's end.
type fakeRow struct {
	rate      float64
	waits     []time.Duration
	cutWaits  []time.Duration
	wantP99   bool // a p99 bar is expected
	wantLower bool // and its figure is a lower bound
}

// fakeScenario is a fabricated scenario's rows, by index in implNames.
type fakeScenario struct {
	sc   scenario
	rows map[int]fakeRow
}

// fakeScenarios are three scenarios with a row of every kind: floors, aqs's, another
// library's, a row with no waits, a row left out, a p99 cut off, the server's capacity.
func fakeScenarios() []fakeScenario {
	ms := time.Millisecond
	us := time.Microsecond
	return []fakeScenario{
		{scenario{tag: "1", title: "Uncontended: 1 goroutine", procs: 1, goroutines: 1}, map[int]fakeRow{
			floorPing:  {rate: 17000, waits: []time.Duration{50 * us}}, // a floor of single commands: its table shows no waits, whatever it has
			floorEval:  {rate: 16000},
			floorCycle: {rate: 7000},
			fifoFloor:  {rate: 7200, waits: []time.Duration{40 * us, 160 * us}, wantP99: true},
			4:          {rate: 6800, waits: []time.Duration{47 * us, 158 * us}, wantP99: true},
			5:          {rate: 6300, waits: []time.Duration{48 * us, 160 * us}, wantP99: true},
			7:          {rate: 5900, waits: []time.Duration{60 * us, 183 * us}, wantP99: true},
			11:         {rate: 2800, waits: []time.Duration{190 * us, 399 * us}, wantP99: true},
		}},
		{scenario{tag: "32", title: "Contended: 32 goroutines, one process", procs: 1, goroutines: 32}, map[int]fakeRow{
			floorPing:  {rate: 45000},
			floorCycle: {rate: 18000},
			4:          {rate: 9000, waits: []time.Duration{3 * ms, 8 * ms}, wantP99: true},
			6:          {rate: 6500, waits: []time.Duration{4 * ms, 9 * ms}, wantP99: true},
			7:          {rate: 6000, waits: []time.Duration{64 * us}, cutWaits: []time.Duration{300 * ms}, wantP99: true, wantLower: true},
			9:          {rate: 6800},                          // no wait recorded: no p99
			10:         {rate: 0, waits: []time.Duration{ms}}, // left out by -impls
		}},
		{scenario{tag: "many", title: "Many names: 64 goroutines, one process, each lock one of 1000 names at random, held for no time",
			procs: 1, goroutines: 64, names: 1000}, map[int]fakeRow{
			floorCycle:      {rate: 10000},
			4:               {rate: 21000, waits: []time.Duration{ms, 6 * ms}, wantP99: true},
			8:               {rate: 6500, waits: []time.Duration{4 * ms, 19 * ms}, wantP99: true},
			capacityRow:     {rate: 185000, waits: []time.Duration{ms}},
			capacityRow + 1: {rate: 20000, waits: []time.Duration{ms, 5 * ms}, wantP99: true},
		}},
	}
}

// fakeResults fabricates the results of fakeScenarios.
func fakeResults() []result {
	var out []result
	for _, s := range fakeScenarios() {
		rows := make([]row, len(implNames))
		for i, f := range s.rows {
			if f.rate > 0 {
				rows[i].rates = []float64{f.rate * 0.9, f.rate, f.rate * 1.05} // median: f.rate
			}
			for _, w := range f.waits {
				rows[i].waits = append(rows[i].waits, int64(w))
			}
			for _, w := range f.cutWaits {
				rows[i].cut = append(rows[i].cut, int64(w))
			}
		}
		out = append(out, result{s.sc, rows})
	}
	return out
}

// wanted returns, by scenario tag, the names of the fabricated rows for which keep is true,
// in the tables' order.
func wanted(keep func(fakeRow) bool) map[string][]string {
	want := map[string][]string{}
	for _, s := range fakeScenarios() {
		for i, name := range implNames {
			if f, ok := s.rows[i]; ok && keep(f) {
				want[s.sc.tag] = append(want[s.sc.tag], name)
			}
		}
	}
	return want
}

// fakeRowOf returns the fabricated row of implNames' name in scenario tag, and its result.
func fakeRowOf(tag, name string) (fakeRow, row) {
	i := slices.Index(implNames, name)
	for k, s := range fakeScenarios() {
		if s.sc.tag == tag {
			return s.rows[i], fakeResults()[k].rows[i]
		}
	}
	return fakeRow{}, row{}
}

// barsByPanel returns each panel's bar groups by scenario tag.
func barsByPanel(t *testing.T, root *node) map[string][]*node {
	t.Helper()
	out := map[string][]*node{}
	for _, p := range root.all(class("panel")) {
		out[p.attrs["data-scenario"]] = p.all(class("bar"))
	}
	return out
}

// checkBars checks that the bars of every panel are exactly the rows want lists for it,
// grouped by kind, each with a rect, its name and its value written beside it.
func checkBars(t *testing.T, root *node, want map[string][]string, label func(tag, row string) string) {
	t.Helper()
	panels := barsByPanel(t, root)
	if len(panels) != len(want) {
		t.Errorf("%d panels, want %d", len(panels), len(want))
	}
	for tag, rows := range want {
		var got []string
		for _, g := range panels[tag] {
			row := g.attrs["data-row"]
			got = append(got, row)
			rects := g.all(func(n *node) bool { return n.name == "rect" })
			if len(rects) != 1 || rects[0].float(t, "width") <= 0 {
				t.Errorf("%s, %s: want one rect of positive width, got %d", tag, row, len(rects))
			}
			names, values := g.all(class("name")), g.all(class("value"))
			if len(names) != 1 || names[0].text != chartName(row) {
				t.Errorf("%s, %s: the bar's name is not written beside it", tag, row)
			}
			if w := label(tag, row); len(values) != 1 || values[0].text != w {
				t.Errorf("%s, %s: the bar's value label is not %q", tag, row, w)
			}
		}
		for k := 1; k < len(got); k++ {
			if kindOf(got[k]) < kindOf(got[k-1]) {
				t.Errorf("panel %s: %s after %s: the bars are not grouped floors, aqs, aqs per call, others", tag, got[k], got[k-1])
			}
		}
		slices.Sort(got)
		if rows = slices.Sorted(slices.Values(rows)); !slices.Equal(got, rows) {
			t.Errorf("panel %s: bars of\n\t%q\nwant\n\t%q", tag, got, rows)
		}
	}
}

// checkScale checks that in every panel the ticks' positions grow with their values and the
// bars' widths with theirs, and that a broken bar is beyond the last tick.
func checkScale(t *testing.T, root *node, log bool) {
	t.Helper()
	for _, p := range root.all(class("panel")) {
		tag := p.attrs["data-scenario"]
		ticks := p.all(class("tick"))
		if len(ticks) < 2 {
			t.Fatalf("panel %s: %d ticks, want at least 2", tag, len(ticks))
		}
		for k := 1; k < len(ticks); k++ {
			v0, v1 := ticks[k-1].float(t, "data-value"), ticks[k].float(t, "data-value")
			x0, x1 := ticks[k-1].float(t, "data-x"), ticks[k].float(t, "data-x")
			if !(v1 > v0 && x1 > x0) {
				t.Errorf("panel %s: tick %g at x %.1f after tick %g at x %.1f: not monotonic", tag, v1, x1, v0, x0)
			}
			if log && v1 != 10*v0 {
				t.Errorf("panel %s: log ticks %g then %g, want powers of ten", tag, v0, v1)
			}
		}
		if first := ticks[0].float(t, "data-value"); !log && first != 0 {
			t.Errorf("panel %s: a linear scale starts at %g, want 0", tag, first)
		}
		top := ticks[len(ticks)-1].float(t, "data-value")
		bars := p.all(class("bar"))
		slices.SortFunc(bars, func(a, b *node) int {
			return int(a.float(t, "data-value") - b.float(t, "data-value"))
		})
		for k, b := range bars {
			v := b.float(t, "data-value")
			if b.attrs["data-broken"] == "true" {
				if v <= top {
					t.Errorf("panel %s: %s broken at %g, within the scale's %g", tag, b.attrs["data-row"], v, top)
				}
				continue
			}
			if v > top || log && v < ticks[0].float(t, "data-value") {
				t.Errorf("panel %s: %s's %g lies outside the axis", tag, b.attrs["data-row"], v)
			}
			if k > 0 && b.float(t, "data-width") < bars[k-1].float(t, "data-width") {
				t.Errorf("panel %s: %s's bar (%g) is shorter than %s's (%g)", tag,
					b.attrs["data-row"], v, bars[k-1].attrs["data-row"], bars[k-1].float(t, "data-value"))
			}
		}
	}
}

func TestThroughputChartHasABarPerRowWithARate(t *testing.T) {
	root := parseSVG(t, throughputChart(fakeResults()).svg())
	checkBars(t, root, wanted(func(f fakeRow) bool { return f.rate > 0 }), func(tag, name string) string {
		f, _ := fakeRowOf(tag, name)
		return fmtChartRate(f.rate)
	})
	checkScale(t, root, false)
	// The floors of single commands set no scale: past the locks' and the lock cycle's, their
	// bars are broken, and only theirs.
	singles := []string{implNames[floorPing], implNames[floorEval], implNames[capacityRow]}
	for tag, bars := range barsByPanel(t, root) {
		for _, b := range bars {
			broken := b.attrs["data-broken"] == "true"
			if broken && !slices.Contains(singles, b.attrs["data-row"]) {
				t.Errorf("%s: %s's bar is broken", tag, b.attrs["data-row"])
			}
			if !broken && b.attrs["data-row"] == implNames[capacityRow] {
				t.Errorf("%s: the capacity's bar, far above the locks', is not broken", tag)
			}
		}
	}
}

func TestP99ChartHasABarPerLockWithWaits(t *testing.T) {
	root := parseSVG(t, p99Chart(fakeResults()).svg())
	checkBars(t, root, wanted(func(f fakeRow) bool { return f.wantP99 }), func(tag, name string) string {
		f, r := fakeRowOf(tag, name)
		d, lower, _ := waitQuantile(r.waits, r.cut, 0.99)
		if lower != f.wantLower {
			t.Errorf("%s, %s: lower bound %t, want %t", tag, name, lower, f.wantLower)
		}
		if lower {
			return "≥ " + fmtDur(d)
		}
		return fmtDur(d)
	})
	checkScale(t, root, true)
}

func TestLinearScaleIsRoundAndCoversItsValues(t *testing.T) {
	for _, hi := range []float64{0.7, 3, 99, 1000, 1234, 9999, 18173, 45837, 372960} {
		s := linearScale(hi)
		if s.hi < hi || s.ticks[0] != 0 || s.ticks[len(s.ticks)-1] != s.hi || len(s.ticks) < 3 || len(s.ticks) > 6 {
			t.Errorf("linearScale(%g): top %g, ticks %v", hi, s.hi, s.ticks)
		}
		for k := 1; k < len(s.ticks); k++ {
			if s.at(s.ticks[k], 100) <= s.at(s.ticks[k-1], 100) {
				t.Errorf("linearScale(%g): ticks %v not increasing", hi, s.ticks)
			}
		}
	}
}

func TestReportOpensWithTheCharts(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	var b strings.Builder
	writeReport(&b, machine{}, config{out: out}, fakeResults())
	report := b.String()
	for _, f := range []string{throughputFile, p99File} {
		link := "](bench/charts/" + f + ")"
		at := strings.Index(report, link)
		if at < 0 || at > strings.Index(report, "## Machine") {
			t.Errorf("the report does not show %s before its first section", f)
		}
	}
	if err := writeCharts(chartsFolder(out), fakeResults()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{throughputFile, p99File} {
		doc, err := os.ReadFile(filepath.Join(dir, "bench", "charts", f))
		if err != nil {
			t.Fatal(err)
		}
		parseSVG(t, doc)
	}

	b.Reset()
	writeReport(&b, machine{}, config{}, fakeResults())
	if strings.Contains(b.String(), "bench/charts/") {
		t.Error("a report written to no file links charts that no one wrote")
	}
}

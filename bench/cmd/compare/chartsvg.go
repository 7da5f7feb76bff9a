package main

import (
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Drawing a chart as SVG: its scales, its layout and its elements. Each bar's group carries
// its row and value as data- attributes, and each tick its value and position, so that a
// test can check what is drawn without reading coordinates out of paths.

// scale maps a value to a length along a panel's bar area.
type scale struct {
	log    bool
	lo, hi float64 // the axis's ends: lo is 0 on a linear scale
	ticks  []float64
}

// linearScale returns a scale from 0 to a round value at or above hi, with 3 to 6 ticks.
func linearScale(hi float64) scale {
	if hi <= 0 || math.IsNaN(hi) {
		hi = 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(hi/4)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if hi/(m*mag) <= 5 {
			step = m * mag
			break
		}
	}
	top := math.Ceil(hi/step-1e-9) * step
	s := scale{hi: top}
	for k := 0; float64(k)*step <= top*(1+1e-9); k++ {
		s.ticks = append(s.ticks, float64(k)*step)
	}
	return s
}

// logScale returns a scale from the power of ten at or below lo to the one at or above hi,
// at least one decade, with a tick at each power of ten.
func logScale(lo, hi float64) scale {
	a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if b <= a {
		b = a + 1
	}
	s := scale{log: true, lo: math.Pow(10, a), hi: math.Pow(10, b)}
	for e := a; e <= b; e++ {
		s.ticks = append(s.ticks, math.Pow(10, e))
	}
	return s
}

// at returns where v falls along a length of w, 0 at the axis's start; values past the ends
// fall past 0 or w.
func (s scale) at(v, w float64) float64 {
	if s.log {
		return w * (math.Log10(v) - math.Log10(s.lo)) / (math.Log10(s.hi) - math.Log10(s.lo))
	}
	return w * (v - s.lo) / (s.hi - s.lo)
}

// panelScale returns the linear scale of a panel's bars: up to the largest value of a lock or
// of the lock cycle's floor, leaving out the floors of single commands, unless a panel has
// only those.
func panelScale(bars []bar) scale {
	hi, all := 0.0, 0.0
	for _, b := range bars {
		if !b.single {
			hi = max(hi, b.v)
		}
		all = max(all, b.v)
	}
	if hi == 0 {
		hi = all
	}
	return linearScale(hi)
}

// The chart's geometry, in pixels: GitHub shows a README's images up to about 880 wide.
const (
	chartWidth  = 880.0
	chartMargin = 16.0
	columnGap   = 28.0
	panelWidth  = (chartWidth - 2*chartMargin - columnGap) / 2
	rowHeight   = 16.0
	barHeight   = 11.0
	labelFont   = 11.0 // rows' names and values
	titleFont   = 12.0 // panels' titles
	tickFont    = 10.0
	lineGap     = 4.0 // between lines of a wrapped title
)

// The colours: aqs in blue, the other libraries in grey, the floors hatched.
const (
	aqsFill     = "#2563eb"
	perCallFill = "#93c5fd"
	otherFill   = "#9ca3af"
	floorStroke = "#6b7280"
	gridStroke  = "#e5e7eb"
	textColour  = "#1f2937"
	mutedColour = "#6b7280"
	aqsText     = "#1d4ed8"
)

// textWidth estimates the width of s in a sans-serif font of size px: about 0.6 em a
// character, the narrow ones less. Nothing measures text in an SVG's reader ahead of time,
// so the layout leaves room for the wider fonts (DejaVu Sans) as well.
func textWidth(s string, px float64) float64 {
	w := 0.0
	for _, r := range s {
		switch {
		case strings.ContainsRune(" ,.:;'`!|()[]ijlt1", r):
			w += 0.34
		case r >= 'A' && r <= 'Z' || r == 'm' || r == 'w' || r == '×' || r == '≥':
			w += 0.8
		default:
			w += 0.62
		}
	}
	return w * px
}

// boldWidth is how much wider bold text is than regular.
const boldWidth = 1.15

// nameWidth estimates the width of b's row name as drawn: aqs's in bold.
func nameWidth(b bar) float64 {
	w := textWidth(chartName(b.row), labelFont)
	if b.kind == kindAQS || b.kind == kindAQSPerCall {
		w *= boldWidth
	}
	return w
}

// wrap breaks s into lines no wider than w at size px, between words.
func wrap(s string, w, px float64) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && textWidth(line+" "+word, px) > w {
			lines = append(lines, line)
			line = word
			continue
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// esc escapes s for an SVG text or attribute.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// svg returns the chart as a standalone SVG document.
func (c chart) svg() []byte {
	var body strings.Builder
	// Widths every panel shares, so that the bars of all panels start at one x.
	nameW, valueW := 0.0, 0.0
	for _, p := range c.panels {
		for _, b := range p.bars {
			nameW = max(nameW, nameWidth(b))
			valueW = max(valueW, textWidth(b.label, labelFont))
		}
	}
	nameW += 8
	valueW += 14 // room for a break mark too
	barW := panelWidth - nameW - valueW

	var global scale
	if c.log && len(c.panels) > 0 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range c.panels {
			for _, b := range p.bars {
				lo, hi = min(lo, b.v), max(hi, b.v)
			}
		}
		global = logScale(lo, hi)
	}

	y := c.header(&body)
	for row := 0; row < len(c.panels); row += 2 {
		h := 0.0
		for col := 0; col < 2 && row+col < len(c.panels); col++ {
			p := c.panels[row+col]
			s := global
			if !c.log {
				s = panelScale(p.bars)
			}
			x := chartMargin + float64(col)*(panelWidth+columnGap)
			h = max(h, c.panel(&body, p, s, x, y, nameW, barW))
		}
		y += h + 18
	}
	height := math.Ceil(y)

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif" role="img" aria-label="%s">`+"\n",
		chartWidth, height, chartWidth, height, esc(c.title))
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(c.title))
	// The hatch of the floors' bars.
	b.WriteString(`<defs><pattern id="hatch" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
		`<rect width="5" height="5" fill="#ffffff"/><line x1="0" y1="0" x2="0" y2="5" stroke="` + otherFill + `" stroke-width="2.5"/></pattern></defs>` + "\n")
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	b.WriteString(body.String())
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// header writes the title, the subtitle and the legend, and returns where the panels start.
func (c chart) header(b *strings.Builder) float64 {
	y := chartMargin + 16
	fmt.Fprintf(b, `<text class="title" x="%.1f" y="%.1f" font-size="17" font-weight="bold" fill="%s">%s</text>`+"\n",
		chartMargin, y, textColour, esc(c.title))
	for _, line := range c.subtitle {
		y += 18
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="12" fill="%s">%s</text>`+"\n", chartMargin, y, mutedColour, esc(line))
	}
	y += 24
	b.WriteString(`<g class="legend">` + "\n")
	// Entries flow from left to right, onto a new line when the next would not fit.
	x := chartMargin
	place := func(w float64) float64 {
		if x > chartMargin && x+w > chartWidth-chartMargin {
			x, y = chartMargin, y+18
		}
		at := x
		x += w + 18
		return at
	}
	for _, k := range []barKind{kindAQS, kindAQSPerCall, kindOther, kindFloor} {
		if !c.has(k) {
			continue
		}
		label := map[barKind]string{
			kindAQS:        "aqs",
			kindAQSPerCall: "aqs, a Lock value per call",
			kindOther:      "other libraries",
			kindFloor:      "floors: not locks",
		}[k]
		if k == kindFloor && c.hasCapacity() {
			label = "floors and capacity: not locks"
		}
		at := place(19 + textWidth(label, 12))
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="14" height="%.0f" %s/>`, at, y-barHeight+1, barHeight, barStyle(k))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="12" fill="%s">%s</text>`+"\n", at+19, y, textColour, esc(label))
	}
	for _, n := range c.notes {
		at := place(textWidth(n.text, 12) + map[bool]float64{true: 31}[n.broken])
		if n.broken {
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="26" height="%.0f" %s/>`, at, y-barHeight+1, barHeight, barStyle(kindOther))
			breakMark(b, at+18, y-barHeight/2+1)
			at += 31
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="12" fill="%s">%s</text>`+"\n", at, y, textColour, esc(n.text))
	}
	b.WriteString("</g>\n")
	return y + 22
}

// breakMark draws across a bar, centred at (x, mid), the sign that it runs on past its scale:
// a white gap between two slanted strokes.
func breakMark(b *strings.Builder, x, mid float64) {
	h := barHeight/2 + 2
	fmt.Fprintf(b, `<polygon points="%.2f,%.2f %.2f,%.2f %.2f,%.2f %.2f,%.2f" fill="#ffffff"/>`,
		x-4, mid+h, x, mid-h, x+3, mid-h, x-1, mid+h)
	for _, dx := range []float64{0, 3} {
		fmt.Fprintf(b, `<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="%s" stroke-width="1"/>`,
			x-4+dx, mid+h, x+dx, mid-h, textColour)
	}
}

// has reports whether any of the chart's bars is of kind k.
func (c chart) has(k barKind) bool {
	for _, p := range c.panels {
		for _, b := range p.bars {
			if b.kind == k {
				return true
			}
		}
	}
	return false
}

// hasCapacity reports whether any of the chart's bars is the server's capacity.
func (c chart) hasCapacity() bool {
	for _, p := range c.panels {
		if slices.ContainsFunc(p.bars, func(b bar) bool { return strings.HasPrefix(b.row, "capacity") }) {
			return true
		}
	}
	return false
}

// barStyle returns the fill and stroke attributes of a bar of kind k.
func barStyle(k barKind) string {
	switch k {
	case kindAQS:
		return `fill="` + aqsFill + `"`
	case kindAQSPerCall:
		return `fill="` + perCallFill + `" stroke="` + aqsFill + `" stroke-width="1"`
	case kindFloor:
		return `fill="url(#hatch)" stroke="` + floorStroke + `" stroke-width="1"`
	}
	return `fill="` + otherFill + `"`
}

// panel writes one scenario's panel with its top left corner at (x, y), its rows' names in
// the first nameW pixels and its bars in the barW after them, and returns its height.
func (c chart) panel(b *strings.Builder, p panel, s scale, x, y, nameW, barW float64) float64 {
	fmt.Fprintf(b, `<g class="panel" data-scenario="%s">`+"\n", esc(p.tag))
	titleLines := wrap(p.title, panelWidth, titleFont*boldWidth) // a bold font's width at a larger size
	for i, line := range titleLines {
		fmt.Fprintf(b, `<text class="panel-title" x="%.1f" y="%.1f" font-size="%.0f" font-weight="bold" fill="%s">%s</text>`+"\n",
			x, y+titleFont+float64(i)*(titleFont+lineGap), titleFont, textColour, esc(line))
	}
	top := y + float64(len(titleLines))*(titleFont+lineGap) + 6
	x0 := x + nameW
	bottom := top + float64(len(p.bars))*rowHeight + 2

	// The grid and the axis under the bars.
	fmt.Fprintf(b, `<g class="axis" data-scale="%s">`+"\n", map[bool]string{true: "log", false: "linear"}[s.log])
	// Every tick has its grid line; where the ticks stand closer than their labels are wide,
	// only every other one (or every third) is labelled.
	every := 1
	if n := len(s.ticks); n > 1 {
		widest := 0.0
		for _, t := range s.ticks {
			widest = max(widest, textWidth(c.tick(t), tickFont))
		}
		every = int(math.Ceil((widest + 10) / (barW / float64(n-1))))
	}
	for k, t := range s.ticks {
		tx := x0 + s.at(t, barW)
		fmt.Fprintf(b, `<g class="tick" data-value="%g" data-x="%.2f"><line x1="%.2f" y1="%.1f" x2="%.2f" y2="%.1f" stroke="%s"/>`,
			t, tx, tx, top-2, tx, bottom+3, gridStroke)
		if k%every == 0 {
			fmt.Fprintf(b, `<text x="%.2f" y="%.1f" font-size="%.0f" fill="%s" text-anchor="middle">%s</text>`,
				tx, bottom+3+tickFont+1, tickFont, mutedColour, esc(c.tick(t)))
		}
		b.WriteString("</g>\n")
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x0, bottom, x0+barW, bottom, mutedColour)
	b.WriteString("</g>\n")

	for i, br := range p.bars {
		ry := top + float64(i)*rowHeight
		mid := ry + rowHeight/2
		w := s.at(br.v, barW)
		broken := w > barW
		if broken {
			w = barW + 8
		}
		w = max(w, 1) // a value at the scale's start still shows where it is
		nameColour, weight := textColour, "normal"
		switch br.kind {
		case kindAQS, kindAQSPerCall:
			nameColour, weight = aqsText, "bold"
		case kindFloor:
			nameColour = mutedColour
		}
		fmt.Fprintf(b, `<g class="bar" data-row="%s" data-value="%g" data-width="%.2f" data-broken="%t">`, esc(br.row), br.v, w, broken)
		fmt.Fprintf(b, `<text class="name" x="%.1f" y="%.1f" font-size="%.0f" font-weight="%s" fill="%s" text-anchor="end">%s</text>`,
			x0-6, mid+labelFont*0.36, labelFont, weight, nameColour, esc(chartName(br.row)))
		fmt.Fprintf(b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.0f" %s/>`, x0, mid-barHeight/2, w, barHeight, barStyle(br.kind))
		if broken {
			breakMark(b, x0+barW-4, mid)
		}
		fmt.Fprintf(b, `<text class="value" x="%.2f" y="%.1f" font-size="%.0f" fill="%s">%s</text></g>`+"\n",
			x0+w+4, mid+labelFont*0.36, labelFont, textColour, esc(br.label))
	}
	b.WriteString("</g>\n")
	return bottom + 3 + tickFont + 4 - y
}

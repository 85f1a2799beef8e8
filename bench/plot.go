package main

import (
	"image/color"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	grey   = color.NRGBA{R: 120, G: 120, B: 120, A: 70}
	blue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	green  = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	red    = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	black  = color.RGBA{A: 255}
)

// plotOutage draws the outage run to a PNG at path: every call's latency with the p50 and
// p99 of each second above, and who answered each second below, with the moments the
// primary failed and its breaker opened (openAt < 0: it did not).
func plotOutage(path string, run *Run, failAt, openAt time.Duration) error {
	span := run.Outcomes[len(run.Outcomes)-1].At
	bucket := time.Second
	if span < 20*time.Second {
		bucket = max((span / 20).Round(100*time.Millisecond), 100*time.Millisecond)
	}
	n := int(span/bucket) + 1
	per := make([][]Outcome, n)
	for _, o := range run.Outcomes {
		per[int(o.At/bucket)] = append(per[int(o.At/bucket)], o)
	}

	lat := plot.New()
	lat.Title.Text = "afloat during a primary outage: latency of each call, from its intended send time"
	lat.X.Label.Text = "time since start (s)"
	lat.Y.Label.Text = "latency (ms)"
	lat.X.Min, lat.X.Max = 0, span.Seconds()
	lat.X.Tick.Marker = plainTicks{}
	var points plotter.XYs
	hi := 0.0
	for _, o := range run.Outcomes {
		if o.Err != nil {
			continue
		}
		y := float64(o.Latency) / float64(time.Millisecond)
		points = append(points, plotter.XY{X: o.At.Seconds(), Y: y})
		hi = max(hi, y)
	}
	if hi == 0 {
		hi = 1
	}
	sc, err := plotter.NewScatter(points)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Color = grey
	sc.GlyphStyle.Radius = vg.Points(1)
	sc.GlyphStyle.Shape = draw.CircleGlyph{}
	lat.Add(sc)
	var p50s, p99s plotter.XYs
	for i, calls := range per {
		h := histogram(calls, nil)
		if h.TotalCount() == 0 {
			continue
		}
		x := (time.Duration(i)*bucket + bucket/2).Seconds()
		p50s = append(p50s, plotter.XY{X: x, Y: float64(quantile(h, 50)) / float64(time.Millisecond)})
		p99s = append(p99s, plotter.XY{X: x, Y: float64(quantile(h, 99)) / float64(time.Millisecond)})
	}
	if err := addLine(lat, "p50 per "+bucket.String(), p50s, blue); err != nil {
		return err
	}
	if err := addLine(lat, "p99 per "+bucket.String(), p99s, orange); err != nil {
		return err
	}
	if err := marks(lat, failAt, openAt, 0, hi*1.35); err != nil {
		return err
	}
	lat.Y.Min, lat.Y.Max = 0, hi*1.35 // room for the legend
	lat.Legend.Top = true

	share := plot.New()
	share.Title.Text = "who answered (% of the calls sent each " + bucket.String() + ")"
	share.X.Label.Text = "time since start (s)"
	share.Y.Label.Text = "% of calls"
	share.Y.Min, share.Y.Max = 0, 100
	share.X.Min, share.X.Max = 0, span.Seconds()
	share.X.Tick.Marker = plainTicks{}
	series := []struct {
		name  string
		c     color.Color
		match func(Outcome) bool
	}{
		{"primary (tier 0)", blue, func(o Outcome) bool { return o.Err == nil && o.Source == "model" && o.Tier == 0 }},
		{"backup (tier 1)", green, func(o Outcome) bool { return o.Err == nil && o.Source == "model" && o.Tier == 1 }},
		{"heuristic", orange, func(o Outcome) bool { return o.Err == nil && o.Source == "heuristic" }},
		{"failed", red, func(o Outcome) bool { return o.Err != nil }},
	}
	for _, s := range series {
		var xy plotter.XYs
		for i, calls := range per {
			if len(calls) == 0 {
				continue
			}
			k := 0
			for _, o := range calls {
				if s.match(o) {
					k++
				}
			}
			xy = append(xy, plotter.XY{X: (time.Duration(i)*bucket + bucket/2).Seconds(), Y: 100 * float64(k) / float64(len(calls))})
		}
		if err := addLine(share, s.name, xy, s.c); err != nil {
			return err
		}
	}
	if err := marks(share, failAt, openAt, 0, 100); err != nil {
		return err
	}
	share.Legend.YOffs = vg.Points(110) // between the lines at 0 % and at 100 %

	img := vgimg.New(vg.Points(960), vg.Points(720))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(12), PadY: vg.Points(16)}
	canvases := plot.Align([][]*plot.Plot{{lat}, {share}}, tiles, dc)
	lat.Draw(canvases[0][0])
	share.Draw(canvases[1][0])
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addLine(p *plot.Plot, name string, xy plotter.XYs, c color.Color) error {
	if len(xy) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.LineStyle.Color = c
	l.LineStyle.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// marks draws the vertical lines of the failure and of the breaker's opening.
func marks(p *plot.Plot, failAt, openAt time.Duration, lo, hi float64) error {
	for _, m := range []struct {
		name string
		at   time.Duration
		dash []vg.Length
	}{
		{"primary fails (503)", failAt, []vg.Length{vg.Points(4), vg.Points(3)}},
		{"breaker opens", openAt, []vg.Length{vg.Points(1), vg.Points(2)}},
	} {
		if m.at < 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: m.at.Seconds(), Y: lo}, {X: m.at.Seconds(), Y: hi}})
		if err != nil {
			return err
		}
		l.LineStyle.Color = black
		l.LineStyle.Dashes = m.dash
		p.Add(l)
		p.Legend.Add(m.name, l)
	}
	return nil
}

// plainTicks are plot's default ticks labelled without trailing zeros ("25", not "25.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

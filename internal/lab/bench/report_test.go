package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTargets checks the targets against a report made up to meet
// some of them and miss others, and says n/a for what was not measured.
func TestTargets(t *testing.T) {
	point := func(c int, floor, settle, p50Floor, p50Settle, serverCPU float64) Point {
		p := Point{Concurrency: c, SettleVsFloor: ratio(settle, floor)}
		p.Floor.Median = Measurement{PerSecond: floor, P50Ms: p50Floor}
		p.Naive.Median = Measurement{PerSecond: floor / 2}
		p.Settle.Median = Measurement{PerSecond: settle, P50Ms: p50Settle, ServerCPUPerOpUs: serverCPU, CommitsPerOp: 3}
		return p
	}
	rep := &Report{Points: []Point{
		point(1, 1000, 600, 1.0, 1.3, 600),
		point(4, 2000, 1500, 1.8, 3.0, 400),
		point(16, 3000, 3100, 5.0, 6.0, 190),
	}}
	rep.Points[2].OneCall = &OneCall{SettleVsFloor: 1.25}
	want := map[string]string{
		"at 16 clients ≥ 1.0× the SQL floor":             "met",
		"at 64 clients ≥ 1.0× the SQL floor":             "n/a",
		"peak against peak ≥ 1.0×":                       "met", // 3100 against the floor's 3000
		"at 4 clients ≥ 0.8× the SQL floor":              "missed",
		"single-client p50 within 0.4 ms of the floor's": "met",
		"commits per order ≤ 1.5 at 64 clients":          "n/a",
		"server CPU per order ≤ 180 µs at 16 clients":    "missed",
		"one call ≥ 1.2× its floor at 16 clients":        "met",
		"≤ 3 commits per order":                          "met",
	}
	got := map[string]string{}
	for _, tg := range targets(rep) {
		got[tg.Name] = tg.Status
	}
	for name, status := range want {
		if got[name] != status {
			t.Errorf("%s: %q, want %q", name, got[name], status)
		}
	}
}

// TestColdTargets checks the cold start's targets: its first 15 s against
// the warm runs on every cold path, and any sequential scan of a growing
// table in any run, which the medians must not hide.
func TestColdTargets(t *testing.T) {
	run := func(first float64, scans map[string]TableReads) ColdRun {
		return ColdRun{FirstPerSecond: first, SlicesPerSecond: []float64{first / 2, first, first * 1.5}, Tables: scans}
	}
	clean := []ColdRun{run(1900, nil), run(2000, map[string]TableReads{"schema_migrations": {Scans: 2, RowsRead: 40}}), run(1800, nil)}
	scanned := []ColdRun{run(1900, nil), run(900, map[string]TableReads{"orders": {Scans: 1155, RowsRead: 5_200_000}}), run(1800, nil)}
	targetsOf := func(window time.Duration, orders, oneCall []ColdRun) map[string]Target {
		p := Point{Concurrency: 16}
		p.Settle.Median.PerSecond = 2000
		p.Cold = coldSeries(orders, window, 2000)
		if oneCall != nil {
			p.OneCallCold = coldSeries(oneCall, window, 2000)
		}
		got := map[string]Target{}
		for _, tg := range targets(&Report{Points: []Point{p}}) {
			got[tg.Name] = tg
		}
		return got
	}
	const first, noScan = "cold start: first 15 s ≥ 0.9× warm at 16 clients",
		"cold start: no sequential scan of orders, charge_attempts, order_events"
	for _, tc := range []struct {
		name                  string
		window                time.Duration
		orders, oneCall       []ColdRun
		firstStatus, scanStat string
		scanGot               string
	}{
		{"clean", 15 * time.Second, clean, nil, "met", "met", "none in 3 runs"},
		{"one run scanned", 15 * time.Second, scanned, nil, "met", "missed", "orders 1155 (5200000)"},
		{"one call slow", 15 * time.Second, clean, []ColdRun{run(1500, nil), run(1700, nil), run(1600, nil)}, "missed", "met", "none in 6 runs"},
		{"runs shorter than 15 s", 5 * time.Second, clean, nil, "n/a", "met", "none in 3 runs"},
	} {
		got := targetsOf(tc.window, tc.orders, tc.oneCall)
		if got[first].Status != tc.firstStatus {
			t.Errorf("%s: %s: %s (%s), want %s", tc.name, first, got[first].Status, got[first].Got, tc.firstStatus)
		}
		if got[noScan].Status != tc.scanStat || !strings.Contains(got[noScan].Got, tc.scanGot) {
			t.Errorf("%s: %s: %s (%s), want %s with %q", tc.name, noScan, got[noScan].Status, got[noScan].Got, tc.scanStat, tc.scanGot)
		}
	}
	if got := targetsOf(15*time.Second, clean, nil)[first].Got; !strings.Contains(got, "0.95×") || !strings.Contains(got, "950 → 1900 → 2850") {
		t.Errorf("%s: %q, want the median's 0.95× and its slices", first, got)
	}
	for _, tg := range targets(&Report{Points: []Point{{Concurrency: 16}}}) {
		if strings.HasPrefix(tg.Name, "cold start") && tg.Status != "n/a" {
			t.Errorf("%s without a cold series: %s, want n/a", tg.Name, tg.Status)
		}
	}
}

// TestColdSeries takes each figure's median over the runs, a table's
// scans included (as zero in a run that made none).
func TestColdSeries(t *testing.T) {
	runs := []ColdRun{
		{FirstPerSecond: 100, SlicesPerSecond: []float64{50, 100, 150}, Tables: map[string]TableReads{"orders": {Scans: 10, RowsRead: 100, IndexRowsFetched: 5}}},
		{FirstPerSecond: 300, SlicesPerSecond: []float64{250, 300, 350}, Tables: map[string]TableReads{"orders": {Scans: 20, RowsRead: 300, IndexRowsFetched: 9}}},
		{FirstPerSecond: 200, SlicesPerSecond: []float64{150, 200, 250}, Tables: map[string]TableReads{"orders": {IndexRowsFetched: 7}}},
	}
	c := coldSeries(runs, 15*time.Second, 400)
	if c.Median.FirstPerSecond != 200 || c.VsWarm != 0.5 || c.Window != "15s" {
		t.Errorf("median %v/s, %v× warm, window %s; want 200/s, 0.5×, 15s", c.Median.FirstPerSecond, c.VsWarm, c.Window)
	}
	if want := []float64{150, 200, 250}; !slices.Equal(c.Median.SlicesPerSecond, want) {
		t.Errorf("slices %v, want %v", c.Median.SlicesPerSecond, want)
	}
	if got := c.Median.Tables["orders"]; got != (TableReads{Scans: 10, RowsRead: 100, IndexRowsFetched: 7}) {
		t.Errorf("orders' median reads %+v, want 10 scans (100 rows), 7 rows fetched by index", got)
	}
	if got, want := fetchedText(c.Median.Tables, 2), "orders 3.5, charge_attempts 0.0, order_events 0.0"; got != want {
		t.Errorf("rows fetched by index per order: %q, want %q", got, want)
	}
}

// TestFloorSeriesTables: each series measured against its own floor gets
// its table, in its own unit, and a series no point measured gets none.
func TestFloorSeriesTables(t *testing.T) {
	series := func(floor, settle float64) *OneCall {
		return &OneCall{Floor: Series{Median: Measurement{PerSecond: floor}}, Settle: Series{Median: Measurement{PerSecond: settle}},
			SettleVsFloor: settle / floor}
	}
	rep := &Report{Points: []Point{{Concurrency: 16, Refund: series(1000, 610)}, {Concurrency: 64, Refund: series(2000, 1500), Capture: series(1400, 700)}}}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"refunds (RefundOrder of 1", "sql/floor_refund.sql", "commits/refund", "0.61×", "0.75×",
		"captures (CaptureOrder of 1", "commits/capture", "0.50×", "(commits and round trips per capture: floor / settle)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "one call (CreateAndChargeOrder)") {
		t.Errorf("a table for the one-call path, which no point measured:\n%s", out)
	}
}

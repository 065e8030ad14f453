package bench

import "testing"

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

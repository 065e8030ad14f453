package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/lab/bench"
)

// TestBenchSmoke runs `settle bench` in its quick mode, so that the
// benchmark cannot rot: every measurement must complete with positive
// throughput. It asserts nothing about speed.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every series of the benchmark; skipped with -short")
	}
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "bench.json")
	var stdout, stderr bytes.Buffer
	// This test binary is settle when SETTLE_TEST_AS_MAIN=1 (see TestMain).
	srv := bench.Server{Binary: os.Args[0], Env: []string{"SETTLE_TEST_AS_MAIN=1", "SETTLE_LOG_FORMAT=text"}}
	err := benchWith(context.Background(), []string{"-c", "1,4", "-duration", "2s", "-transport-duration", "1s",
		"-runs", "1", "-drain-orders", "800", "-one-call-c", "4", "-refund-c", "4", "-capture-c", "4", "-void-c", "4", "-cold-c", "4", "-json", jsonPath, "-q", "-dir", dir, "-profile"}, srv, &stdout, &stderr)
	if err != nil {
		t.Fatalf("settle bench: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 2 {
		t.Fatalf("report has %d points, want 2 (concurrency 1 and 4)\n%s", len(rep.Points), stdout.String())
	}
	for _, p := range rep.Points {
		for name, s := range map[string]bench.Series{"floor": p.Floor, "naive": p.Naive, "transport": p.Transport, "settle": p.Settle} {
			if s.Median.PerSecond <= 0 || s.Median.Ops <= 0 {
				t.Errorf("concurrency %d: %s: %v ops at %v/s, want some", p.Concurrency, name, s.Median.Ops, s.Median.PerSecond)
			}
		}
	}
	if oc := rep.Points[1].OneCall; oc == nil || oc.Floor.Median.PerSecond <= 0 || oc.Settle.Median.PerSecond <= 0 {
		t.Errorf("one-call path at 4 clients missing or without throughput: %+v", oc)
	} else if oc.Settle.Median.CommitsPerOp > 2.05 {
		t.Errorf("one-call path: %.2f commits per order, want 2", oc.Settle.Median.CommitsPerOp)
	}
	if rep.Points[0].OneCall != nil {
		t.Errorf("one-call path measured at 1 client, not asked for")
	}
	if rf := rep.Points[1].Refund; rf == nil || rf.Floor.Median.PerSecond <= 0 || rf.Settle.Median.PerSecond <= 0 {
		t.Errorf("refund series at 4 clients missing or without throughput: %+v", rf)
	} else if rf.Settle.Median.CommitsPerOp > 2.05 {
		t.Errorf("refunds: %.2f commits per refund, want 2", rf.Settle.Median.CommitsPerOp)
	}
	if cp := rep.Points[1].Capture; cp == nil || cp.Floor.Median.PerSecond <= 0 || cp.Settle.Median.PerSecond <= 0 {
		t.Errorf("capture series at 4 clients missing or without throughput: %+v", cp)
	} else if cp.Settle.Median.CommitsPerOp > 2.05 {
		t.Errorf("captures: %.2f commits per capture, want 2", cp.Settle.Median.CommitsPerOp)
	}
	if vd := rep.Points[1].Void; vd == nil || vd.Floor.Median.PerSecond <= 0 || vd.Settle.Median.PerSecond <= 0 {
		t.Errorf("void series at 4 clients missing or without throughput: %+v", vd)
	} else if vd.Settle.Median.CommitsPerOp > 4.05 || vd.Floor.Median.CommitsPerOp > 4.05 {
		t.Errorf("voids: %.2f commits per hold placed and released (floor %.2f), want 4",
			vd.Settle.Median.CommitsPerOp, vd.Floor.Median.CommitsPerOp)
	}
	// The cold series at 4 clients: the order path and the one-call path,
	// each on a new database, and no sequential scan of a growing table.
	for name, c := range map[string]*bench.Cold{"orders": rep.Points[1].Cold, "one call": rep.Points[1].OneCallCold} {
		if c == nil || c.Median.FirstPerSecond <= 0 || c.Warm <= 0 || c.VsWarm <= 0 || len(c.Runs) != 1 {
			t.Errorf("cold %s at 4 clients missing or without throughput: %+v", name, c)
			continue
		}
		for _, table := range []string{"orders", "charge_attempts", "order_events"} {
			if s := c.Runs[0].Tables[table]; s.Scans > 0 {
				t.Errorf("cold %s: %d sequential scans of %s (%d rows read)", name, s.Scans, table, s.RowsRead)
			}
		}
	}
	if rep.Points[0].Cold != nil {
		t.Errorf("cold series measured at 1 client, not asked for")
	}
	// -profile: a CPU profile of the server at each concurrency (--pprof).
	for _, c := range []string{"1", "4"} {
		if fi, err := os.Stat(filepath.Join(dir, "serve-c"+c+".pprof")); err != nil || fi.Size() == 0 {
			t.Errorf("no CPU profile of the server at %s clients: %v", c, err)
		}
	}
	if d := rep.Drain; d == nil || d.Reconciler.Median.PerSecond <= 0 || d.Floor.Median.PerSecond <= 0 {
		t.Errorf("reconciler drain missing or without throughput: %+v", d)
	}
	// The delivery drain's events are orders' and refunds', and the refund
	// series' own refund events are set aside before it.
	if d := rep.Delivery; d == nil || d.Worker.Median.PerSecond <= 0 || d.Floor.Median.PerSecond <= 0 {
		t.Errorf("delivery drain missing or without throughput: %+v", d)
	}
	// The table has a row per concurrency, with positive throughputs.
	rows := 0
	for line := range strings.Lines(stdout.String()) {
		if strings.HasPrefix(line, "(commits and round trips per order") {
			break // the end of the main table
		}
		f := strings.Fields(line)
		if len(f) < 6 || (f[0] != "1" && f[0] != "4") || f[1] == "clients" {
			continue
		}
		rows++
		// clients, floor/s, naive/s, settle/s, settle refused/s, health/s
		for i, col := range []string{"floor", "naive", "settle", "refused", "health"} {
			v, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil || v < 0 || (v == 0 && col != "refused") {
				t.Errorf("table row %q: %s is %q, want a positive number (refused: not negative)", strings.TrimSpace(line), col, f[i+1])
			}
		}
	}
	if rows != 2 {
		t.Errorf("table has %d rows of concurrency 1 and 4, want 2:\n%s", rows, stdout.String())
	}
}

package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of a benchmark: what was measured, on what, and
// where Settle stands against its targets. It is written as JSON as is.
type Report struct {
	Started           time.Time `json:"started"`
	Concurrency       []int     `json:"concurrency"`
	Duration          string    `json:"duration"`
	TransportDuration string    `json:"transport_duration"`
	Runs              int       `json:"runs"`
	CPUs              int       `json:"cpus"`
	GoVersion         string    `json:"go_version"`
	PostgreSQL        string    `json:"postgresql"`
	Pgbench           string    `json:"pgbench"`
	// RoundTripsCounted says whether pg_stat_statements counted statements.
	RoundTripsCounted bool     `json:"round_trips_counted"`
	ClientProcs       int      `json:"client_gomaxprocs"`
	ServerBinary      string   `json:"server_binary"`
	ServerArgs        []string `json:"server_args,omitempty"`
	ServerEnv         []string `json:"server_env,omitempty"`
	LoadAverageStart  float64  `json:"load_average_start"`
	LoadAverageEnd    float64  `json:"load_average_end"`
	Points            []Point  `json:"points"`
	Drain             *Drain   `json:"reconciler_drain,omitempty"`
	// DeliveryOn says the server delivered its events to a local endpoint
	// during the Settle runs; Delivered counts them.
	DeliveryOn bool           `json:"delivery_on"`
	Delivered  int64          `json:"events_delivered,omitempty"`
	Delivery   *DeliveryDrain `json:"delivery_drain,omitempty"`
	Targets    []Target       `json:"targets"`
}

// Point is one concurrency: each series is the median of its runs.
type Point struct {
	Concurrency int `json:"concurrency"`
	// Floor is pgbench running sql/floor.sql; Naive sql/naive.sql;
	// Transport the load client's gRPC health checks; Settle the load
	// client's orders (CreateOrder + ChargeOrder) against settle serve.
	Floor     Series `json:"floor"`
	Naive     Series `json:"naive"`
	Transport Series `json:"transport"`
	Settle    Series `json:"settle"`
	// SettleVsFloor and SettleVsNaive compare the medians' throughputs.
	SettleVsFloor float64 `json:"settle_vs_floor"`
	SettleVsNaive float64 `json:"settle_vs_naive"`
	// OneCall is the one-call path, where it was measured.
	OneCall *OneCall `json:"one_call,omitempty"`
	// Refund is the refund series, where it was measured.
	Refund *OneCall `json:"refund,omitempty"`
	// Capture is the capture series, where it was measured.
	Capture *OneCall `json:"capture,omitempty"`
	// Void is the series of holds placed and released, where it was
	// measured.
	Void *OneCall `json:"void,omitempty"`
	// Cold is the order path from a cold start, and OneCallCold the
	// one-call path's, where they were measured.
	Cold        *Cold `json:"cold,omitempty"`
	OneCallCold *Cold `json:"one_call_cold,omitempty"`
}

// Cold is a path measured from a cold start: each run on a new, just
// migrated database and a new server, under load from its first second.
type Cold struct {
	// Median takes each figure's median over Runs.
	Median ColdRun   `json:"median"`
	Runs   []ColdRun `json:"runs"`
	// Window is the start judged: 15 s, or the whole run if shorter.
	Window string `json:"window"`
	// Warm is the median throughput of the path's warm runs at the same
	// concurrency; VsWarm compares the cold runs' Window with it.
	Warm   float64 `json:"warm_per_second"`
	VsWarm float64 `json:"first_vs_warm"`
}

// ColdRun is one cold run: the whole run, its throughput over its first
// 15 s (Cold.Window) and over each 5 s, and the reads of each table that
// PostgreSQL made from the server's start to its stop (those read).
type ColdRun struct {
	Measurement
	FirstPerSecond  float64               `json:"first_per_second"`
	SlicesPerSecond []float64             `json:"per_5s_per_second"`
	Tables          map[string]TableReads `json:"tables"`
}

// TableReads is a table's sequential scans and the rows they read, and
// the rows its index scans fetched: a plan that reads a whole table by an
// index (every order of a merchant, say) makes no sequential scan, but
// fetches more rows per order as the table grows.
type TableReads struct {
	Scans            int64 `json:"seq_scans"`
	RowsRead         int64 `json:"seq_rows_read"`
	IndexRowsFetched int64 `json:"index_rows_fetched"`
}

// OneCall is the one-call path at one concurrency: Floor is pgbench running
// sql/floor_one_call.sql (2 commits per order), Settle the load client's
// CreateAndChargeOrder against the same server.
type OneCall struct {
	Floor         Series  `json:"floor"`
	Settle        Series  `json:"settle"`
	SettleVsFloor float64 `json:"settle_vs_floor"`
}

// Series is the runs of one measurement and their median, taken metric by
// metric.
type Series struct {
	Median Measurement   `json:"median"`
	Runs   []Measurement `json:"runs"`
}

// Measurement is one measured run. An op is an order (a health check for the
// transport). CPU is in cores (CPU seconds per second) and in µs per op:
// the client's (pgbench or this process), the settle server's and
// PostgreSQL's; other is the rest of the machine's, the noise.
type Measurement struct {
	Ops       int     `json:"ops"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	// Refused counts the operations the server refused RESOURCE_EXHAUSTED
	// (admission control), which the client retried after the suggested
	// delay; they are not in Ops, PerSecond (goodput) or the latencies.
	Refused          int     `json:"refused,omitempty"`
	RefusedPerSecond float64 `json:"refused_per_second,omitempty"`
	P50Ms            float64 `json:"p50_ms"`
	P95Ms            float64 `json:"p95_ms"`
	P99Ms            float64 `json:"p99_ms"`
	CommitsPerOp     float64 `json:"commits_per_op"`
	// RoundTripsPerOp is StatementsPerOp for Settle (which sends one
	// statement per round trip) and the script's SQL commands for pgbench.
	RoundTripsPerOp float64 `json:"round_trips_per_op"` // -1: not counted
	// StatementsPerOp counts the top-level statements PostgreSQL ran
	// (pg_stat_statements calls), background work included.
	StatementsPerOp  float64 `json:"statements_per_op"` // -1: not counted
	ClientCPUCores   float64 `json:"client_cpu_cores"`
	ServerCPUCores   float64 `json:"server_cpu_cores"`
	DBCPUCores       float64 `json:"db_cpu_cores"`
	OtherCPUCores    float64 `json:"other_cpu_cores"`
	ClientCPUPerOpUs float64 `json:"client_cpu_us_per_op"`
	ServerCPUPerOpUs float64 `json:"server_cpu_us_per_op"`
	DBCPUPerOpUs     float64 `json:"db_cpu_us_per_op"`
	ServerRSSMB      float64 `json:"server_rss_mb,omitempty"`
	ServerPeakRSSMB  float64 `json:"server_peak_rss_mb,omitempty"`
}

// Drain is the reconciler's drain of due orders against its floor.
type Drain struct {
	Orders int `json:"orders"`
	// Reconciler is one in-process reconciler with serve's defaults
	// draining the orders; Floor is pgbench running sql/settle_floor.sql
	// on equivalent rows with as many clients as the reconciler's
	// concurrency.
	Reconciler Series  `json:"reconciler"`
	Floor      Series  `json:"floor"`
	Clients    int     `json:"floor_clients"`
	Ratio      float64 `json:"ratio"`
}

// DeliveryDrain is delivery workers POSTing one merchant's events against
// one worker's SQL floor.
type DeliveryDrain struct {
	Events int `json:"events"`
	// Worker is in-process delivery workers with the defaults POSTing
	// to a local endpoint that verifies each signature; Floor is pgbench
	// running sql/deliver_floor.sql (its lease and record statements,
	// no POST) with one client, Batch events per transaction.
	Worker Series  `json:"worker"`
	Floor  Series  `json:"floor"`
	Batch  int     `json:"batch"`
	Ratio  float64 `json:"ratio"`
	// Workers is each number of workers measured against the same floor;
	// Worker and Ratio are its first's.
	Workers []DeliveryWorkers `json:"workers"`
}

// DeliveryWorkers is a number of delivery workers delivering the events
// together, against one worker's floor.
type DeliveryWorkers struct {
	Workers int     `json:"workers"`
	Series  Series  `json:"series"`
	Ratio   float64 `json:"ratio"`
}

// Target is one of the targets and where Settle stands.
type Target struct {
	Name   string `json:"name"`
	Got    string `json:"got"`
	Status string `json:"status"` // met, missed, or n/a (not measured)
}

// summarize takes the median of each metric over the runs.
func summarize(runs []Measurement) Series {
	med := func(f func(Measurement) float64) float64 { return median(runs, f) }
	m := Measurement{
		Ops:              int(med(func(r Measurement) float64 { return float64(r.Ops) })),
		Seconds:          med(func(r Measurement) float64 { return r.Seconds }),
		PerSecond:        med(func(r Measurement) float64 { return r.PerSecond }),
		Refused:          int(med(func(r Measurement) float64 { return float64(r.Refused) })),
		RefusedPerSecond: med(func(r Measurement) float64 { return r.RefusedPerSecond }),
		P50Ms:            med(func(r Measurement) float64 { return r.P50Ms }),
		P95Ms:            med(func(r Measurement) float64 { return r.P95Ms }),
		P99Ms:            med(func(r Measurement) float64 { return r.P99Ms }),
		CommitsPerOp:     med(func(r Measurement) float64 { return r.CommitsPerOp }),
		RoundTripsPerOp:  med(func(r Measurement) float64 { return r.RoundTripsPerOp }),
		StatementsPerOp:  med(func(r Measurement) float64 { return r.StatementsPerOp }),
		ClientCPUCores:   med(func(r Measurement) float64 { return r.ClientCPUCores }),
		ServerCPUCores:   med(func(r Measurement) float64 { return r.ServerCPUCores }),
		DBCPUCores:       med(func(r Measurement) float64 { return r.DBCPUCores }),
		OtherCPUCores:    med(func(r Measurement) float64 { return r.OtherCPUCores }),
		ClientCPUPerOpUs: med(func(r Measurement) float64 { return r.ClientCPUPerOpUs }),
		ServerCPUPerOpUs: med(func(r Measurement) float64 { return r.ServerCPUPerOpUs }),
		DBCPUPerOpUs:     med(func(r Measurement) float64 { return r.DBCPUPerOpUs }),
		ServerRSSMB:      med(func(r Measurement) float64 { return r.ServerRSSMB }),
		// The peak is the server's high-water mark: the last run's is the
		// point's.
		ServerPeakRSSMB: slices.MaxFunc(runs, func(a, b Measurement) int { return cmpFloat(a.ServerPeakRSSMB, b.ServerPeakRSSMB) }).ServerPeakRSSMB,
	}
	return Series{Median: m, Runs: runs}
}

// median is the median of f over runs.
func median[T any](runs []T, f func(T) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return round((v[len(v)/2-1]+v[len(v)/2])/2, 3)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 3)
}

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// targets says where the report stands against the targets.
func targets(rep *Report) []Target {
	var ts []Target
	add := func(name string, ok bool, measured bool, got string, args ...any) {
		t := Target{Name: name, Got: fmt.Sprintf(got, args...), Status: "n/a"}
		if measured {
			t.Status = map[bool]string{true: "met", false: "missed"}[ok]
		}
		ts = append(ts, t)
	}
	var best, one, four, sixteen, top *Point
	for i := range rep.Points {
		p := &rep.Points[i]
		if best == nil || p.Settle.Median.PerSecond > best.Settle.Median.PerSecond {
			best = p
		}
		switch p.Concurrency {
		case 1:
			one = p
		case 4:
			four = p
		case 16:
			sixteen = p
		case 64:
			top = p
		}
	}
	if best == nil {
		return nil
	}
	vsFloor := func(name string, p *Point, min float64, clients int) {
		if p == nil {
			add(name, false, false, "not measured at %d clients", clients)
			return
		}
		add(name, p.SettleVsFloor >= min, true, "%.2f× (%.0f vs %.0f orders/s)",
			p.SettleVsFloor, p.Settle.Median.PerSecond, p.Floor.Median.PerSecond)
	}
	vsFloor("at 16 clients ≥ 1.0× the SQL floor", sixteen, 1, 16)
	vsFloor("at 64 clients ≥ 1.0× the SQL floor", top, 1, 64)
	bestFloor := slices.MaxFunc(rep.Points, func(a, b Point) int { return cmpFloat(a.Floor.Median.PerSecond, b.Floor.Median.PerSecond) })
	s := best.Settle.Median.PerSecond
	peak := ratio(s, bestFloor.Floor.Median.PerSecond)
	add("peak against peak ≥ 1.0×", peak >= 1, true, "%.2f× (Settle's %.0f/s at %d clients, the floor's %.0f/s at %d)",
		peak, s, best.Concurrency, bestFloor.Floor.Median.PerSecond, bestFloor.Concurrency)
	vsFloor("at 4 clients ≥ 0.8× the SQL floor", four, 0.8, 4)
	add("Settle ≥ 1.1× the naive floor at its best concurrency", best.SettleVsNaive >= 1.1, true,
		"%.2f× at %d clients (%.0f vs %.0f orders/s)", best.SettleVsNaive, best.Concurrency, s, best.Naive.Median.PerSecond)
	if one != nil {
		d := one.Settle.Median.P50Ms - one.Floor.Median.P50Ms
		add("single-client p50 within 0.4 ms of the floor's", d <= 0.4, true,
			"%+.2f ms (%.2f vs %.2f ms)", d, one.Settle.Median.P50Ms, one.Floor.Median.P50Ms)
	} else {
		add("single-client p50 within 0.4 ms of the floor's", false, false, "not measured at 1 client")
	}
	if top != nil {
		r := ratio(top.Settle.Median.PerSecond, s)
		add("at 64 clients ≥ 0.9× Settle's own peak", r >= 0.9, true,
			"%.2f× (%.0f vs %.0f orders/s at %d)", r, top.Settle.Median.PerSecond, s, best.Concurrency)
		add("commits per order ≤ 1.5 at 64 clients", top.Settle.Median.CommitsPerOp <= 1.5, true,
			"%.2f", top.Settle.Median.CommitsPerOp)
	} else {
		add("at 64 clients ≥ 0.9× Settle's own peak", false, false, "not measured at 64 clients")
		add("commits per order ≤ 1.5 at 64 clients", false, false, "not measured at 64 clients")
	}
	// Overload (issue #35): past capacity the server refuses early, and
	// what it admits keeps its pace and a bounded p99.
	for _, p := range rep.Points {
		if p.Concurrency != 256 && p.Concurrency != 1024 {
			continue
		}
		r := ratio(p.Settle.Median.PerSecond, s)
		add(fmt.Sprintf("at %d clients goodput ≥ 0.9× Settle's own peak", p.Concurrency), r >= 0.9, true,
			"%.2f× (%.0f vs %.0f orders/s at %d; p99 %.1f ms; refused %.0f/s)", r, p.Settle.Median.PerSecond, s, best.Concurrency,
			p.Settle.Median.P99Ms, p.Settle.Median.RefusedPerSecond)
	}
	if sixteen != nil {
		add("server CPU per order ≤ 180 µs at 16 clients", sixteen.Settle.Median.ServerCPUPerOpUs <= 180, true,
			"%.0f µs", sixteen.Settle.Median.ServerCPUPerOpUs)
	} else {
		add("server CPU per order ≤ 180 µs at 16 clients", false, false, "not measured at 16 clients")
	}
	if sixteen != nil && sixteen.OneCall != nil {
		oc := sixteen.OneCall
		add("one call ≥ 1.2× its floor at 16 clients", oc.SettleVsFloor >= 1.2, true, "%.2f× (%.0f vs %.0f orders/s)",
			oc.SettleVsFloor, oc.Settle.Median.PerSecond, oc.Floor.Median.PerSecond)
	} else {
		add("one call ≥ 1.2× its floor at 16 clients", false, false, "not measured at 16 clients")
	}
	var commits, trips float64
	for _, p := range rep.Points {
		commits = max(commits, p.Settle.Median.CommitsPerOp)
		trips = max(trips, p.Settle.Median.RoundTripsPerOp)
	}
	// Background work (health pings, reconciler polls) adds a little to
	// each run's counts: 3.05 is still 3 per order.
	add("≤ 3 commits per order", commits <= 3.05, true, "%.2f (most at any concurrency)", commits)
	if rep.RoundTripsCounted {
		add("≤ 3 round trips per order", trips <= 3.05, true, "%.2f statements (most at any concurrency)", trips)
	} else {
		add("≤ 3 round trips per order", false, false, "not counted (pg_stat_statements unavailable or off)")
	}
	var oneGot []string
	oneCommits, oneTrips, oneMeasured := 0.0, 0.0, false
	for _, p := range rep.Points {
		if oc := p.OneCall; oc != nil {
			oneMeasured = true
			oneCommits, oneTrips = max(oneCommits, oc.Settle.Median.CommitsPerOp), max(oneTrips, oc.Settle.Median.RoundTripsPerOp)
			oneGot = append(oneGot, fmt.Sprintf("%.2f× its floor at %d clients (%.0f vs %.0f orders/s)",
				oc.SettleVsFloor, p.Concurrency, oc.Settle.Median.PerSecond, oc.Floor.Median.PerSecond))
		}
	}
	if oneMeasured {
		ok := oneCommits <= 2.05 && (!rep.RoundTripsCounted || oneTrips <= 2.05)
		add("one call: ≤ 2 commits and 2 round trips per order", ok, true, "%.2f commits, %s; %s",
			oneCommits, map[bool]string{true: fmt.Sprintf("%.2f statements", oneTrips), false: "round trips not counted"}[rep.RoundTripsCounted],
			strings.Join(oneGot, ", "))
	} else {
		add("one call: ≤ 2 commits and 2 round trips per order", false, false, "not measured")
	}
	if sixteen != nil && sixteen.Cold != nil {
		cold := []*Cold{sixteen.Cold}
		got := fmt.Sprintf("orders %.2f× (first %s %.0f vs %.0f/s; per 5 s %s)", sixteen.Cold.VsWarm, sixteen.Cold.Window,
			sixteen.Cold.Median.FirstPerSecond, sixteen.Cold.Warm, perSlice(sixteen.Cold.Median.SlicesPerSecond))
		if oc := sixteen.OneCallCold; oc != nil {
			cold = append(cold, oc)
			got += fmt.Sprintf("; one call %.2f× (%.0f vs %.0f/s; per 5 s %s)", oc.VsWarm,
				oc.Median.FirstPerSecond, oc.Warm, perSlice(oc.Median.SlicesPerSecond))
		}
		ok := !slices.ContainsFunc(cold, func(c *Cold) bool { return c.VsWarm < 0.9 })
		// A run shorter than 15 s cannot say how its first 15 s went.
		add("cold start: first 15 s ≥ 0.9× warm at 16 clients", ok, sixteen.Cold.Window == coldWindow.String(), "%s", got)
	} else {
		add("cold start: first 15 s ≥ 0.9× warm at 16 clients", false, false, "not measured at 16 clients")
	}
	// Any scan of a growing table in any cold run misses: the medians
	// could hide a run whose plans went wrong.
	worst, runs := map[string]TableReads{}, 0
	for _, p := range rep.Points {
		for _, c := range []*Cold{p.Cold, p.OneCallCold} {
			if c == nil {
				continue
			}
			for _, r := range c.Runs {
				runs++
				for _, t := range growingTables {
					if s := r.Tables[t]; s.Scans > worst[t].Scans {
						worst[t] = s
					}
				}
			}
		}
	}
	scanName := "cold start: no sequential scan of " + strings.Join(growingTables, ", ")
	if runs > 0 {
		got := fmt.Sprintf("none in %d runs", runs)
		if len(worst) > 0 {
			got = scansText(worst) + fmt.Sprintf(" (the most in one of %d runs)", runs)
		}
		add(scanName, len(worst) == 0, true, "%s", got)
	} else {
		add(scanName, false, false, "not measured")
	}
	if d := rep.Drain; d != nil {
		add("reconciler ≥ 0.8× its settle floor", d.Ratio >= 0.8, true, "%.2f× (%.0f vs %.0f orders/s, %d orders)",
			d.Ratio, d.Reconciler.Median.PerSecond, d.Floor.Median.PerSecond, d.Orders)
	} else {
		add("reconciler ≥ 0.8× its settle floor", false, false, "not measured")
	}
	if top != nil {
		add("server RSS ≤ 100 MB at 64 clients", top.Settle.Median.ServerPeakRSSMB <= 100, true,
			"%.0f MB peak (%.0f MB at the end of a run)", top.Settle.Median.ServerPeakRSSMB, top.Settle.Median.ServerRSSMB)
	} else {
		add("server RSS ≤ 100 MB at 64 clients", false, false, "not measured at 64 clients")
	}
	return ts
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTable writes the report as tables for a terminal.
func (rep *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "settle bench: PostgreSQL %s (fsync, synchronous_commit on), %s; %d CPUs, load average %.2f → %.2f\n",
		rep.PostgreSQL, rep.GoVersion, rep.CPUs, rep.LoadAverageStart, rep.LoadAverageEnd)
	fmt.Fprintf(&b, "each figure: median of %d runs of %s (health checks %s); load client GOMAXPROCS %d", rep.Runs, rep.Duration, rep.TransportDuration, rep.ClientProcs)
	if len(rep.ServerArgs)+len(rep.ServerEnv) > 0 {
		fmt.Fprintf(&b, "; server %s %s", strings.Join(rep.ServerEnv, " "), strings.Join(rep.ServerArgs, " "))
	}
	b.WriteString("\n\n")

	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tfloor/s\tnaive/s\tsettle/s\tsettle refused/s\thealth/s\tsettle÷floor\tsettle÷naive\tcommits/order\tround trips/order\tserver RSS MB\tserver CPU\t")
	for _, p := range rep.Points {
		f, n, t, s := p.Floor.Median, p.Naive.Median, p.Transport.Median, p.Settle.Median
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f×\t%.2f×\t%s\t%s\t%.0f (peak %.0f)\t%.2f cores\t\n",
			p.Concurrency, f.PerSecond, n.PerSecond, s.PerSecond, s.RefusedPerSecond, t.PerSecond, p.SettleVsFloor, p.SettleVsNaive,
			perOrder(f.CommitsPerOp, n.CommitsPerOp, s.CommitsPerOp), perOrder(f.RoundTripsPerOp, n.RoundTripsPerOp, s.RoundTripsPerOp),
			s.ServerRSSMB, s.ServerPeakRSSMB, s.ServerCPUCores)
	}
	tw.Flush()
	b.WriteString("(commits and round trips per order: floor / naive / settle; settle/s is goodput, orders PAID per second, and refused/s the calls the server's admission control refused, which the client retried after the suggested delay)\n\n")

	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency ms p50 / p95 / p99\tfloor\tnaive\tsettle\thealth check\t")
	for _, p := range rep.Points {
		fmt.Fprintf(tw, "%d clients\t%s\t%s\t%s\t%s\t\n", p.Concurrency,
			latencies(p.Floor.Median), latencies(p.Naive.Median), latencies(p.Settle.Median), latencies(p.Transport.Median))
	}
	tw.Flush()
	b.WriteString("\n")

	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CPU µs per order\tfloor: pgbench + PostgreSQL\tnaive: pgbench + PostgreSQL\tsettle: client + server + PostgreSQL\thealth: client + server\tother load\t")
	for _, p := range rep.Points {
		f, n, s, t := p.Floor.Median, p.Naive.Median, p.Settle.Median, p.Transport.Median
		fmt.Fprintf(tw, "%d clients\t%.0f + %.0f\t%.0f + %.0f\t%.0f + %.0f + %.0f\t%.0f + %.0f\t%.2f cores\t\n", p.Concurrency,
			f.ClientCPUPerOpUs, f.DBCPUPerOpUs, n.ClientCPUPerOpUs, n.DBCPUPerOpUs,
			s.ClientCPUPerOpUs, s.ServerCPUPerOpUs, s.DBCPUPerOpUs, t.ClientCPUPerOpUs, t.ServerCPUPerOpUs,
			max(f.OtherCPUCores, n.OtherCPUCores, s.OtherCPUCores))
	}
	tw.Flush()
	b.WriteString("(other load: the most CPU the rest of the machine used during a point's median runs)\n")

	floorSeries(&b, rep.Points, "one call (CreateAndChargeOrder)", "floor_one_call.sql", "order", func(p Point) *OneCall { return p.OneCall })
	floorSeries(&b, rep.Points, "refunds (RefundOrder of 1 from each client's own PAID order)", "floor_refund.sql", "refund",
		func(p Point) *OneCall { return p.Refund })
	floorSeries(&b, rep.Points, "captures (CaptureOrder of 1, not final, from each client's own AUTHORIZED order)", "floor_capture.sql", "capture",
		func(p Point) *OneCall { return p.Capture })
	floorSeries(&b, rep.Points, "holds placed and released (CreateAndChargeOrder, capture manual, then VoidOrder)", "floor_void.sql", "void",
		func(p Point) *OneCall { return p.Void })

	if slices.ContainsFunc(rep.Points, func(p Point) bool { return p.Cold != nil }) {
		b.WriteString("\ncold start (each run on a new, just-migrated database and a new server, under load from its first second):\n")
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "clients\tpath\tfirst/s\tper 5 s\twarm/s\tcold÷warm\tp50 / p95 / p99 ms\tCPU µs per order: client + server + PostgreSQL\tsequential scans (rows read)\trows fetched by index per order\t")
		for _, p := range rep.Points {
			for _, c := range []struct {
				path string
				cold *Cold
			}{{"orders", p.Cold}, {"one call", p.OneCallCold}} {
				if c.cold == nil {
					continue
				}
				m := c.cold.Median
				fmt.Fprintf(tw, "%d\t%s\t%.0f (%s)\t%s\t%.0f\t%.2f×\t%s\t%.0f + %.0f + %.0f\t%s\t%s\t\n", p.Concurrency, c.path,
					m.FirstPerSecond, c.cold.Window, perSlice(m.SlicesPerSecond), c.cold.Warm, c.cold.VsWarm, latencies(m.Measurement),
					m.ClientCPUPerOpUs, m.ServerCPUPerOpUs, m.DBCPUPerOpUs, scansText(m.Tables), fetchedText(m.Tables, m.Ops))
			}
		}
		tw.Flush()
		b.WriteString("(sequential scans: from the server's start to its stop, by table; on Citus every node's shards of it)\n")
	}

	if d := rep.Drain; d != nil {
		fmt.Fprintf(&b, "\nreconciler: drained %d due orders at %.0f orders/s; its settle floor (pgbench, %d clients) %.0f orders/s: %.2f×\n",
			d.Orders, d.Reconciler.Median.PerSecond, d.Clients, d.Floor.Median.PerSecond, d.Ratio)
	}

	if d := rep.Delivery; d != nil {
		fmt.Fprintf(&b, "delivery: %d events; one worker's SQL floor (pgbench, 1 client, %d a batch) %.0f events/s\n",
			d.Events, d.Batch, d.Floor.Median.PerSecond)
		for _, w := range d.Workers {
			fmt.Fprintf(&b, "  %d worker(s) delivered them at %.0f events/s: %.2f× the floor\n", w.Workers, w.Series.Median.PerSecond, w.Ratio)
		}
	}
	if rep.DeliveryOn {
		fmt.Fprintf(&b, "delivery was on during the Settle runs: %d events delivered to a local endpoint\n", rep.Delivered)
	}

	b.WriteString("\ntargets:\n")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, t := range rep.Targets {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.Status, t.Name, t.Got)
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

func perOrder(vs ...float64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		if v < 0 {
			s[i] = "?"
		} else {
			s[i] = fmt.Sprintf("%.2f", v)
		}
	}
	return strings.Join(s, " / ")
}

func latencies(r Measurement) string {
	return fmt.Sprintf("%.2f / %.2f / %.2f", r.P50Ms, r.P95Ms, r.P99Ms)
}

// perSlice lists throughputs per slice.
func perSlice(vs []float64) string {
	if len(vs) == 0 {
		return "-"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf("%.0f", v)
	}
	return strings.Join(s, " → ")
}

// scansText lists the sequential scans of the growing tables (none
// included) and of any other table scanned.
func scansText(scans map[string]TableReads) string {
	var s []string
	for _, t := range growingTables {
		if n := scans[t]; n.Scans > 0 {
			s = append(s, fmt.Sprintf("%s %d (%d)", t, n.Scans, n.RowsRead))
		} else {
			s = append(s, t+" 0")
		}
	}
	for _, t := range slices.Sorted(maps.Keys(scans)) {
		if n := scans[t]; !slices.Contains(growingTables, t) && n.Scans > 0 {
			s = append(s, fmt.Sprintf("%s %d (%d)", t, n.Scans, n.RowsRead))
		}
	}
	return strings.Join(s, ", ")
}

// fetchedText lists the rows fetched by index per op from each growing
// table.
func fetchedText(reads map[string]TableReads, ops int) string {
	s := make([]string, len(growingTables))
	for i, t := range growingTables {
		s[i] = fmt.Sprintf("%s %.1f", t, float64(reads[t].IndexRowsFetched)/float64(max(ops, 1)))
	}
	return strings.Join(s, ", ")
}

// floorSeries writes the table of one series measured against its own SQL
// floor (the one-call path, refunds, captures, voids): what, its floor's script
// and the unit of one operation; nothing when no point measured it.
func floorSeries(b *strings.Builder, points []Point, what, script, unit string, series func(Point) *OneCall) {
	if !slices.ContainsFunc(points, func(p Point) bool { return series(p) != nil }) {
		return
	}
	fmt.Fprintf(b, "\n%s against its own floor (internal/lab/bench/sql/%s):\n", what, script)
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "clients\tfloor/s\tsettle/s\tsettle÷floor\tcommits/%[1]s\tround trips/%[1]s\tp50 / p95 / p99 ms floor\tsettle\tCPU µs per %[1]s: settle client + server + PostgreSQL\t\n", unit)
	for _, p := range points {
		sr := series(p)
		if sr == nil {
			continue
		}
		f, s := sr.Floor.Median, sr.Settle.Median
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.2f×\t%s\t%s\t%s\t%s\t%.0f + %.0f + %.0f\t\n", p.Concurrency, f.PerSecond, s.PerSecond,
			sr.SettleVsFloor, perOrder(f.CommitsPerOp, s.CommitsPerOp), perOrder(f.RoundTripsPerOp, s.RoundTripsPerOp),
			latencies(f), latencies(s), s.ClientCPUPerOpUs, s.ServerCPUPerOpUs, s.DBCPUPerOpUs)
	}
	tw.Flush()
	fmt.Fprintf(b, "(commits and round trips per %s: floor / settle)\n", unit)
}

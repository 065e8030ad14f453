package console

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// gatewayRow is one gateway account on the health page.
type gatewayRow struct {
	Name, Kind, Breaker string
	// Outcomes counts this process's gateway calls by outcome.
	Outcomes string
	Latency  string
}

type healthData struct {
	Gateways []gatewayRow
	Chart    template.HTML
	Problem  string
	Merchant string
}

// breakerStates are settle_gateway_breaker_state's values.
var breakerStates = map[float64]string{0: "closed", 1: "half-open", 2: "open"}

func (c *Console) healthPage(w http.ResponseWriter, r *http.Request, s *session) {
	d := healthData{}
	resp := &settlev1.GetRoutesResponse{}
	// GetRoutes names the server's accounts, in any merchant's answer; a
	// merchant's ops key may read its own merchant's alone, which the
	// page's merchant field names.
	merchant := strings.TrimSpace(r.URL.Query().Get("merchant"))
	if merchant == "" {
		merchant = order.DefaultMerchant
	}
	d.Merchant = merchant
	if err := c.call(r.Context(), r.RemoteAddr, s.key, "GetRoutes", &settlev1.GetRoutesRequest{MerchantId: merchant}, resp); err != nil {
		d.Problem = "The gateway accounts could not be read: " + explain(err)
	}
	fams := c.gather()
	now := time.Now()
	c.chart.sample(now, fams)
	for _, a := range resp.GetAccounts() {
		row := gatewayRow{Name: a.GetName(), Kind: a.GetKind(), Breaker: "closed"}
		if v, ok := gauge(fams["settle_gateway_breaker_state"], a.GetName()); ok {
			row.Breaker = breakerStates[v]
		}
		var parts []string
		for _, oc := range sortedKeys(outcomes(fams["settle_gateway_calls_total"], a.GetName())) {
			parts = append(parts, fmt.Sprintf("%s %d", oc.k, oc.v))
		}
		row.Outcomes = strings.Join(parts, ", ")
		if row.Outcomes == "" {
			row.Outcomes = "no calls yet"
		}
		if sum, n := latency(fams["settle_gateway_call_seconds"], a.GetName()); n > 0 {
			row.Latency = fmt.Sprintf("%.0f ms mean over %d calls", 1000*sum/float64(n), n)
		}
		d.Gateways = append(d.Gateways, row)
	}
	d.Chart = c.chart.svg(now)
	c.show(w, s, "health", "Gateway health", d)
}

// Run samples the gateways' outcome counts every minute until ctx ends,
// for the health page's chart; the page samples too when it is read.
func (c *Console) Run(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.chart.sample(now, c.gather())
		}
	}
}

// gather reads the metrics by family name; none without a registry.
func (c *Console) gather() map[string]*dto.MetricFamily {
	out := map[string]*dto.MetricFamily{}
	if c.metrics == nil {
		return out
	}
	fams, err := c.metrics.Gather()
	if err != nil {
		c.log.Warn("console: read the metrics", "err", err)
	}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func gauge(f *dto.MetricFamily, gw string) (float64, bool) {
	for _, m := range f.GetMetric() {
		if label(m, "gateway") == gw {
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// outcomes sums a gateway's calls (gw "" for every gateway) by outcome.
func outcomes(f *dto.MetricFamily, gw string) map[string]int64 {
	out := map[string]int64{}
	for _, m := range f.GetMetric() {
		if gw == "" || label(m, "gateway") == gw {
			out[label(m, "outcome")] += int64(m.GetCounter().GetValue())
		}
	}
	return out
}

func latency(f *dto.MetricFamily, gw string) (float64, uint64) {
	var sum float64
	var n uint64
	for _, m := range f.GetMetric() {
		if label(m, "gateway") == gw {
			sum += m.GetHistogram().GetSampleSum()
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return sum, n
}

type kv struct {
	k string
	v int64
}

func sortedKeys(m map[string]int64) []kv {
	var out []kv
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].k < out[j].k })
	return out
}

// chartMinutes is how many minutes the chart shows.
const chartMinutes = 30

// throughput is a ring of the gateway calls' totals by outcome, one
// sample per minute; the chart draws the differences.
type throughput struct {
	mu      sync.Mutex
	samples []minuteSample
}

type minuteSample struct {
	minute time.Time
	totals map[string]int64
}

func (t *throughput) sample(now time.Time, fams map[string]*dto.MetricFamily) {
	s := minuteSample{minute: now.Truncate(time.Minute), totals: outcomes(fams["settle_gateway_calls_total"], "")}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.samples); n > 0 && t.samples[n-1].minute.Equal(s.minute) {
		// The minute's last reading stands for it.
		t.samples[n-1] = s
		return
	}
	t.samples = append(t.samples, s)
	if len(t.samples) > chartMinutes+1 {
		t.samples = t.samples[len(t.samples)-chartMinutes-1:]
	}
}

// chartColours are the outcomes' classes in the stylesheet, in the
// order their bars stack.
var chartOutcomes = []string{"succeeded", "declined", "not_sent", "unknown"}

// svg draws the calls per minute as stacked bars, an SVG with a title and
// a text summary for readers that see no image.
func (t *throughput) svg(now time.Time) template.HTML {
	t.mu.Lock()
	samples := append([]minuteSample(nil), t.samples...)
	t.mu.Unlock()
	type bar struct {
		minute time.Time
		counts map[string]int64
		total  int64
	}
	var bars []bar
	var peak int64 = 1
	for i := 1; i < len(samples); i++ {
		b := bar{minute: samples[i].minute, counts: map[string]int64{}}
		for k, v := range samples[i].totals {
			d := v - samples[i-1].totals[k]
			if d > 0 {
				b.counts[k] = d
				b.total += d
			}
		}
		peak = max(peak, b.total)
		bars = append(bars, b)
	}
	const w, h, barW = 600, 120, 600 / chartMinutes
	var sb strings.Builder
	var all int64
	for _, b := range bars {
		all += b.total
	}
	fmt.Fprintf(&sb, `<svg id="throughput" role="img" aria-labelledby="throughput-title" viewBox="0 0 %d %d" width="100%%" preserveAspectRatio="none">`, w, h+20)
	fmt.Fprintf(&sb, `<title id="throughput-title">Gateway calls per minute, last %d minutes: %d calls</title>`, chartMinutes, all)
	fmt.Fprintf(&sb, `<line class="axis" x1="0" y1="%d" x2="%d" y2="%d"/>`, h, w, h)
	start := now.Truncate(time.Minute).Add(-(chartMinutes - 1) * time.Minute)
	for _, b := range bars {
		slot := int(b.minute.Sub(start) / time.Minute)
		if slot < 0 || slot >= chartMinutes {
			continue
		}
		y := h
		for _, oc := range chartOutcomes {
			n := b.counts[oc]
			if n == 0 {
				continue
			}
			bh := int(int64(h) * n / peak)
			y -= bh
			fmt.Fprintf(&sb, `<rect class="bar-%s" x="%d" y="%d" width="%d" height="%d"><title>%s %s: %d</title></rect>`,
				oc, slot*barW+1, y, barW-2, bh, b.minute.UTC().Format("15:04"), oc, n)
		}
	}
	fmt.Fprintf(&sb, `<text x="0" y="%d" class="label">%s</text><text x="%d" y="%d" class="label" text-anchor="end">now (peak %d/min)</text></svg>`,
		h+16, start.UTC().Format("15:04Z"), w, h+16, peak)
	// Every value above is a number, a time or a fixed word: nothing of
	// a client's reaches the SVG.
	return template.HTML(sb.String()) //nolint:gosec // built from numbers and fixed words only
}

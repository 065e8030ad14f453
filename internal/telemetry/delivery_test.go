package telemetry_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/telemetry"
)

// TestDeliveryMetrics: recorded deliveries are counted by result (a failed
// event as failed), a delivered one's latency observed, and the backlog
// exported per merchant when scraped.
func TestDeliveryMetrics(t *testing.T) {
	m := telemetry.NewMetrics()
	m.WatchDeliveries(func(context.Context) ([]order.DeliveryBacklog, error) {
		return []order.DeliveryBacklog{{MerchantID: "m1", Pending: 3, Oldest: 90 * time.Second}}, nil
	})
	m.EventDelivery(order.DeliveryRecord{MerchantID: "m1", Outcome: order.DeliveryDelivered, Latency: 2 * time.Second})
	m.EventDelivery(order.DeliveryRecord{MerchantID: "m1", Outcome: order.DeliveryRetry})
	m.EventDelivery(order.DeliveryRecord{MerchantID: "m1", Outcome: order.DeliveryRetry, Failed: true})
	rec := httptest.NewRecorder()
	m.Handler(func(context.Context) error { return nil }).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`settle_event_deliveries_total{result="delivered"} 1`,
		`settle_event_deliveries_total{result="retry"} 1`,
		`settle_event_deliveries_total{result="failed"} 1`,
		`settle_event_delivery_latency_seconds_count 1`,
		`settle_events_pending{merchant="m1"} 3`,
		`settle_events_oldest_pending_seconds{merchant="m1"} 90`,
		`settle_event_backlog_up 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

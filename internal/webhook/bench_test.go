package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/reconcile"
)

// BenchmarkTimedOutChargeToPaid measures, for a charge whose call times
// out after the gateway has charged, the time from the gateway's outcome
// (the simulator's charge) to the order's PAID: with the simulator's event
// waking the reconciler, against without (the reconciler's first scheduled
// check, reconcile.DefaultSchedule[0] after the call's timeout, found by its
// 1 s poll). Settle's gateway deadline is 1 s here (10 s by default, which
// adds 9 s to the figure without events and nothing to the one with).
// Each iteration is one order; run with -benchtime=Nx:
//
//	go test -run '^$' -bench TimedOutChargeToPaid -benchtime 10x ./internal/webhook
func BenchmarkTimedOutChargeToPaid(b *testing.B) {
	for _, events := range []bool{true, false} {
		b.Run(fmt.Sprintf("events=%v", events), func(b *testing.B) {
			fo := fixtureOptions{gatewayTimeout: time.Second, simHold: 3 * time.Second,
				schedule: reconcile.DefaultSchedule, poll: time.Second}
			if events {
				fo.events = sim.Events{Secrets: []string{refpspSecret}}
			}
			f := newFixture(b, fo)
			f.runReconciler(b)
			ctx := context.Background()
			var took []time.Duration
			for i := 0; b.Loop(); i++ {
				ref := fmt.Sprintf("bench-%v-%d", events, i)
				o, err := f.svc.Create(ctx, merchant, order.NewOrder{MerchantReference: ref,
					Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_timeout"})
				if err != nil {
					b.Fatal(err)
				}
				returned := make(chan struct{})
				go func() {
					defer close(returned)
					_, _, _ = f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: ref + "-request"})
				}()
				for f.order(b, o.ID).State != order.StatePaid {
					time.Sleep(2 * time.Millisecond)
				}
				paid := time.Now()
				ledger := f.sim.Ledger()
				took = append(took, paid.Sub(ledger[len(ledger)-1].Created))
				<-returned
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms-to-paid")
			b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms-to-paid")
		})
	}
}

// BenchmarkSignedEvent measures one signed event's round trip through the
// listener (verify, record in one commit, answer) under a few concurrent
// senders, which is what a gateway's connection is held for: by Little's
// law, connections in use = events per second × this time.
//
//	go test -run '^$' -bench SignedEvent -benchtime 2000x ./internal/webhook
func BenchmarkSignedEvent(b *testing.B) {
	f := newFixture(b, fixtureOptions{})
	var n atomic.Int64
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := refpspEvent(fmt.Sprintf("evt_bench_%d", n.Add(1)), refpsp.EventSucceeded, "not-one-of-ours")
			req, _ := http.NewRequest(http.MethodPost, f.hooks.URL+"/webhooks/refpsp", bytes.NewReader(body))
			req.Header.Set(refpsp.SignatureHeader, refpsp.Sign(body, time.Now(), refpspSecret))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}

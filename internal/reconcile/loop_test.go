package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/reconcile"
)

// refunding makes a PAID order with a REFUNDING refund due now, as a crash
// after the refund's claim leaves it; the simulator has refunded it (an
// answer that was lost).
func (f *fixture) refunding(t *testing.T) (orderID, refundID string) {
	t.Helper()
	ctx := context.Background()
	id, att := f.charging(t, "tok_ok", true)
	res, err := f.gw.Lookup(ctx, order.ChargeRequest{AttemptID: att, OrderID: id, Amount: order.Money{Currency: "GBP", AmountMinor: 700}})
	if err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("the simulator's charge: %+v %v", res, err)
	}
	if _, ok, err := f.store.Settle(ctx, order.Settlement{MerchantID: order.DefaultMerchant, OrderID: id, AttemptID: att, Result: res,
		Event: order.EventSucceed, To: order.StatePaid, Actor: "test"}); err != nil || !ok {
		t.Fatalf("settle to PAID: %v %v", ok, err)
	}
	c, err := f.store.ClaimRefund(ctx, order.RefundClaim{MerchantID: order.DefaultMerchant, OrderID: id, RequestID: "refund-" + id,
		RefundID: order.NewID(), Actor: "test"})
	if err != nil || !c.Claimed {
		t.Fatalf("claim the refund: %v %+v", err, c)
	}
	if res, err := f.gw.Refund(ctx, order.RefundRequest{RefundID: c.Refund.ID, OrderID: id, ChargeAttemptID: att, ChargeID: c.ChargeID,
		Amount: c.Refund.Amount}); err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("the simulator's refund: %+v %v", res, err)
	}
	return id, c.Refund.ID
}

// TestOneLoopOverEveryKind: RunOnce checks the due operations of every
// kind in one loop, so a slow lookup of an attempt holds back no refund
// (the refunds used to be leased and checked only once every attempt of
// the batch had settled).
func TestOneLoopOverEveryKind(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	_, refundID := f.refunding(t)
	slow, slowAtt := f.charging(t, "tok_ok", true)
	gw := &gatedGateway{Client: f.gw, attemptID: slowAtt, gate: make(chan struct{})}
	r := f.reconciler(t, gw, reconcile.Config{})
	done := make(chan error, 1)
	go func() {
		_, err := r.RunOnce(ctx)
		done <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ref, err := f.store.Refund(ctx, order.DefaultMerchant, refundID)
		if err != nil {
			close(gw.gate)
			t.Fatal(err)
		}
		if ref.State == order.RefundSucceeded {
			break
		}
		if time.Now().After(deadline) {
			close(gw.gate)
			t.Fatalf("refund %s is %s while an attempt's lookup is slow, want SUCCEEDED", refundID, ref.State)
		}
	}
	if o := f.order(t, slow); o.State != order.StateCharging {
		t.Fatalf("the slow order is %s before its lookup answered", o.State)
	}
	close(gw.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if o := f.order(t, slow); o.State != order.StatePaid {
		t.Fatalf("the slow order is %s, want PAID", o.State)
	}
}

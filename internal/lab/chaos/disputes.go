package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
)

// Disputes in a run
//
// While the checkouts run, the simulator opens disputes of a share of the
// charges it made (Config.DisputeShare, at a third and at two thirds of
// the run), so that refunds race their openings. Once the checkouts stop,
// it decides every open dispute (half won) and opens a few more, which stay
// open; then it resends every dispute's event without loss, as a gateway's
// dashboard would, so that Settle has heard of each. The harness then asks
// Settle to refund each order whose dispute is open, which it must refuse
// (FAILED_PRECONDITION) and write nothing for; and the check holds
// Settle's disputes to the simulator's ledger (InvDisputes) and every
// refund's claim to the order's disputes (InvDisputeRefund).

const (
	// defaultDisputeShare is Config.DisputeShare's default.
	defaultDisputeShare = 0.1
	// disputeWonShare is the share of the disputes the network decides
	// for the merchant.
	disputeWonShare = 0.5
	// simGateway is the name the run's processes give the simulator's
	// account (SETTLE_DEFAULT_GATEWAY), under which its disputes are
	// recorded.
	simGateway = "refpsp"
	// disputeConvergeTimeout bounds the wait for Settle's disputes to
	// match the ledger once every dispute's event was resent.
	disputeConvergeTimeout = 30 * time.Second
)

// dbDispute is a row of disputes.
type dbDispute struct {
	id, order, attempt, gateway, gatewayID, status, stage string
	amount, withdrawn, reinstated                         int64
}

func loadDisputes(ctx context.Context, pool *pgxpool.Pool) ([]dbDispute, error) {
	return queryAll(ctx, pool, `SELECT id::text, order_id::text, coalesce(attempt_id::text, ''), gateway, gateway_dispute_id,
		status, stage, amount_minor, withdrawn_minor, reinstated_minor FROM disputes ORDER BY gateway_dispute_id`,
		func(r pgx.CollectableRow) (d dbDispute, err error) {
			return d, r.Scan(&d.id, &d.order, &d.attempt, &d.gateway, &d.gatewayID, &d.status, &d.stage, &d.amount,
				&d.withdrawn, &d.reinstated)
		})
}

// openDisputes has the simulator dispute a share of its charges while the
// checkouts run, until stop is closed.
func (h *harness) openDisputes(gw *sim.Sim, stop <-chan struct{}) {
	for i := 1; i <= 2; i++ {
		select {
		case <-stop:
			return
		case <-time.After(h.cfg.Duration / 3):
		}
		h.logf("the gateway opens %d disputes", len(gw.DisputeSome(h.cfg.DisputeShare, "fraudulent")))
	}
}

// settleDisputes ends the run's disputes as the package comment says,
// once the checkouts have stopped and every process runs unarmed.
func (h *harness) settleDisputes(ctx context.Context, gw *sim.Sim, client settlev1.OrderServiceClient) error {
	decided := gw.ResolveOpenDisputes(disputeWonShare)
	opened := gw.DisputeSome(h.cfg.DisputeShare/2, "product_not_received")
	h.logf("the gateway decides %d disputes, opens %d more and resends every dispute's event (%d)",
		len(decided), len(opened), gw.ResendDisputes())

	ledger := gw.Disputes()
	deadline := time.Now().Add(disputeConvergeTimeout)
	var ds []dbDispute
	for {
		var err error
		if ds, err = loadDisputes(ctx, h.pool); err != nil {
			return err
		}
		missing := disputesBehind(ledger, ds)
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			h.logf("%d disputes not yet as the gateway has them after %s: %s", len(missing), disputeConvergeTimeout,
				strings.Join(missing, ", "))
			break // the check reports them
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}

	// A refund during an open dispute is refused, whoever asks.
	asked := map[string]bool{}
	for _, d := range ds {
		if !order.DisputeStatus(d.status).Open() || asked[d.order] {
			continue
		}
		asked[d.order] = true
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := client.RefundOrder(cctx, &settlev1.RefundOrderRequest{OrderId: d.order,
			RequestId: "chaos-dispute-refund-" + d.order, AmountMinor: 1})
		cancel()
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), d.id) {
			h.problem("a refund of order %s during its open dispute %s was answered %v, want FAILED_PRECONDITION naming it",
				d.order, d.id, err)
		}
	}
	h.logf("%d refunds asked of orders with an open dispute", len(asked))
	return nil
}

// disputesBehind names the ledger's disputes that Settle does not have as
// the gateway has them.
func disputesBehind(ledger []sim.Dispute, ds []dbDispute) []string {
	have := map[string]dbDispute{}
	for _, d := range ds {
		if d.gateway == simGateway {
			have[d.gatewayID] = d
		}
	}
	var out []string
	for _, g := range ledger {
		if d, ok := have[g.ID]; !ok || !sameDispute(d, g) {
			out = append(out, g.ID)
		}
	}
	return out
}

// sameDispute says whether Settle's dispute d is the gateway's g.
func sameDispute(d dbDispute, g sim.Dispute) bool {
	return d.status == strings.ToUpper(g.Status) && d.stage == strings.ToUpper(g.Stage) && d.amount == g.Amount &&
		d.withdrawn == g.Withdrawn && d.reinstated == g.Reinstated
}

// keptBy is what the gateway's dispute g took and kept, by Settle's
// reckoning (order.Dispute.ChargedBack).
func keptBy(g sim.Dispute) int64 {
	return order.Dispute{Status: order.DisputeStatus(strings.ToUpper(g.Status)), Withdrawn: g.Withdrawn,
		Reinstated: g.Reinstated}.ChargedBack()
}

// checkDisputes checks InvDisputes and InvDisputeRefund.
func checkDisputes(s snapshot, orders map[string]dbOrder, attempts map[string]dbAttempt, events map[string][]dbEvent) []Violation {
	var out []Violation
	report := func(inv int, orderID, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Order: orderID, Msg: fmt.Sprintf(format, args...)})
	}

	// Settle's disputes and the ledger's, one for one.
	settled := map[string]dbDispute{}
	for _, d := range s.disputes {
		if d.gateway != simGateway {
			continue
		}
		if _, dup := settled[d.gatewayID]; dup {
			report(InvDisputes, d.order, "gateway dispute %s is recorded twice", d.gatewayID)
		}
		settled[d.gatewayID] = d
	}
	open := map[string]int{}     // order → its open disputes at the gateway
	kept := map[string]int64{}   // order → what its disputes kept at the gateway
	keptOf := map[string]int64{} // gateway charge → what its disputes kept
	inLedger := map[string]bool{}
	for _, g := range s.disputeLedger {
		inLedger[g.ID] = true
		keptOf[g.ChargeID] += keptBy(g)
		a, ok := attempts[g.ChargeReference]
		if !ok {
			report(InvDisputes, "", "gateway dispute %s is of charge %s, whose reference %s is no attempt of Settle's",
				g.ID, g.ChargeID, g.ChargeReference)
			continue
		}
		if g.Open() {
			open[a.order]++
		}
		kept[a.order] += keptBy(g)
		d, ok := settled[g.ID]
		switch {
		case !ok:
			report(InvDisputes, a.order, "gateway dispute %s (%s, %s) of attempt %s is not in Settle", g.ID, g.Status, g.Stage, a.id)
		case d.order != a.order || d.attempt != a.id:
			report(InvDisputes, a.order, "gateway dispute %s is of attempt %s; Settle has it on order %s, attempt %q", g.ID, a.id, d.order, d.attempt)
		case !sameDispute(d, g):
			report(InvDisputes, a.order, "dispute %s is %s %s for %d (withdrawn %d, reinstated %d); the gateway has %s %s for %d (%d, %d)",
				d.id, d.status, d.stage, d.amount, d.withdrawn, d.reinstated, g.Status, g.Stage, g.Amount, g.Withdrawn, g.Reinstated)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(settled)) {
		if !inLedger[id] {
			report(InvDisputes, settled[id].order, "Settle has dispute %s, which the gateway never opened", id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(orders)) {
		o := orders[id]
		if o.gateway == adyenGateway {
			continue // the simulator's disputes only
		}
		if o.openDisputes != open[id] || o.chargedBack != kept[id] {
			report(InvDisputes, id, "the order has %d open disputes and %d charged back; the gateway's disputes say %d and %d",
				o.openDisputes, o.chargedBack, open[id], kept[id])
		}
	}
	// At the gateway, no charge paid back more than it took.
	refunded := map[string]int64{} // charge reference → succeeded refunds
	for _, r := range s.refundLedger {
		if r.Status == refpsp.RefundSucceeded {
			refunded[r.ChargeReference] += r.Amount
		}
	}
	for _, c := range s.ledger {
		if keptOf[c.ID] == 0 {
			continue
		}
		took := c.Amount
		if c.Manual {
			took = c.AmountCaptured
		}
		if back := refunded[c.Reference] + keptOf[c.ID]; back > took {
			report(InvDisputes, attempts[c.Reference].order, "charge %s took %d and paid back %d (%d refunded, %d charged back)",
				c.ID, took, back, refunded[c.Reference], keptOf[c.ID])
		}
	}

	// No refund claimed while a dispute of its order was open. The
	// refunds' rows are numbered with the orders' (refund_events.event_id).
	claims := map[string][]int64{} // order → its refunds' claims
	for _, e := range s.refundEvents {
		if e.to == string(order.RefundRefunding) && e.id != 0 {
			claims[e.order] = append(claims[e.order], e.id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(claims)) {
		for _, claim := range claims[id] {
			openAt := map[string]bool{}
			for _, e := range events[id] {
				if e.id > claim {
					break
				}
				if e.dispute != "" {
					openAt[e.dispute] = order.DisputeStatus(e.reason).Open()
				}
			}
			for _, d := range slices.Sorted(maps.Keys(openAt)) {
				if openAt[d] {
					report(InvDisputeRefund, id, "a refund was claimed (event %s) while dispute %s was open", order.EventID(claim), d)
				}
			}
		}
	}
	return out
}

package order

// The lifecycle of an operation at a gateway.
//
// An operation is one call to a gateway whose outcome may be unknown: a
// charge (Charge, CreateAndCharge), the lookup that settles a charge
// waiting for the customer (resume, 3-D Secure), a refund; captures and
// voids are the next. Every kind goes through the same steps, written
// once here (Service.run, and finish):
//
//  1. The gateway call's deadline is fixed before anything is claimed, so
//     that the request cannot reach the gateway later than GatewayTimeout
//     after the operation began, however long this process stalls in
//     between. The reconciler's no-show horizon rests on that bound.
//  2. Claim: one guarded statement of the store takes the operation and
//     gives it a lease (reconcile_at), so that a crash from then on is
//     found by the reconciler. A request that claims nothing (a replay,
//     a state that allows none) is answered from what the claim read.
//  3. Call the gateway, outside any transaction, under the deadline. The
//     call and the settle outlive the client's context: once claimed, a
//     definite answer recorded now saves the reconciler a lookup.
//  4. Settle: a guarded compare-and-set records what the gateway said. An
//     unknown outcome moves nothing: the operation stays in flight
//     (CHARGING, REFUNDING) with a new reconcile_at, and the reconciler
//     (package reconcile) asks the gateway later, by the kind's decision
//     table there.
//  5. A settle that lost its race (the reconciler, a returning customer
//     or a person settled first) changes nothing: the operation is read
//     again and returned as the winner left it.
//
// A kind declares only what differs, as a type with the methods of
// operation: its claim, its call, its settle and its reread (charge.go,
// action.go, refund.go). The Failpoints after-claim and after-gateway fire between
// the steps, for every kind alike.

import (
	"context"
	"time"

	"github.com/settlepay/settle/internal/failpoint"
)

// operation is what one kind of operation at a gateway declares for the
// lifecycle. Its methods keep what they learn (the order, and the
// attempt or refund) in the operation, for its caller to return.
type operation interface {
	// claim takes the operation in one guarded statement of the store. It
	// reports false when the request claims nothing; the operation then
	// holds the answer (or the error says why there is none).
	claim(ctx context.Context) (bool, error)
	// claimed logs the claim's transition.
	claimed(ctx context.Context)
	// call makes the gateway call; ctx carries the deadline.
	call(ctx context.Context) (Result, error)
	settler
}

// settler is the end of an operation's lifecycle: settling what the
// gateway said, and reading it again on a lost race.
type settler interface {
	// settle records what the gateway said (res, or err when it could not
	// say) under the operation's guard. It reports false, having changed
	// nothing, when the guard did not hold.
	settle(ctx context.Context, res Result, err error) (bool, error)
	// reread reads the operation as whoever settled it first left it.
	reread(ctx context.Context) error
}

// run takes op through the whole lifecycle: deadline, claim, call, settle,
// and the reread of a lost race.
func (s *Service) run(ctx context.Context, op operation) error {
	deadline := time.Now().Add(s.cfg.GatewayTimeout)
	if claimed, err := op.claim(ctx); err != nil || !claimed {
		return err
	}
	s.cfg.Failpoint(failpoint.AfterClaim)
	op.claimed(ctx)
	ctx = context.WithoutCancel(ctx)
	cctx, cancel := context.WithDeadline(ctx, deadline)
	res, err := op.call(cctx)
	cancel()
	s.cfg.Failpoint(failpoint.AfterGateway)
	return finish(ctx, op, res, err)
}

// finish settles what the gateway said about op, and reads op again when
// another settled it first.
func finish(ctx context.Context, op settler, res Result, gerr error) error {
	won, err := op.settle(ctx, res, gerr)
	if err != nil || won {
		return err
	}
	return op.reread(ctx)
}

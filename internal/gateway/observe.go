package gateway

import (
	"context"

	"github.com/settlepay/settle/internal/order"
)

// The operations an adapter reports to its Observer.
const (
	OpCharge       = "charge"
	OpLookup       = "lookup"
	OpRefund       = "refund"
	OpLookupRefund = "lookup_refund"
	// OpCapture, OpLookupCapture, OpVoid and OpLookupVoid are the
	// operations of a gateway that authorizes (an order.Capturer).
	OpCapture       = "capture"
	OpLookupCapture = "lookup_capture"
	OpVoid          = "void"
	OpLookupVoid    = "lookup_void"
	// OpGetDispute and OpAcceptDispute are the operations of a gateway
	// whose disputes can be read and accepted (an order.DisputeGateway);
	// Call.AttemptID is the gateway's dispute id.
	OpGetDispute    = "get_dispute"
	OpAcceptDispute = "accept_dispute"
	// OpListCharges and OpListRefunds are the reads of one page of a
	// gateway's charges or refunds (an order.ChargeLister; for Adyen, the
	// download of one day's report), for the audit; their Call names no
	// order and no attempt.
	OpListCharges = "list_charges"
	OpListRefunds = "list_refunds"
)

// Call is one operation of an adapter at its gateway, as it is observed.
type Call struct {
	// Op is one of the Op constants.
	Op      string
	OrderID string
	// AttemptID is the attempt's id, or the refund's, the capture's or
	// the void's for their operations, and the gateway's dispute id for
	// OpGetDispute and OpAcceptDispute.
	AttemptID string
}

// Observer watches an adapter's calls (telemetry counts, times and traces
// them). Each adapter calls Start as an operation begins and the function
// it returns with the operation's result, so that the adapter itself is
// what Settle wires, every capability of it in sight, and no wrapper
// stands between the charge path and the adapter.
type Observer interface {
	// Start returns the context the call runs in (carrying a span, say)
	// and the function to tell of its result, once.
	Start(ctx context.Context, call Call) (context.Context, func(order.Result, error))
}

// Unobserved is the Observer of an adapter configured with none.
var Unobserved Observer = unobserved{}

type unobserved struct{}

func (unobserved) Start(ctx context.Context, _ Call) (context.Context, func(order.Result, error)) {
	return ctx, func(order.Result, error) {}
}

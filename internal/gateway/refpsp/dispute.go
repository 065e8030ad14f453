package refpsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Disputes
//
// When a cardholder disputes a succeeded charge, the gateway tells of it
// with events whose data carries the dispute object beside the charge:
//
//	{"id": "evt_...", "type": "dispute.opened", "created": <unix seconds>,
//	 "data": {"object": <the charge object>, "dispute": <the dispute object>}}
//
//	dispute.opened   a dispute (or an inquiry) was opened
//	dispute.updated  its status, stage or amounts changed
//	dispute.closed   it ended: won, lost or (an inquiry) warning_closed
//
// The dispute object:
//
//	{"id": "dp_...", "charge_id": "<the charge's id>", "charge_reference": "<attempt id>",
//	 "status": "needs_response", "stage": "chargeback", "amount": 1250, "currency": "GBP",
//	 "reason": "fraudulent", "network_reason_code": "10.4", "due_by": "<RFC 3339>",
//	 "amount_withdrawn": 1250, "amount_reinstated": 0, "fee": 1500}
//
// status is needs_response, under_review, won, lost or warning_closed;
// stage is inquiry, chargeback or pre_arbitration; amounts are in minor
// units, withdrawn and reinstated the totals so far. A status or a stage
// outside these is refused with an error naming it. The gateway reads
// and accepts disputes too:
//
//	GET  /v1/disputes/{id}          200 the dispute object, 404 when there is none
//	POST /v1/disputes/{id}/accept   200 the dispute object after: an open dispute is
//	                                lost; a closed one is answered as it stands
//
// The Client is therefore an order.DisputeGateway: an event is a hint,
// and the read decides.

// The types of a dispute's events.
const (
	EventDisputeOpened  = "dispute.opened"
	EventDisputeUpdated = "dispute.updated"
	EventDisputeClosed  = "dispute.closed"
)

// The statuses of a dispute object.
const (
	DisputeNeedsResponse = "needs_response"
	DisputeUnderReview   = "under_review"
	DisputeWon           = "won"
	DisputeLost          = "lost"
	DisputeWarningClosed = "warning_closed"
)

// The stages of a dispute object.
const (
	DisputeStageInquiry        = "inquiry"
	DisputeStageChargeback     = "chargeback"
	DisputeStagePreArbitration = "pre_arbitration"
)

// DisputeObject is the gateway's dispute, as its events and its reads
// carry it.
type DisputeObject struct {
	ID string `json:"id"`
	// ChargeID and ChargeReference name the disputed charge: its id and
	// its reference (the attempt id).
	ChargeID        string `json:"charge_id"`
	ChargeReference string `json:"charge_reference"`
	// Status and Stage are among the Dispute constants.
	Status            string    `json:"status"`
	Stage             string    `json:"stage"`
	Amount            int64     `json:"amount"`
	Currency          string    `json:"currency"`
	Reason            string    `json:"reason"`
	NetworkReasonCode string    `json:"network_reason_code,omitempty"`
	DueBy             time.Time `json:"due_by,omitzero"`
	AmountWithdrawn   int64     `json:"amount_withdrawn"`
	AmountReinstated  int64     `json:"amount_reinstated"`
	Fee               int64     `json:"fee,omitempty"`
}

var disputeStatuses = map[string]order.DisputeStatus{
	DisputeNeedsResponse: order.DisputeNeedsResponse,
	DisputeUnderReview:   order.DisputeUnderReview,
	DisputeWon:           order.DisputeWon,
	DisputeLost:          order.DisputeLost,
	DisputeWarningClosed: order.DisputeWarningClosed,
}

var disputeStages = map[string]order.DisputeStage{
	DisputeStageInquiry:        order.DisputeInquiry,
	DisputeStageChargeback:     order.DisputeChargeback,
	DisputeStagePreArbitration: order.DisputePreArbitration,
}

// Dispute reads the object as Settle's words: an error names a status or
// a stage Settle does not know, or a field missing.
func (d DisputeObject) Dispute() (order.GatewayDispute, error) {
	status, ok := disputeStatuses[d.Status]
	if !ok {
		return order.GatewayDispute{}, fmt.Errorf("dispute %s has status %q, which Settle does not know", clip(d.ID), clip(d.Status))
	}
	stage, ok := disputeStages[d.Stage]
	if !ok {
		return order.GatewayDispute{}, fmt.Errorf("dispute %s has stage %q, which Settle does not know", clip(d.ID), clip(d.Stage))
	}
	if d.ID == "" || d.ChargeID == "" || d.Amount <= 0 || d.Currency == "" || d.AmountWithdrawn < 0 || d.AmountReinstated < 0 {
		return order.GatewayDispute{}, fmt.Errorf("dispute %q lacks its id, charge, amount or currency", clip(d.ID))
	}
	return order.GatewayDispute{
		ID: d.ID, Status: status, Stage: stage,
		Amount: order.Money{Currency: d.Currency, AmountMinor: d.Amount},
		Reason: clip(d.Reason), NetworkReasonCode: clip(d.NetworkReasonCode),
		DueBy: d.DueBy.UTC(), Withdrawn: d.AmountWithdrawn, Reinstated: d.AmountReinstated, Fee: d.Fee,
	}, nil
}

var _ order.DisputeGateway = (*Client)(nil)

// GetDispute is order.DisputeGateway's: GET /v1/disputes/{id}.
func (c *Client) GetDispute(ctx context.Context, id string) (d order.GatewayDispute, err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: gateway.OpGetDispute, AttemptID: id})
	defer func() { done(disputeResult(err), err) }()
	d, err = c.dispute(ctx, http.MethodGet, id, "")
	if err != nil {
		err = fmt.Errorf("refpsp: get dispute %s: %w", clip(id), err)
	}
	return d, err
}

// AcceptDispute is order.DisputeGateway's: POST /v1/disputes/{id}/accept,
// which the gateway answers with the dispute after (lost, or as it stood
// when it had closed already).
func (c *Client) AcceptDispute(ctx context.Context, id string) (d order.GatewayDispute, err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: gateway.OpAcceptDispute, AttemptID: id})
	defer func() { done(disputeResult(err), err) }()
	d, err = c.dispute(ctx, http.MethodPost, id, "accept")
	if err != nil {
		err = fmt.Errorf("refpsp: accept dispute %s: %w", clip(id), err)
	}
	return d, err
}

// dispute sends a dispute's read or accept and reads the answer.
func (c *Client) dispute(ctx context.Context, method, id, verb string) (order.GatewayDispute, error) {
	if id == "" {
		return order.GatewayDispute{}, errors.New("a dispute id is required")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := c.disputesURL.JoinPath(id)
	if verb != "" {
		u = u.JoinPath(verb)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return order.GatewayDispute{}, fmt.Errorf("build request: %w", err)
	}
	if method == http.MethodPost {
		// Accepting twice is answered as once: the key spares nothing but
		// is sent as with every write.
		hreq.Header.Set("Idempotency-Key", id+":"+verb)
	}
	ex := c.do(hreq)
	switch {
	case ex.status == 0:
		return order.GatewayDispute{}, fmt.Errorf("no answer: %w", ex.err)
	case ex.status == http.StatusNotFound:
		return order.GatewayDispute{}, errors.New("the gateway has no such dispute (404)")
	case ex.status != http.StatusOK:
		return order.GatewayDispute{}, fmt.Errorf("gateway answered %d", ex.status)
	case ex.err != nil:
		return order.GatewayDispute{}, fmt.Errorf("gateway answered 200 but the body could not be read: %w", ex.err)
	}
	var obj DisputeObject
	if err := json.Unmarshal(ex.body, &obj); err != nil {
		return order.GatewayDispute{}, errors.New("gateway answered 200 with a body that is not a dispute object")
	}
	if obj.ID != id {
		return order.GatewayDispute{}, fmt.Errorf("gateway answered with dispute %q", clip(obj.ID))
	}
	return obj.Dispute()
}

// disputeResult is what a dispute call's Observer is told.
func disputeResult(err error) order.Result {
	if err != nil {
		return order.Result{Outcome: order.OutcomeUnknown}
	}
	return order.Result{Outcome: order.OutcomeSucceeded}
}

package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/dispute"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Disputes
//
// Stripe tells of a dispute with the charge.dispute.* events, each
// carrying the Dispute (dp_... or du_...), signed and verified like every other
// event (events.go), and deduplicated by the event's id:
//
//	charge.dispute.created            a dispute (or an inquiry) was opened
//	charge.dispute.updated            its evidence or status changed
//	charge.dispute.closed             won, lost (accepted included) or warning_closed
//	charge.dispute.funds_withdrawn    the disputed amount left the balance
//	charge.dispute.funds_reinstated   it came back
//
// The event becomes an order.GatewayEvent with Dispute set, about the
// disputed PaymentIntent: ChargeID is its pi_... id, which Settle records
// as the attempt's gateway_charge_id (a Dispute does not carry the
// PaymentIntent's metadata, so AttemptID is empty). A dispute of a Charge
// made without a PaymentIntent is not Settle's, and its event is ignored.
// Stripe's statuses map onto Settle's so:
//
//	Stripe                                   status           stage
//	warning_needs_response                   NEEDS_RESPONSE   INQUIRY
//	warning_under_review                     UNDER_REVIEW     INQUIRY
//	warning_closed                           WARNING_CLOSED   INQUIRY
//	needs_response                           NEEDS_RESPONSE   CHARGEBACK
//	under_review                             UNDER_REVIEW     CHARGEBACK
//	won                                      WON              CHARGEBACK
//	lost                                     LOST             CHARGEBACK
//
// A status Settle does not know is refused with an error naming it, never
// guessed. DueBy is evidence_details.due_by (zero when the network allows
// no response). Withdrawn and Reinstated are read from the Dispute's
// balance_transactions: a negative one withdrew, a positive one
// reinstated; Fee is what the withdrawals' fees came to less what the
// reinstatements gave back. A balance transaction in another currency
// than the dispute's (an account that settles in another currency) counts
// as the dispute's amount, without its fee, which is then in the other
// currency.
//
// The Gateway is an order.DisputeGateway: GetDispute retrieves the
// Dispute (GET /v1/disputes/<id>), and AcceptDispute closes it (POST
// /v1/disputes/<id>/close, which Stripe records as lost). For Stripe an
// event is a hint; the read decides.

// disputeEvents are the Stripe events about a dispute.
var disputeEvents = map[string]bool{
	"charge.dispute.created":          true,
	"charge.dispute.updated":          true,
	"charge.dispute.closed":           true,
	"charge.dispute.funds_withdrawn":  true,
	"charge.dispute.funds_reinstated": true,
}

var _ order.DisputeGateway = (*Gateway)(nil)

// disputes is the Disputes API client, on the PaymentIntents' backend.
func (g *Gateway) disputes() dispute.Client {
	return dispute.Client{B: g.intents.B, Key: g.intents.Key}
}

// disputeEvent reads a verified charge.dispute.* event.
func disputeEvent(e stripego.Event) (order.GatewayEvent, error) {
	var d stripego.Dispute
	if err := json.Unmarshal(e.Data.Raw, &d); err != nil || d.ID == "" {
		return order.GatewayEvent{}, errors.New("stripe: malformed dispute")
	}
	if d.PaymentIntent == nil || d.PaymentIntent.ID == "" {
		// Settle charges only through PaymentIntents: a dispute of a bare
		// Charge is another system's on the same account. Refusing it
		// would have Stripe send it again for days.
		return order.GatewayEvent{}, order.ErrEventIgnored
	}
	gd, pi, err := fromDispute(&d)
	if err != nil {
		return order.GatewayEvent{}, err
	}
	return order.GatewayEvent{
		ID: e.ID, Type: string(e.Type), ObjectID: d.ID, ChargeID: pi, Dispute: &gd,
	}, nil
}

// fromDispute reads a Dispute as Settle's words, and the id of the
// PaymentIntent it disputes.
func fromDispute(d *stripego.Dispute) (order.GatewayDispute, string, error) {
	if d == nil || d.ID == "" {
		return order.GatewayDispute{}, "", errors.New("stripe: the answer holds no Dispute")
	}
	if d.PaymentIntent == nil || !strings.HasPrefix(d.PaymentIntent.ID, "pi_") {
		// Settle charges only through PaymentIntents: a dispute of a bare
		// Charge is not about any attempt of Settle's.
		return order.GatewayDispute{}, "", fmt.Errorf("stripe: dispute %s names no PaymentIntent", clip(d.ID))
	}
	status, stage, err := disputeStatus(d.Status)
	if err != nil {
		return order.GatewayDispute{}, "", fmt.Errorf("stripe: dispute %s: %w", clip(d.ID), err)
	}
	currency := strings.ToUpper(string(d.Currency))
	if _, ok := order.CurrencyExponent(currency); !ok {
		return order.GatewayDispute{}, "", fmt.Errorf("stripe: dispute %s is in %q, not an ISO 4217 currency", clip(d.ID), clip(currency))
	}
	gd := order.GatewayDispute{
		ID: d.ID, Status: status, Stage: stage,
		Amount:            order.Money{Currency: currency, AmountMinor: minorAmount(currency, d.Amount)},
		Reason:            clip(string(d.Reason)),
		NetworkReasonCode: clip(d.NetworkReasonCode),
	}
	if d.EvidenceDetails != nil && d.EvidenceDetails.DueBy > 0 {
		gd.DueBy = time.Unix(d.EvidenceDetails.DueBy, 0).UTC()
	}
	for _, bt := range d.BalanceTransactions {
		if bt == nil {
			continue
		}
		same := strings.EqualFold(string(bt.Currency), string(d.Currency))
		amount := d.Amount
		if same {
			amount = bt.Amount
			if amount < 0 {
				amount = -amount
			}
			gd.Fee += minorAmount(currency, bt.Fee)
		}
		switch {
		case bt.Amount < 0:
			gd.Withdrawn += minorAmount(currency, amount)
		case bt.Amount > 0:
			gd.Reinstated += minorAmount(currency, amount)
		}
	}
	return gd, d.PaymentIntent.ID, nil
}

// disputeStatus maps a Stripe dispute status onto Settle's status and
// stage.
func disputeStatus(s stripego.DisputeStatus) (order.DisputeStatus, order.DisputeStage, error) {
	switch s {
	case stripego.DisputeStatusWarningNeedsResponse:
		return order.DisputeNeedsResponse, order.DisputeInquiry, nil
	case stripego.DisputeStatusWarningUnderReview:
		return order.DisputeUnderReview, order.DisputeInquiry, nil
	case stripego.DisputeStatusWarningClosed:
		return order.DisputeWarningClosed, order.DisputeInquiry, nil
	case stripego.DisputeStatusNeedsResponse:
		return order.DisputeNeedsResponse, order.DisputeChargeback, nil
	case stripego.DisputeStatusUnderReview:
		return order.DisputeUnderReview, order.DisputeChargeback, nil
	case stripego.DisputeStatusWon:
		return order.DisputeWon, order.DisputeChargeback, nil
	case stripego.DisputeStatusLost:
		return order.DisputeLost, order.DisputeChargeback, nil
	default:
		return "", "", fmt.Errorf("status %q is not one Settle knows", clip(string(s)))
	}
}

// GetDispute is order.DisputeGateway's: it retrieves the Dispute id.
func (g *Gateway) GetDispute(ctx context.Context, id string) (gd order.GatewayDispute, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpGetDispute, AttemptID: id})
	defer func() { done(disputeResult(err), err) }()
	if !strings.HasPrefix(id, "dp_") && !strings.HasPrefix(id, "du_") {
		return order.GatewayDispute{}, fmt.Errorf("stripe: get dispute %q: not a Stripe dispute id (dp_... or du_...)", clip(id))
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	d, err := g.getDispute(ctx, id)
	if err != nil {
		return order.GatewayDispute{}, fmt.Errorf("stripe: get dispute %s: %w", clip(id), err)
	}
	gd, _, err = fromDispute(d)
	return gd, err
}

// AcceptDispute is order.DisputeGateway's: it closes the Dispute id,
// which Stripe records as lost. A dispute already closed is returned as
// it stands, whether it was accepted, won or lost: accepting twice is
// not an error, and what Stripe says decides.
func (g *Gateway) AcceptDispute(ctx context.Context, id string) (gd order.GatewayDispute, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpAcceptDispute, AttemptID: id})
	defer func() { done(disputeResult(err), err) }()
	if !strings.HasPrefix(id, "dp_") && !strings.HasPrefix(id, "du_") {
		return order.GatewayDispute{}, fmt.Errorf("stripe: accept dispute %q: not a Stripe dispute id (dp_... or du_...)", clip(id))
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	d, err := g.getDispute(ctx, id)
	if err != nil {
		return order.GatewayDispute{}, fmt.Errorf("stripe: accept dispute %s: %w", clip(id), err)
	}
	if gd, _, err = fromDispute(d); err != nil || !gd.Status.Open() {
		return gd, err
	}
	p := &stripego.DisputeParams{}
	p.Context = ctx
	// Close moves no money that the dispute has not already taken; the
	// key only spares Stripe a second close of a retried request.
	p.SetIdempotencyKey(id + ":close")
	d, cerr := g.disputes().Close(id, p)
	if cerr != nil {
		// Closed meanwhile (by the Dashboard, or a lost answer of ours):
		// the dispute as it now stands decides.
		d, err = g.getDispute(ctx, id)
		if err != nil {
			return order.GatewayDispute{}, fmt.Errorf("stripe: accept dispute %s: %w", clip(id), errors.Join(g.disputeError(cerr), err))
		}
		if gd, _, err = fromDispute(d); err == nil && gd.Status.Open() {
			err = fmt.Errorf("stripe: accept dispute %s: %w", clip(id), g.disputeError(cerr))
		}
		return gd, err
	}
	gd, _, err = fromDispute(d)
	return gd, err
}

// getDispute retrieves a Dispute, its errors described without Stripe's
// text that might quote the key.
func (g *Gateway) getDispute(ctx context.Context, id string) (*stripego.Dispute, error) {
	p := &stripego.DisputeParams{}
	p.Context = ctx
	d, err := g.disputes().Get(id, p)
	if err != nil {
		return nil, g.disputeError(err)
	}
	return d, nil
}

// disputeError describes an error of a dispute call.
func (g *Gateway) disputeError(err error) error {
	var se *stripego.Error
	if errors.As(err, &se) {
		return errors.New(g.describe(se))
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return fmt.Errorf("no answer from Stripe: %w", uerr)
	}
	return errors.New("the answer from Stripe could not be decoded")
}

// disputeResult is what a dispute call's Observer is told: succeeded when
// Stripe answered with a dispute Settle could read, unknown otherwise.
func disputeResult(err error) order.Result {
	if err != nil {
		return order.Result{Outcome: order.OutcomeUnknown}
	}
	return order.Result{Outcome: order.OutcomeSucceeded}
}

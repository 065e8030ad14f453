package order

import "strings"

// The cascade: what an attempt's proven outcome lets the charge path do
// next, for an order that may be charged on several gateways (its
// Routes). A cascade to another gateway is safe only when no money can
// have moved at the gateway before: the attempt was never sent, the
// gateway refused Settle's request before it authorized anything, or it
// declined for a technical reason of its own or of the card network's
// that says nothing of the card. Everything else stays where it is: an
// issuer's decline is the customer's answer, a card reported lost,
// stolen or fraudulent is never tried anywhere again, a request for
// authentication is answered on the same gateway, and an unknown outcome
// is never followed by an attempt anywhere: the order stays CHARGING on
// its gateway until the reconciler proves what became of it.
//
// The decline codes are those the adapters report in Result.DeclineCode:
// Stripe's decline_code (or its error code), Adyen's refusalReason in
// snake case (package adyen's refusals), a refpsp gateway's decline_code
// verbatim, and "rejected_<code>" for a request a gateway refused before
// it executed it (every adapter's 4xx other than 429).

// Cascade is what the charge path may do after an attempt.
type Cascade string

// The cascade's decisions.
const (
	// CascadeDone: the attempt succeeded (or authorized); nothing follows.
	CascadeDone Cascade = "done"
	// CascadeNext: a proven non-charge that says nothing of the card: the
	// next eligible gateway may be tried.
	CascadeNext Cascade = "next"
	// CascadeStop: the issuer declined; the order waits for the customer,
	// and a new charge goes to the same gateway.
	CascadeStop Cascade = "stop"
	// CascadeStepUp: the gateway wants the customer to authenticate; it is
	// done on the same gateway (REQUIRES_ACTION, or a new charge with the
	// customer present), never by going to another.
	CascadeStepUp Cascade = "step_up"
	// CascadeNever: the card is reported lost, stolen, picked up or
	// fraudulent: it is tried on no other gateway.
	CascadeNever Cascade = "never"
	// CascadeWait: the outcome is unknown; the order stays CHARGING on the
	// attempt's gateway until the reconciler proves the outcome.
	CascadeWait Cascade = "wait"
)

// cascadeRule is one row of the cascade table: a decline code, the
// decision, and where the code's meaning is documented.
type cascadeRule struct {
	code   string
	action Cascade
	source string
}

// Sources of the table's rows.
const (
	srcStripe = "Stripe, Decline codes (docs.stripe.com/declines/codes)"
	srcAdyen  = "Adyen, Refusal reasons (docs.adyen.com/development-resources/refusal-reasons), refusalReasonCode "
	srcVisa   = "ISO 8583 / Visa response code "
	srcSettle = "Settle: "
)

// cascadeTable is the decision for each known decline code. A code not
// in it stops (CascadeStop): an unknown reason is treated as the issuer's,
// never as a licence to try elsewhere.
var cascadeTable = []cascadeRule{
	// Technical declines: the issuer or the network could not decide.
	{"processing_error", CascadeNext, srcStripe + ": an error occurred while processing the card"},
	{"issuer_not_available", CascadeNext, srcStripe + ": the card issuer could not be reached"},
	{"try_again_later", CascadeNext, srcStripe + ": declined for an unknown reason, may succeed if retried"},
	{"reenter_transaction", CascadeNext, srcStripe + ": the issuer could not process the payment"},
	{"issuer_unavailable", CascadeNext, srcAdyen + "9: it is not possible to contact the shopper's bank"},
	{"acquirer_error", CascadeNext, srcAdyen + "4: an error on the acquirer's end"},
	{"not_submitted", CascadeNext, srcAdyen + "21: the transaction was not submitted correctly for processing"},
	{"error", CascadeNext, "Adyen, resultCode Error: the payment failed with an error before it was authorized"},
	{"issuer_or_switch_inoperative", CascadeNext, srcVisa + "91: issuer or switch inoperative"},
	{"canceled_unconfirmed", CascadeNext, srcSettle + "Stripe's Lookup canceled a PaymentIntent never confirmed"},
	{"gateway_busy", CascadeNext, srcSettle + "the gateway's request budget refused the call before anything was sent"},
	{"gateway_not_configured", CascadeNext, srcSettle + "the gateway is not configured on this server; nothing was sent"},

	// Issuer declines: the customer's answer.
	{"insufficient_funds", CascadeStop, srcStripe + ": insufficient funds"},
	{"do_not_honor", CascadeStop, srcStripe + ": declined for an unknown reason; the customer should call the issuer"},
	{"generic_decline", CascadeStop, srcStripe + ": declined for an unknown reason"},
	{"card_declined", CascadeStop, srcStripe + ": card_error without a decline code"},
	{"expired_card", CascadeStop, srcStripe + ": the card has expired; " + srcAdyen + "6"},
	{"incorrect_cvc", CascadeStop, srcStripe + ": the CVC is incorrect"},
	{"cvc_declined", CascadeStop, srcAdyen + "24: CVC declined"},
	{"refused", CascadeStop, srcAdyen + "2: the transaction was refused"},
	{"referral", CascadeStop, srcAdyen + "3: referral"},
	{"not_enough_balance", CascadeStop, srcAdyen + "12: not enough balance"},
	{"3d_not_authenticated", CascadeStop, srcAdyen + "11: 3-D Secure failed; another gateway must not be shopped for one without it"},
	{"canceled", CascadeStop, srcSettle + "the customer did not act in time (Stripe's, the simulator's expired action)"},
	{"cancelled", CascadeStop, "Adyen, resultCode Cancelled"},

	// Authentication: stepped up on the same gateway.
	{DeclineAuthenticationRequired, CascadeStepUp, srcStripe + ": authentication_required; " + srcAdyen + "38"},

	// Lost, stolen, pick up, fraud: never tried anywhere again.
	{"lost_card", CascadeNever, srcStripe + ": the card was reported lost"},
	{"stolen_card", CascadeNever, srcStripe + ": the card was reported stolen"},
	{"pickup_card", CascadeNever, srcStripe + ": the card cannot be used (reported lost or stolen); " + srcVisa + "04"},
	{"fraudulent", CascadeNever, srcStripe + ": the issuer suspects fraud"},
	{"merchant_blacklist", CascadeNever, srcStripe + ": the card is on the merchant's block list"},
	{"restricted_card", CascadeNever, srcStripe + ": possibly reported lost or stolen; " + srcAdyen + "25"},
	{"security_violation", CascadeNever, srcStripe + ": the issuer flagged a security violation"},
	{"do_not_try_again", CascadeNever, srcStripe + ": the issuer asks not to retry"},
	{"stop_payment_order", CascadeNever, srcStripe + ": the customer stopped payments to the merchant"},
	{"revocation_of_authorization", CascadeNever, srcStripe + ": the customer revoked the authorization"},
	{"revocation_of_auth", CascadeNever, srcAdyen + "26: the shopper revoked the authorization"},
	{"blocked_card", CascadeNever, srcAdyen + "5: the card is blocked"},
	{"acquirer_fraud", CascadeNever, srcAdyen + "14: possible fraud"},
	{"fraud", CascadeNever, srcAdyen + "20: the risk checks flagged fraud"},
	{"fraud_cancelled", CascadeNever, srcAdyen + "22: the risk checks flagged fraud"},
	{"issuer_suspected_fraud", CascadeNever, srcAdyen + "31: the issuer suspects fraud"},
}

// cascadeByCode indexes cascadeTable.
var cascadeByCode = func() map[string]Cascade {
	m := make(map[string]Cascade, len(cascadeTable))
	for _, r := range cascadeTable {
		if _, dup := m[r.code]; dup {
			panic("order: decline code " + r.code + " twice in the cascade table")
		}
		m[r.code] = r.action
	}
	return m
}()

// rejectedPrefix marks the decline code of a request a gateway refused
// before executing it (validation, a payment method it does not know):
// every adapter reports a 4xx other than 429 so, and says nothing was
// charged.
const rejectedPrefix = "rejected_"

// CascadeAfter is what may follow an attempt that came to outcome with
// declineCode.
func CascadeAfter(outcome Outcome, declineCode string) Cascade {
	switch outcome {
	case OutcomeSucceeded:
		return CascadeDone
	case OutcomeNotSent:
		// Provably never reached the gateway (dial refused, 429 with
		// nothing stored, the request budget).
		return CascadeNext
	case OutcomeRefused:
		// The gateway refused Settle (credentials, a request it cannot
		// accept) before authorizing anything.
		return CascadeNext
	case OutcomeNotFound:
		// The reconciler proved the gateway has no charge and the request
		// can no longer arrive.
		return CascadeNext
	case OutcomeRequiresAction:
		return CascadeStepUp
	case OutcomeDeclined:
		if a, ok := cascadeByCode[declineCode]; ok {
			return a
		}
		if strings.HasPrefix(declineCode, rejectedPrefix) {
			return CascadeNext
		}
		return CascadeStop
	default:
		// Unknown, in flight, or an outcome this table does not know:
		// money may have moved.
		return CascadeWait
	}
}

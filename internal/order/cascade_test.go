package order

import (
	"regexp"
	"testing"
)

// TestCascadeTable checks the cascade row by row: every decline code of
// the table, the rules of each outcome, and what an unlisted code does.
func TestCascadeTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		outcome Outcome
		code    string
		want    Cascade
	}{
		// Outcomes that prove nothing reached an authorization.
		{OutcomeNotSent, "", CascadeNext},
		{OutcomeNotSent, "gateway_busy", CascadeNext},
		{OutcomeNotSent, "gateway_not_configured", CascadeNext},
		{OutcomeRefused, "", CascadeNext},
		{OutcomeNotFound, "", CascadeNext},
		// A refusal of the request before it executed (validation).
		{OutcomeDeclined, "rejected_400", CascadeNext},
		{OutcomeDeclined, "rejected_parameter_invalid_integer", CascadeNext},
		// Technical declines.
		{OutcomeDeclined, "processing_error", CascadeNext},
		{OutcomeDeclined, "issuer_not_available", CascadeNext},
		{OutcomeDeclined, "try_again_later", CascadeNext},
		{OutcomeDeclined, "reenter_transaction", CascadeNext},
		{OutcomeDeclined, "issuer_unavailable", CascadeNext},
		{OutcomeDeclined, "acquirer_error", CascadeNext},
		{OutcomeDeclined, "not_submitted", CascadeNext},
		{OutcomeDeclined, "error", CascadeNext},
		{OutcomeDeclined, "issuer_or_switch_inoperative", CascadeNext},
		{OutcomeDeclined, "canceled_unconfirmed", CascadeNext},
		{OutcomeDeclined, "gateway_busy", CascadeNext},
		{OutcomeDeclined, "gateway_not_configured", CascadeNext},
		// Issuer declines stop.
		{OutcomeDeclined, "insufficient_funds", CascadeStop},
		{OutcomeDeclined, "do_not_honor", CascadeStop},
		{OutcomeDeclined, "generic_decline", CascadeStop},
		{OutcomeDeclined, "card_declined", CascadeStop},
		{OutcomeDeclined, "expired_card", CascadeStop},
		{OutcomeDeclined, "incorrect_cvc", CascadeStop},
		{OutcomeDeclined, "cvc_declined", CascadeStop},
		{OutcomeDeclined, "refused", CascadeStop},
		{OutcomeDeclined, "referral", CascadeStop},
		{OutcomeDeclined, "not_enough_balance", CascadeStop},
		{OutcomeDeclined, "3d_not_authenticated", CascadeStop},
		{OutcomeDeclined, "canceled", CascadeStop},
		{OutcomeDeclined, "cancelled", CascadeStop},
		// An unlisted code is the issuer's: it stops.
		{OutcomeDeclined, "", CascadeStop},
		{OutcomeDeclined, "unknown_token", CascadeStop},
		{OutcomeDeclined, "refused_99", CascadeStop},
		{OutcomeDeclined, "Processing_Error", CascadeStop},
		// Authentication steps up on the same gateway.
		{OutcomeDeclined, DeclineAuthenticationRequired, CascadeStepUp},
		{OutcomeRequiresAction, "", CascadeStepUp},
		// Lost, stolen, pick up, fraud: never anywhere again.
		{OutcomeDeclined, "lost_card", CascadeNever},
		{OutcomeDeclined, "stolen_card", CascadeNever},
		{OutcomeDeclined, "pickup_card", CascadeNever},
		{OutcomeDeclined, "fraudulent", CascadeNever},
		{OutcomeDeclined, "merchant_blacklist", CascadeNever},
		{OutcomeDeclined, "restricted_card", CascadeNever},
		{OutcomeDeclined, "security_violation", CascadeNever},
		{OutcomeDeclined, "do_not_try_again", CascadeNever},
		{OutcomeDeclined, "stop_payment_order", CascadeNever},
		{OutcomeDeclined, "revocation_of_authorization", CascadeNever},
		{OutcomeDeclined, "revocation_of_auth", CascadeNever},
		{OutcomeDeclined, "blocked_card", CascadeNever},
		{OutcomeDeclined, "acquirer_fraud", CascadeNever},
		{OutcomeDeclined, "fraud", CascadeNever},
		{OutcomeDeclined, "fraud_cancelled", CascadeNever},
		{OutcomeDeclined, "issuer_suspected_fraud", CascadeNever},
		// Money may have moved: wait for the reconciler, whatever the code.
		{OutcomeUnknown, "", CascadeWait},
		{OutcomeUnknown, "processing_error", CascadeWait},
		{OutcomeUnknown, DeclineAuthenticationRequired, CascadeWait},
		{"", "", CascadeWait},
		{"garbage", "processing_error", CascadeWait},
		// Done.
		{OutcomeSucceeded, "", CascadeDone},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		if got := CascadeAfter(tt.outcome, tt.code); got != tt.want {
			t.Errorf("CascadeAfter(%q, %q) = %q, want %q", tt.outcome, tt.code, got, tt.want)
		}
		if tt.outcome == OutcomeDeclined {
			seen[tt.code] = true
		}
	}
	// Every row of the table is tested above, and cites its source.
	code := regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)
	for _, r := range cascadeTable {
		if !seen[r.code] {
			t.Errorf("decline code %q of the cascade table has no test row", r.code)
		}
		if !code.MatchString(r.code) {
			t.Errorf("decline code %q is not in the adapters' snake case", r.code)
		}
		if len(r.source) < 10 {
			t.Errorf("decline code %q cites no source", r.code)
		}
	}
}

package refpsp_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
)

// disputeEvent is a dispute event about the charge ch_1 (reference ref)
// carrying d.
func disputeEvent(id, typ, ref string, d refpsp.DisputeObject) []byte {
	e := refpsp.Event{ID: id, Type: typ, Created: time.Now().Unix()}
	e.Data.Object = refpsp.ChargeObject{ID: "ch_1", Reference: ref, Status: refpsp.StatusSucceeded, Amount: 1250, Currency: "GBP"}
	e.Data.Dispute = &d
	b, _ := json.Marshal(e)
	return b
}

// TestDisputeEvents: a dispute's events, verified like the others, are
// about the disputed charge and carry the dispute in Settle's words; an
// unknown status or stage is refused naming it; a bad signature is
// refused.
func TestDisputeEvents(t *testing.T) {
	t.Parallel()
	c, err := refpsp.New(refpsp.Config{BaseURL: "http://127.0.0.1:1", APIKey: apiKey, EventSecrets: []string{eventSecret}})
	if err != nil {
		t.Fatal(err)
	}
	due := time.Date(2026, 12, 9, 12, 0, 0, 0, time.UTC)
	obj := refpsp.DisputeObject{ID: "dp_1", ChargeID: "ch_1", ChargeReference: "att-1", Status: refpsp.DisputeNeedsResponse,
		Stage: refpsp.DisputeStageChargeback, Amount: 1250, Currency: "GBP", Reason: "fraudulent", NetworkReasonCode: "10.4",
		DueBy: due, AmountWithdrawn: 1250, Fee: 1500}
	base := order.GatewayDispute{ID: "dp_1", Stage: order.DisputeChargeback, Amount: order.Money{Currency: "GBP", AmountMinor: 1250},
		Reason: "fraudulent", NetworkReasonCode: "10.4", DueBy: due, Withdrawn: 1250, Fee: 1500}
	now := time.Now()
	for _, tc := range []struct {
		typ, status, stage string
		want               order.DisputeStatus
		wantStage          order.DisputeStage
	}{
		{refpsp.EventDisputeOpened, refpsp.DisputeNeedsResponse, refpsp.DisputeStageInquiry, order.DisputeNeedsResponse, order.DisputeInquiry},
		{refpsp.EventDisputeOpened, refpsp.DisputeNeedsResponse, refpsp.DisputeStageChargeback, order.DisputeNeedsResponse, order.DisputeChargeback},
		{refpsp.EventDisputeUpdated, refpsp.DisputeUnderReview, refpsp.DisputeStageChargeback, order.DisputeUnderReview, order.DisputeChargeback},
		{refpsp.EventDisputeClosed, refpsp.DisputeWon, refpsp.DisputeStageChargeback, order.DisputeWon, order.DisputeChargeback},
		{refpsp.EventDisputeClosed, refpsp.DisputeLost, refpsp.DisputeStagePreArbitration, order.DisputeLost, order.DisputePreArbitration},
		{refpsp.EventDisputeClosed, refpsp.DisputeWarningClosed, refpsp.DisputeStageInquiry, order.DisputeWarningClosed, order.DisputeInquiry},
	} {
		o := obj
		o.Status, o.Stage = tc.status, tc.stage
		body := disputeEvent("evt_"+tc.status, tc.typ, "att-1", o)
		e, err := receiveOne(c, body, signed(refpsp.Sign(body, now, eventSecret)))
		want := base
		want.Status, want.Stage = tc.want, tc.wantStage
		if err != nil || e.Dispute == nil || *e.Dispute != want {
			t.Fatalf("%s %s: %+v, %v; want %+v", tc.typ, tc.status, e.Dispute, err, want)
		}
		if e.ID != "evt_"+tc.status || e.Type != tc.typ || e.ObjectID != "dp_1" || e.AttemptID != "att-1" || e.ChargeID != "ch_1" || e.Succeeded {
			t.Errorf("%s: event %+v, want one about the charge ch_1 of att-1", tc.typ, e)
		}
	}

	for name, mod := range map[string]func(*refpsp.DisputeObject){
		`"arbitration"`: func(o *refpsp.DisputeObject) { o.Status = "arbitration" },
		`"retrieval"`:   func(o *refpsp.DisputeObject) { o.Stage = "retrieval" },
	} {
		o := obj
		mod(&o)
		body := disputeEvent("evt_x", refpsp.EventDisputeUpdated, "att-1", o)
		_, err := receiveOne(c, body, signed(refpsp.Sign(body, now, eventSecret)))
		if err == nil || !strings.Contains(err.Error(), name) || errors.Is(err, order.ErrEventSignature) || errors.Is(err, order.ErrEventIgnored) {
			t.Errorf("unknown %s: %v, want an error naming it", name, err)
		}
	}
	// A dispute event without its dispute, or with another charge's.
	e := refpsp.Event{ID: "evt_bare", Type: refpsp.EventDisputeOpened, Created: now.Unix()}
	e.Data.Object = refpsp.ChargeObject{ID: "ch_1", Reference: "att-1", Status: refpsp.StatusSucceeded, Amount: 1250, Currency: "GBP"}
	bare, _ := json.Marshal(e)
	other := obj
	other.ChargeID = "ch_2"
	for _, body := range [][]byte{bare, disputeEvent("evt_other", refpsp.EventDisputeOpened, "att-1", other)} {
		if _, err := receiveOne(c, body, signed(refpsp.Sign(body, now, eventSecret))); err == nil || errors.Is(err, order.ErrEventSignature) {
			t.Errorf("a malformed dispute event: %v, want an error of its own", err)
		}
	}
	body := disputeEvent("evt_1", refpsp.EventDisputeOpened, "att-1", obj)
	for name, sig := range map[string]string{
		"none": "", "wrong secret": refpsp.Sign(body, now, "whsec_wrong_0123456789abcdefghijklmn"),
		"stale": refpsp.Sign(body, now.Add(-time.Hour), eventSecret), "another body": refpsp.Sign([]byte("{}"), now, eventSecret),
	} {
		if _, err := receiveOne(c, body, signed(sig)); !errors.Is(err, order.ErrEventSignature) {
			t.Errorf("signature %s: %v, want order.ErrEventSignature", name, err)
		}
	}
}

// TestDisputeReads: GetDispute and AcceptDispute read the gateway's
// answer, and refuse an answer about another dispute, a status Settle
// does not know, a 404 and a 5xx.
func TestDisputeReads(t *testing.T) {
	t.Parallel()
	obj := refpsp.DisputeObject{ID: "dp_1", ChargeID: "ch_1", ChargeReference: "att-1", Status: refpsp.DisputeLost,
		Stage: refpsp.DisputeStageChargeback, Amount: 1250, Currency: "GBP", AmountWithdrawn: 1250}
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path)
		o := obj
		switch r.URL.Path {
		case "/v1/disputes/dp_other":
		case "/v1/disputes/dp_odd":
			o.ID, o.Status = "dp_odd", "prevented"
		case "/v1/disputes/dp_missing":
			http.Error(w, `{"error":"no dispute"}`, http.StatusNotFound)
			return
		case "/v1/disputes/dp_5xx":
			http.Error(w, `{"error":"oops"}`, http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(o)
	}))
	t.Cleanup(srv.Close)
	c, err := refpsp.New(refpsp.Config{BaseURL: srv.URL, APIKey: apiKey})
	if err != nil {
		t.Fatal(err)
	}
	var dg order.DisputeGateway = c
	want := order.GatewayDispute{ID: "dp_1", Status: order.DisputeLost, Stage: order.DisputeChargeback,
		Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, Withdrawn: 1250}
	if d, err := dg.GetDispute(t.Context(), "dp_1"); err != nil || d != want {
		t.Errorf("GetDispute = %+v, %v; want %+v", d, err, want)
	}
	if d, err := dg.AcceptDispute(t.Context(), "dp_1"); err != nil || d != want {
		t.Errorf("AcceptDispute = %+v, %v; want %+v", d, err, want)
	}
	for _, id := range []string{"dp_other", "dp_odd", "dp_missing", "dp_5xx", ""} {
		if d, err := dg.GetDispute(t.Context(), id); err == nil {
			t.Errorf("GetDispute(%q) = %+v; want an error", id, d)
		}
	}
	if seen[0] != "GET /v1/disputes/dp_1" || seen[1] != "POST /v1/disputes/dp_1/accept" {
		t.Errorf("requests %q", seen[:2])
	}
}

package refpsp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
)

const (
	eventSecret    = "whsec_refpsp_current_0123456789abcdef"
	oldEventSecret = "whsec_refpsp_old_0123456789abcdefghij"
)

// event is a refpsp event about the charge with reference ref.
func event(id, typ, ref string) []byte {
	e := refpsp.Event{ID: id, Type: typ, Created: time.Now().Unix()}
	e.Data.Object = refpsp.ChargeObject{ID: "ch_" + id, Reference: ref, Status: strings.TrimPrefix(typ, "charge."),
		Amount: 1250, Currency: "GBP"}
	b, _ := json.Marshal(e)
	return b
}

// signed is a request's header carrying sig as the event's signature.
func signed(sig string) map[string][]string {
	h := http.Header{}
	if sig != "" {
		h.Set(refpsp.SignatureHeader, sig)
	}
	return h
}

// TestReceiveEvent: the adapter accepts an event only with a valid
// signature of one of its secrets within the tolerance, either way; reads
// a success or a decline as the domain's event about the charge with the
// event's reference; and tells an event of another type, and one it
// cannot read, from one it cannot verify.
func TestReceiveEvent(t *testing.T) {
	t.Parallel()
	c, err := refpsp.New(refpsp.Config{BaseURL: "http://127.0.0.1:1", APIKey: apiKey,
		EventSecrets: []string{eventSecret, oldEventSecret}})
	if err != nil {
		t.Fatal(err)
	}
	body := event("evt_1", refpsp.EventSucceeded, "att-1")
	now := time.Now()
	for _, tc := range []struct {
		name, sig string
		body      []byte
	}{
		{"no signature", "", body},
		{"wrong secret", refpsp.Sign(body, now, "whsec_wrong"), body},
		{"signature of another body", refpsp.Sign([]byte("{}"), now, eventSecret), body},
		{"stale timestamp", refpsp.Sign(body, now.Add(-10*time.Minute), eventSecret), body},
		{"timestamp from the future", refpsp.Sign(body, now.Add(10*time.Minute), eventSecret), body},
		{"garbage header", "v1=zz,t=x", body},
	} {
		if _, err := receiveOne(c, tc.body, signed(tc.sig)); !errors.Is(err, order.ErrEventSignature) {
			t.Errorf("%s: %v, want order.ErrEventSignature", tc.name, err)
		}
	}

	for _, tc := range []struct {
		name, sig string
		body      []byte
		want      order.GatewayEvent
	}{
		{"current secret", refpsp.Sign(body, now, eventSecret), body,
			order.GatewayEvent{ID: "evt_1", Type: refpsp.EventSucceeded, ObjectID: "ch_evt_1", AttemptID: "att-1", ChargeID: "ch_evt_1", Succeeded: true}},
		{"old secret", refpsp.Sign(body, now, oldEventSecret), body,
			order.GatewayEvent{ID: "evt_1", Type: refpsp.EventSucceeded, ObjectID: "ch_evt_1", AttemptID: "att-1", ChargeID: "ch_evt_1", Succeeded: true}},
		{"both secrets, a clock 4 minutes ahead", refpsp.Sign(event("evt_2", refpsp.EventDeclined, "att-2"), now.Add(4*time.Minute), "whsec_next", eventSecret),
			event("evt_2", refpsp.EventDeclined, "att-2"),
			order.GatewayEvent{ID: "evt_2", Type: refpsp.EventDeclined, ObjectID: "ch_evt_2", AttemptID: "att-2", ChargeID: "ch_evt_2"}},
	} {
		got, err := receiveOne(c, tc.body, signed(tc.sig))
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}

	other := event("evt_3", "charge.refunded", "att-1")
	if _, err := receiveOne(c, other, signed(refpsp.Sign(other, now, eventSecret))); !errors.Is(err, order.ErrEventIgnored) {
		t.Errorf("an event of another type: %v, want order.ErrEventIgnored", err)
	}
	for _, bad := range [][]byte{[]byte("not json"), event("", refpsp.EventSucceeded, "att-1"), event("evt_4", refpsp.EventSucceeded, "")} {
		_, err := receiveOne(c, bad, signed(refpsp.Sign(bad, now, eventSecret)))
		if err == nil || errors.Is(err, order.ErrEventSignature) || errors.Is(err, order.ErrEventIgnored) {
			t.Errorf("signed but unreadable %q: %v, want an error of its own", bad, err)
		}
	}

	// A capture's or a void's event without its object is unreadable.
	for _, typ := range []string{refpsp.EventCaptureSucceeded, refpsp.EventVoidFailed} {
		bad := event("evt_5", typ, "att-1")
		_, err := receiveOne(c, bad, signed(refpsp.Sign(bad, now, eventSecret)))
		if err == nil || errors.Is(err, order.ErrEventSignature) || errors.Is(err, order.ErrEventIgnored) {
			t.Errorf("%s without its object: %v, want an error of its own", typ, err)
		}
	}

	// With no secret, nothing verifies.
	bare := newClient(t, "http://127.0.0.1:1", time.Second)
	if _, err := receiveOne(bare, body, signed(refpsp.Sign(body, now, eventSecret))); !errors.Is(err, order.ErrEventSignature) {
		t.Errorf("an adapter without secrets: %v, want order.ErrEventSignature", err)
	}
}

// TestEventSecretRules: an event secret is at least 32 bytes, at check and
// at New, and the error never holds it.
func TestEventSecretRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		secret string
		ok     bool
	}{
		{"a", false},
		{strings.Repeat("x", 31), false},
		{strings.Repeat("x", 32), true},
		{eventSecret, true},
	} {
		err := refpsp.CheckEventSecret(tc.secret)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok %v", tc.secret, err, tc.ok)
		}
		if err != nil && len(tc.secret) > 1 && strings.Contains(err.Error(), tc.secret) {
			t.Errorf("%q: the error %q holds the secret", tc.secret, err)
		}
		_, err = refpsp.New(refpsp.Config{BaseURL: "http://127.0.0.1:1", APIKey: apiKey, EventSecrets: []string{eventSecret, tc.secret}})
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "event secret 2 of 2")) {
			t.Errorf("New with %q: %v, want ok %v", tc.secret, err, tc.ok)
		}
	}
}

// receiveOne is ReceiveEvents for a request that carries one event.
func receiveOne(r order.EventReceiver, body []byte, header map[string][]string) (order.GatewayEvent, error) {
	evs, err := r.ReceiveEvents(body, header)
	if err != nil {
		return order.GatewayEvent{}, err
	}
	if len(evs) != 1 {
		return order.GatewayEvent{}, fmt.Errorf("%d events, want one", len(evs))
	}
	return evs[0], nil
}

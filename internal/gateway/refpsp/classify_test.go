package refpsp

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/settlepay/settle/internal/order"
)

var testReq = order.ChargeRequest{
	AttemptID:         "att_1",
	OrderID:           "ord_1",
	MerchantReference: "inv-1",
	Amount:            order.Money{Currency: "GBP", AmountMinor: 1250},
	PaymentMethod:     "tok_ok",
}

// body returns a charge object for testReq with the given changes.
func body(status string, change func(map[string]any)) []byte {
	m := map[string]any{"id": "ch_1", "reference": "att_1", "status": status, "amount": 1250, "currency": "GBP"}
	if change != nil {
		change(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// transportErr wraps err the way http.Client.Do does.
func transportErr(err error) error {
	return &url.Error{Op: "Post", URL: "http://psp.test/v1/charges", Err: err}
}

func TestClassifyCharge(t *testing.T) {
	refused := transportErr(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	noSuchHost := transportErr(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "psp.test", IsNotFound: true}})
	reset := transportErr(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)})

	tests := []struct {
		name    string
		ex      exchange
		want    order.Result
		wantErr bool
	}{
		{"201 succeeded", exchange{connected: true, status: 201, body: body("succeeded", nil)},
			order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"}, false},
		{"201 with lower-case currency", exchange{connected: true, status: 201, body: body("succeeded", func(m map[string]any) { m["currency"] = "gbp" })},
			order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"}, false},
		{"201 with unknown fields", exchange{connected: true, status: 201, body: body("succeeded", func(m map[string]any) { m["livemode"] = true })},
			order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"}, false},
		{"402 declined", exchange{connected: true, status: 402, body: body("declined", func(m map[string]any) { m["decline_code"] = "insufficient_funds" })},
			order.Result{Outcome: order.OutcomeDeclined, ChargeID: "ch_1", DeclineCode: "insufficient_funds"}, false},
		{"402 without a decline code", exchange{connected: true, status: 402, body: body("declined", nil)},
			order.Result{Outcome: order.OutcomeDeclined, ChargeID: "ch_1", DeclineCode: "unspecified"}, false},

		{"refused before connecting", exchange{err: refused},
			order.Result{Outcome: order.OutcomeNotSent}, true},
		{"name did not resolve", exchange{err: noSuchHost},
			order.Result{Outcome: order.OutcomeNotSent}, true},
		{"dial error after a connection was obtained", exchange{connected: true, err: refused},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"429 rate limited", exchange{connected: true, status: 429},
			order.Result{Outcome: order.OutcomeNotSent}, true},

		{"400 rejected", exchange{connected: true, status: 400},
			order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_400"}, true},
		{"401 rejected", exchange{connected: true, status: 401},
			order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_401"}, true},
		{"403 rejected", exchange{connected: true, status: 403},
			order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_403"}, true},
		{"404 rejected", exchange{connected: true, status: 404},
			order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_404"}, true},
		{"422 rejected", exchange{connected: true, status: 422},
			order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_422"}, true},
		{"409 rejected", exchange{connected: true, status: 409},
			order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_409"}, true},
		{"rejection whose body could not be read", exchange{connected: true, status: 422, err: io.ErrUnexpectedEOF},
			order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_422"}, true},

		{"deadline exceeded", exchange{connected: true, err: transportErr(context.DeadlineExceeded)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"deadline exceeded before connecting", exchange{err: transportErr(context.DeadlineExceeded)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"canceled", exchange{connected: true, err: transportErr(context.Canceled)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"EOF after writing", exchange{connected: true, err: transportErr(io.EOF)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"connection reset", exchange{connected: true, err: reset},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"500", exchange{connected: true, status: 500},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"502", exchange{connected: true, status: 502},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"503 with a charge in the body", exchange{connected: true, status: 503, body: body("succeeded", nil)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"200 is not a charge answer", exchange{connected: true, status: 200, body: body("succeeded", nil)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"302 redirect", exchange{connected: true, status: 302},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 whose body could not be read", exchange{connected: true, status: 201, body: []byte(`{"id":`), err: io.ErrUnexpectedEOF},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 not JSON", exchange{connected: true, status: 201, body: []byte("<html>ok</html>")},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 empty", exchange{connected: true, status: 201},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 for another reference", exchange{connected: true, status: 201, body: body("succeeded", func(m map[string]any) { m["reference"] = "att_2" })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 for another amount", exchange{connected: true, status: 201, body: body("succeeded", func(m map[string]any) { m["amount"] = 125 })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 in another currency", exchange{connected: true, status: 201, body: body("succeeded", func(m map[string]any) { m["currency"] = "EUR" })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 with unknown status", exchange{connected: true, status: 201, body: body("pending", nil)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 saying declined", exchange{connected: true, status: 201, body: body("declined", nil)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"402 saying succeeded", exchange{connected: true, status: 402, body: body("succeeded", nil)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 succeeded without an id", exchange{connected: true, status: 201, body: body("succeeded", func(m map[string]any) { delete(m, "id") })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"402 for another reference", exchange{connected: true, status: 402, body: body("declined", func(m map[string]any) { m["reference"] = "att_2" })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := classifyCharge(testReq, tt.ex)
			if got != tt.want {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, want error: %t", err, tt.wantErr)
			}
		})
	}
}

func TestClassifyLookup(t *testing.T) {
	tests := []struct {
		name    string
		ex      exchange
		want    order.Result
		wantErr bool
	}{
		{"200 succeeded", exchange{connected: true, status: 200, body: body("succeeded", nil)},
			order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"}, false},
		{"200 declined", exchange{connected: true, status: 200, body: body("declined", func(m map[string]any) { m["decline_code"] = "card_declined" })},
			order.Result{Outcome: order.OutcomeDeclined, ChargeID: "ch_1", DeclineCode: "card_declined"}, false},
		{"404", exchange{connected: true, status: 404},
			order.Result{Outcome: order.OutcomeNotFound}, false},
		{"200 for another reference", exchange{connected: true, status: 200, body: body("succeeded", func(m map[string]any) { m["reference"] = "att_2" })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"200 with unknown status", exchange{connected: true, status: 200, body: body("processing", nil)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"200 not JSON", exchange{connected: true, status: 200, body: []byte("ok")},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"200 whose body could not be read", exchange{connected: true, status: 200, err: io.ErrUnexpectedEOF},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"500", exchange{connected: true, status: 500},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"429", exchange{connected: true, status: 429},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"401", exchange{connected: true, status: 401},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"refused", exchange{err: transportErr(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"deadline exceeded", exchange{connected: true, err: transportErr(context.DeadlineExceeded)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := classifyLookup(testReq, tt.ex)
			if got != tt.want {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, want error: %t", err, tt.wantErr)
			}
		})
	}
}

// FuzzParseCharge checks that parseCharge never panics, and that whatever it
// accepts is a well-formed charge that survives a round trip.
func FuzzParseCharge(f *testing.F) {
	f.Add([]byte(`{"id":"ch_1","reference":"att_1","status":"succeeded","amount":1250,"currency":"GBP"}`))
	f.Add([]byte(`{"id":"ch_2","reference":"att_1","status":"declined","amount":1250,"currency":"GBP","decline_code":"card_declined"}`))
	f.Add([]byte(`{"reference":"att_1","status":"declined"}`))
	f.Add([]byte(`{"id":"","reference":"att_1","status":"succeeded"}`))
	f.Add([]byte(`{"id":"ch_1","reference":"att_1","status":"succeeded","amount":1.5}`))
	f.Add([]byte(`{"id":"ch_1","reference":"att_1","status":"succeeded","amount":99999999999999999999}`))
	f.Add([]byte(`{"id":"ch_1","Reference":"att_1","STATUS":"succeeded","reference":"att_2"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		ch, err := parseCharge(b)
		if err != nil {
			if ch != (ChargeObject{}) {
				t.Fatalf("parseCharge returned %+v with error %v", ch, err)
			}
			return
		}
		if ch.Reference == "" {
			t.Fatal("accepted a charge without a reference")
		}
		switch ch.Status {
		case StatusSucceeded:
			if ch.ID == "" {
				t.Fatal("accepted a succeeded charge without an id")
			}
		case StatusDeclined:
		default:
			t.Fatalf("accepted status %q", ch.Status)
		}
		again, err := json.Marshal(ch)
		if err != nil {
			t.Fatal(err)
		}
		ch2, err := parseCharge(again)
		if err != nil {
			t.Fatalf("reparse %s: %v", again, err)
		}
		if ch2 != ch {
			t.Fatalf("round trip changed %+v into %+v", ch, ch2)
		}
	})
}

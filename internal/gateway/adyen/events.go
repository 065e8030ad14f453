package adyen

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// Notifications
//
// Adyen posts a batch of notifications to Settle's endpoint:
//
//	POST /webhooks/adyen
//	Authorization: Basic <NotifyUser:NotifyPassword>     (when configured)
//
//	{"live": "false", "notificationItems": [{"NotificationRequestItem": {
//	  "eventCode": "AUTHORISATION", "success": "true", "pspReference": "...",
//	  "originalReference": "...", "merchantAccountCode": "...", "merchantReference": "<our id>",
//	  "amount": {"value": 1250, "currency": "GBP"}, "eventDate": "...", "reason": "...",
//	  "additionalData": {"hmacSignature": "<base64>"}}}, ...]}
//
// Each item is signed: hmacSignature is the base64 HMAC-SHA256, under the
// hex-decoded HMAC key, of
//
//	pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success
//
// (an absent field as the empty string). ReceiveEvents verifies the basic
// authentication, when configured, and every item against each of
// Config.HMACKeys (constant-time); one item that fails refuses the whole
// batch (order.ErrEventSignature), which Adyen then sends again. Items of
// another merchant account are left out. Settle answers "[accepted]"
// (Acknowledge) once the batch is recorded.
//
//	eventCode          About     AttemptID (merchantReference)   Succeeded (money moved)
//	AUTHORISATION      attempt   the attempt id                  success=true
//	TECHNICAL_CANCEL   attempt   the attempt id                  no
//	EXPIRE             attempt   the attempt id                  no
//	CAPTURE            capture   the capture id                  success=true
//	CAPTURE_FAILED     capture   the capture id                  no (always a failure)
//	CANCELLATION       void      the void id                     no
//	REFUND             refund    the refund id                   no
//	REFUND_FAILED      refund    the refund id                   no (always a failure)
//
// A reference Settle derived from an attempt id ("<attempt>:capture" of an
// automatic order's capture, "<attempt>:cancel", "<attempt>:release") is
// reported about the attempt. A dispute's notifications (CHARGEBACK and
// the others of dispute.go) carry Dispute. Every other eventCode is ignored
// (order.ErrEventIgnored when the batch holds nothing else). ID is
// eventCode:pspReference:success, which Adyen keeps for a repeat of one
// notification (a success that follows a failure of the same payment is a
// new one); ObjectID is the pspReference; ChargeID the payment's
// (pspReference of an AUTHORISATION, originalReference of a
// modification); Outcome succeeded or declined from success, declined for
// the *_FAILED codes, with DeclineCode from the reason; Amount in ISO
// 4217 minor units; OccurredAt the eventDate.

// The eventCodes the adapter reads.
const (
	EventAuthorisation   = "AUTHORISATION"
	EventTechnicalCancel = "TECHNICAL_CANCEL"
	EventExpire          = "EXPIRE"
	EventCapture         = "CAPTURE"
	EventCaptureFailed   = "CAPTURE_FAILED"
	EventCancellation    = "CANCELLATION"
	EventRefund          = "REFUND"
	EventRefundFailed    = "REFUND_FAILED"
)

// eventAbout says what each eventCode the adapter reads is about.
var eventAbout = map[string]order.EventAbout{
	EventAuthorisation:   order.EventAboutAttempt,
	EventTechnicalCancel: order.EventAboutAttempt,
	EventExpire:          order.EventAboutAttempt,
	EventCapture:         order.EventAboutCapture,
	EventCaptureFailed:   order.EventAboutCapture,
	EventCancellation:    order.EventAboutVoid,
	EventRefund:          order.EventAboutRefund,
	EventRefundFailed:    order.EventAboutRefund,
}

// Acknowledged is the body Adyen expects once a batch is accepted.
const Acknowledged = "[accepted]"

// notificationRequest is a batch of notifications as Adyen posts it.
type notificationRequest struct {
	Live              string `json:"live"`
	NotificationItems []struct {
		Item *notificationItem `json:"NotificationRequestItem"`
	} `json:"notificationItems"`
}

// notificationItem is one notification.
type notificationItem struct {
	AdditionalData      map[string]any `json:"additionalData,omitempty"`
	Amount              amount         `json:"amount"`
	EventCode           string         `json:"eventCode"`
	EventDate           string         `json:"eventDate"`
	MerchantAccountCode string         `json:"merchantAccountCode"`
	MerchantReference   string         `json:"merchantReference"`
	OriginalReference   string         `json:"originalReference,omitempty"`
	PSPReference        string         `json:"pspReference"`
	Reason              string         `json:"reason,omitempty"`
	Success             string         `json:"success"`
}

// signingString is what an item's hmacSignature signs.
func signingString(it *notificationItem) string {
	return strings.Join([]string{it.PSPReference, it.OriginalReference, it.MerchantAccountCode, it.MerchantReference,
		strconv.FormatInt(it.Amount.Value, 10), it.Amount.Currency, it.EventCode, it.Success}, ":")
}

// sign is an item's hmacSignature under key.
func sign(key []byte, it *notificationItem) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signingString(it)))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// verified reports whether the item's hmacSignature is its signature
// under one of keys, comparing in constant time.
func verified(keys [][]byte, it *notificationItem) bool {
	s, _ := it.AdditionalData["hmacSignature"].(string)
	got, err := base64.StdEncoding.DecodeString(s)
	if s == "" || err != nil {
		return false
	}
	ok := false
	for _, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(signingString(it)))
		// Every key is tried, so that the time taken does not tell which.
		ok = hmac.Equal(mac.Sum(nil), got) || ok
	}
	return ok
}

// ReceiveEvents verifies a batch of notifications (body, with header as
// net/http's Header) and returns the events of the items Settle reads
// (see Notifications). The error wraps order.ErrEventSignature when the
// batch is not verified, and nothing of it may be trusted;
// order.ErrEventIgnored when it is verified and holds nothing Settle
// reads; any other error is a verified batch that cannot be read.
func (g *Gateway) ReceiveEvents(body []byte, header map[string][]string) ([]order.GatewayEvent, error) {
	if g.notifyUser != "" && !g.authenticated(http.Header(header)) {
		return nil, errors.Join(order.ErrEventSignature, errors.New("adyen: the notification's basic authentication is missing or wrong"))
	}
	if len(g.hmacKeys) == 0 {
		return nil, errors.Join(order.ErrEventSignature, errors.New("adyen: no HMAC key is configured"))
	}
	var nr notificationRequest
	if err := json.Unmarshal(body, &nr); err != nil || len(nr.NotificationItems) == 0 {
		return nil, errors.Join(order.ErrEventSignature, errors.New("adyen: malformed notification"))
	}
	for _, w := range nr.NotificationItems {
		if w.Item == nil || !verified(g.hmacKeys, w.Item) {
			return nil, errors.Join(order.ErrEventSignature, errors.New("adyen: a notification item's hmacSignature is missing or wrong"))
		}
	}
	var evs []order.GatewayEvent
	for _, w := range nr.NotificationItems {
		it := w.Item
		if _, ok := disputeStages[it.EventCode]; ok && it.MerchantAccountCode == g.merchant {
			e, err := g.disputeEvent(it)
			if err != nil {
				return nil, err
			}
			evs = append(evs, e)
			continue
		}
		about, ok := eventAbout[it.EventCode]
		if !ok || it.MerchantAccountCode != g.merchant {
			continue
		}
		if it.PSPReference == "" || it.MerchantReference == "" {
			return nil, errors.New("adyen: a notification item has no pspReference or merchantReference")
		}
		evs = append(evs, g.event(it, about))
	}
	if len(evs) == 0 {
		return nil, order.ErrEventIgnored
	}
	return evs, nil
}

// event is the domain's event of a verified item.
func (g *Gateway) event(it *notificationItem, about order.EventAbout) order.GatewayEvent {
	success := it.Success == "true"
	e := order.GatewayEvent{
		Gateway: g.name, ID: it.EventCode + ":" + it.PSPReference + ":" + it.Success, Type: it.EventCode,
		ObjectID: it.PSPReference, AttemptID: it.MerchantReference, ChargeID: it.OriginalReference, About: about,
		Amount: order.Money{Currency: it.Amount.Currency, AmountMinor: minorAmount(it.Amount.Currency, it.Amount.Value)},
	}
	if it.EventCode == EventAuthorisation || e.ChargeID == "" {
		e.ChargeID = it.PSPReference
	}
	for _, suffix := range []string{captureSuffix, cancelSuffix, releaseSuffix} {
		if id, ok := strings.CutSuffix(it.MerchantReference, suffix); ok && id != "" {
			// A call Settle derived from the attempt: it is about the
			// attempt (an automatic order's capture moves its money).
			e.AttemptID, e.About = id, order.EventAboutAttempt
		}
	}
	failed := it.EventCode == EventCaptureFailed || it.EventCode == EventRefundFailed
	switch {
	case success && !failed:
		e.Outcome = order.OutcomeSucceeded
		e.Succeeded = it.EventCode == EventAuthorisation || it.EventCode == EventCapture
	default:
		e.Outcome, e.FailedLater = order.OutcomeDeclined, failed
		e.DeclineCode = declineCode(it.Reason)
		if e.DeclineCode == "" || e.DeclineCode == "null" {
			e.DeclineCode = declineCode(it.EventCode)
		}
	}
	if t, err := time.Parse(time.RFC3339, it.EventDate); err == nil {
		e.OccurredAt = t
	}
	return e
}

// authenticated checks the notification's basic authentication, in
// constant time.
func (g *Gateway) authenticated(h http.Header) bool {
	r := http.Request{Header: h}
	user, pass, ok := r.BasicAuth()
	u := subtle.ConstantTimeCompare([]byte(user), []byte(g.notifyUser))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(g.notifyPassword))
	return ok && u&p == 1
}

// Acknowledge is the answer to a batch once its events are recorded.
func (g *Gateway) Acknowledge() (contentType string, body []byte) {
	return "text/plain; charset=utf-8", []byte(Acknowledged)
}

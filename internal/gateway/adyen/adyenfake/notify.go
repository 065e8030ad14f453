package adyenfake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Notification is one notification item the receiver accepted
// ("[accepted]"), as Sent lists it.
type Notification struct {
	EventCode           string
	PSPReference        string
	OriginalReference   string
	MerchantReference   string
	MerchantAccountCode string
	Value               int64
	Currency            string
	Success             bool
	Reason              string
	EventDate           time.Time
}

// item is a notification before it is signed and sent.
type item struct {
	PSPReference      string
	OriginalReference string
	MerchantReference string
	EventCode         string
	Amount            amount
	Success           bool
	Reason            string
	PaymentMethod     string
	// Additional is additionalData beside hmacSignature (a dispute's,
	// disputes.go); Adyen does not sign it.
	Additional map[string]string
}

// wireItem is a NotificationRequestItem.
type wireItem struct {
	AdditionalData      map[string]string `json:"additionalData"`
	Amount              amount            `json:"amount"`
	EventCode           string            `json:"eventCode"`
	EventDate           string            `json:"eventDate"`
	MerchantAccountCode string            `json:"merchantAccountCode"`
	MerchantReference   string            `json:"merchantReference"`
	OriginalReference   string            `json:"originalReference,omitempty"`
	PaymentMethod       string            `json:"paymentMethod,omitempty"`
	PSPReference        string            `json:"pspReference"`
	Reason              string            `json:"reason,omitempty"`
	Success             string            `json:"success"`
}

type wireRequest struct {
	Live              string `json:"live"`
	NotificationItems []struct {
		NotificationRequestItem wireItem `json:"NotificationRequestItem"`
	} `json:"notificationItems"`
}

// SigningString is the string Adyen signs for a notification item, as its
// documentation gives it: pspReference, originalReference,
// merchantAccountCode, merchantReference, amount value, currency,
// eventCode and success, joined by colons, an absent field an empty
// string.
func SigningString(pspReference, originalReference, merchantAccountCode, merchantReference string, value int64, currency, eventCode, success string) string {
	return strings.Join([]string{
		pspReference, originalReference, merchantAccountCode, merchantReference,
		strconv.FormatInt(value, 10), currency, eventCode, success,
	}, ":")
}

// Sign returns the hmacSignature of a signing string under key (the
// HMAC key, hex-decoded): base64 of its HMAC-SHA256.
func Sign(key []byte, signingString string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signingString))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// delivery is one notification to send and when.
type delivery struct {
	body []byte
	at   time.Time
	note Notification
}

// notifyLocked signs it, checks it against the contract, and plans its
// deliveries as Config.Notify's faults draw them: after extra and a
// random delay, perhaps held back, duplicated or lost.
func (s *Server) notifyLocked(it item, now time.Time, extra time.Duration) {
	if s.cfg.NotifyURL == "" {
		return
	}
	success := strconv.FormatBool(it.Success)
	w := wireItem{
		Amount:              it.Amount,
		EventCode:           it.EventCode,
		EventDate:           now.Format(time.RFC3339),
		MerchantAccountCode: s.cfg.MerchantAccount,
		MerchantReference:   it.MerchantReference,
		OriginalReference:   it.OriginalReference,
		PaymentMethod:       it.PaymentMethod,
		PSPReference:        it.PSPReference,
		Reason:              it.Reason,
		Success:             success,
	}
	w.AdditionalData = map[string]string{"hmacSignature": Sign(s.hmacKey, SigningString(
		w.PSPReference, w.OriginalReference, w.MerchantAccountCode, w.MerchantReference,
		w.Amount.Value, w.Amount.Currency, w.EventCode, w.Success))}
	for k, v := range it.Additional {
		w.AdditionalData[k] = v
	}
	var req wireRequest
	req.Live = "false"
	req.NotificationItems = append(req.NotificationItems, struct {
		NotificationRequestItem wireItem `json:"NotificationRequestItem"`
	}{w})
	body, err := json.Marshal(req)
	if err != nil {
		panic(err) // the fake's own types always marshal
	}
	if problems := s.contract.checkNotification(it.EventCode, body); len(problems) > 0 {
		s.contractErrorLocked(it.EventCode+" notification", problems)
	}
	note := Notification{
		EventCode: it.EventCode, PSPReference: it.PSPReference, OriginalReference: it.OriginalReference,
		MerchantReference: it.MerchantReference, MerchantAccountCode: s.cfg.MerchantAccount,
		Value: it.Amount.Value, Currency: it.Amount.Currency, Success: it.Success, Reason: it.Reason,
		EventDate: now.Truncate(time.Second),
	}

	nf := s.cfg.Notify
	// Every notification draws the same numbers, so that the faults
	// depend only on the seed and the sequence of notifications.
	lost := s.notifyRng.Float64() < nf.Loss
	twice := s.notifyRng.Float64() < nf.Duplicate
	if lost {
		return
	}
	n := 1
	if twice {
		n = 2
	}
	for range n {
		at := now.Add(extra)
		if nf.MaxDelay > 0 {
			at = at.Add(time.Duration(s.notifyRng.Int64N(int64(nf.MaxDelay) + 1)))
		}
		if s.notifyRng.Float64() < nf.Reorder {
			at = at.Add(nf.ReorderDelay)
		}
		s.planned++
		s.senders.Add(1)
		go s.deliver(delivery{body: body, at: at, note: note})
	}
}

// Sent returns the notification items the receiver has accepted, in the
// order it accepted them (a duplicate twice).
func (s *Server) Sent() []Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Notification(nil), s.sent...)
}

// Pending returns how many planned deliveries of notifications the
// receiver has not accepted yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.planned - len(s.sent)
}

// deliver sends d when it is due and again, with backoff, until the
// receiver answers 2xx "[accepted]" or the fake closes.
func (s *Server) deliver(d delivery) {
	defer s.senders.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := time.Until(d.at)
	backoff := s.cfg.Notify.RetryMin
	for {
		t := time.NewTimer(max(wait, 0))
		select {
		case <-s.stopping:
			t.Stop()
			return
		case <-t.C:
		}
		if s.post(ctx, d) {
			s.mu.Lock()
			s.sent = append(s.sent, d.note)
			s.mu.Unlock()
			return
		}
		wait, backoff = backoff, min(2*backoff, s.cfg.Notify.RetryMax)
	}
}

// post sends d once and reports whether the receiver accepted it.
func (s *Server) post(ctx context.Context, d delivery) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.NotifyURL, bytes.NewReader(d.body))
	if err != nil {
		s.log.Error("adyenfake: notification URL", "error", err)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	if s.cfg.NotifyUser != "" || s.cfg.NotifyPassword != "" {
		req.SetBasicAuth(s.cfg.NotifyUser, s.cfg.NotifyPassword)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.log.Debug("adyenfake: notification not delivered", "event", d.note.EventCode, "psp", d.note.PSPReference, "error", err)
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode/100 != 2 || strings.TrimSpace(string(b)) != "[accepted]" {
		s.log.Debug("adyenfake: notification not accepted", "event", d.note.EventCode, "psp", d.note.PSPReference, "status", resp.StatusCode)
		return false
	}
	return true
}

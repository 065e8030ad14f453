package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
)

// adyenFake is the fake Adyen of a run, and the proxy its notifications
// go through: it loses adyenLoss of them, and hands the others to the
// replicas' webhook listeners in turn, as a load balancer does.
type adyenFake struct {
	fake     *adyenfake.Server
	url      string
	stopOnce sync.Once
	stopFn   func()

	proxy    *http.Server
	backends []string
	client   *http.Client

	mu   sync.Mutex
	rng  *rand.Rand     // the losses; guarded by mu
	next int            // the next backend; guarded by mu
	lost map[string]int // eventCode → notifications lost; guarded by mu
	// delivered holds the notifications a replica accepted, by
	// noteKey; guarded by mu.
	delivered map[string]bool
}

// adyenEnd is the fake Adyen's word at the end of a run.
type adyenEnd struct {
	payments    []adyenfake.Payment
	techCancels []adyenfake.Modification
	// lost counts the notifications the proxy lost, by eventCode; sent
	// those a replica accepted.
	lost map[string]int
	sent int
	// delivered holds, by noteKey, the notifications a replica accepted
	// (a copy of one may be lost and another delivered): what Settle can
	// know of what only a notification tells (EXPIRE, CAPTURE_FAILED).
	delivered map[string]bool
}

// noteKey names a notification by its eventCode and merchantReference.
func noteKey(eventCode, merchantReference string) string { return eventCode + " " + merchantReference }

// startAdyen starts the proxy in front of the replicas' listeners
// (hookAddrs) and the fake Adyen, on free loopback ports, its faults
// seeded from seed.
func startAdyen(ctx context.Context, seed uint64, hookAddrs []string) (*adyenFake, error) {
	a := &adyenFake{rng: rand.New(rand.NewPCG(seed, 29)), lost: map[string]int{}, delivered: map[string]bool{},
		client: &http.Client{Timeout: 5 * time.Second}}
	for _, addr := range hookAddrs {
		a.backends = append(a.backends, "http://"+addr+"/webhooks/adyen")
	}
	proxyLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a.proxy = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(a.forward)}
	go func() { _ = a.proxy.Serve(proxyLis) }()
	a.fake, err = adyenfake.New(adyenfake.Config{APIKey: adyenAPIKey, MerchantAccount: adyenAccount, HMACKey: adyenHMACKey,
		NotifyURL: "http://" + proxyLis.Addr().String() + "/", Notify: adyenNotify, Random: adyenRandom,
		ClientTimeout: simHold, Seed: seed})
	if err != nil {
		a.proxy.Close()
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.proxy.Close()
		return nil, err
	}
	a.url = "http://" + lis.Addr().String()
	fakeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { _ = a.fake.Serve(fakeCtx, lis); close(done) }()
	a.stopFn = func() { cancel(); <-done; a.proxy.Close() }
	return a, nil
}

// stop stops the fake (its deliveries too) and the proxy; the ledger is
// final after it.
func (a *adyenFake) stop() { a.stopOnce.Do(a.stopFn) }

func (a *adyenFake) end() adyenEnd {
	a.mu.Lock()
	defer a.mu.Unlock()
	lost := make(map[string]int, len(a.lost))
	for k, n := range a.lost {
		lost[k] = n
	}
	delivered := make(map[string]bool, len(a.delivered))
	for k := range a.delivered {
		delivered[k] = true
	}
	return adyenEnd{payments: a.fake.Ledger(), techCancels: a.fake.TechnicalCancels(), lost: lost, sent: len(a.fake.Sent()),
		delivered: delivered}
}

// settled reports whether the fake has no hold that lapses within soon
// and no notification still to deliver; true for a nil a.
func (a *adyenFake) settled(soon time.Duration) bool {
	if a == nil {
		return true
	}
	for _, p := range a.fake.Ledger() {
		if p.Status == adyenfake.StatusAuthorised && time.Until(p.CaptureBefore) < soon {
			return false
		}
	}
	return a.fake.Pending() == 0
}

// forward loses a notification now and then (answering "[accepted]", as a
// network that lost the receiver's answer would not, but as one that lost
// the notification on the receiver's side does), and hands the others to
// the next replica, answering what it answered.
func (a *adyenFake) forward(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read the notification", http.StatusBadRequest)
		return
	}
	code, ref := noteOf(body)
	a.mu.Lock()
	lose := a.rng.Float64() < adyenLoss
	if lose {
		a.lost[code]++
	}
	to := a.backends[a.next%len(a.backends)]
	a.next++
	a.mu.Unlock()
	if lose {
		_, _ = io.WriteString(w, "[accepted]")
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, to, bytes.NewReader(body))
	if err != nil {
		http.Error(w, "proxy", http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := a.client.Do(req)
	if err != nil {
		http.Error(w, "the replica did not answer", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 == 2 {
		a.mu.Lock()
		a.delivered[noteKey(code, ref)] = true
		a.mu.Unlock()
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

// noteOf is the eventCode and merchantReference of a notification's
// first item (the fake sends one a request).
func noteOf(body []byte) (code, ref string) {
	var req struct {
		NotificationItems []struct {
			NotificationRequestItem struct {
				EventCode         string `json:"eventCode"`
				MerchantReference string `json:"merchantReference"`
			} `json:"NotificationRequestItem"`
		} `json:"notificationItems"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.NotificationItems) == 0 {
		return "?", ""
	}
	it := req.NotificationItems[0].NotificationRequestItem
	return it.EventCode, it.MerchantReference
}

// Package delivery delivers merchants' events to their endpoints: it leases
// undelivered events from the outbox (the orders' history), POSTs each one
// signed with HMAC-SHA256, and records the result, retrying with
// exponential backoff and jitter until the retry window ends.
//
// Delivery is at least once: an event is marked delivered only after its
// endpoint answered 2xx, so a worker that dies between the two delivers it
// again, with the same id, once its lease ends. Each merchant has its own
// lane, and a slow or dead endpoint holds up its own lane only. A lane's
// first POST goes alone, so that an endpoint that is down is asked once;
// once it answered, up to InFlight of the merchant's events are POSTed at
// once (deliveries may arrive out of order: each carries its sequence).
//
// A merchant without an endpoint pulls its events (ListEvents): the worker
// never leases them, so they are never tried nor failed, and they are not
// part of the backlog. The set of merchants with an endpoint, in the
// worker's configuration, is the one thing that decides both.
package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/settlepay/settle/internal/failpoint"
	"github.com/settlepay/settle/internal/order"
)

// Store is the outbox as the worker needs it.
type Store interface {
	LeaseDeliveries(ctx context.Context, merchants []string, perMerchant int, lease time.Duration) ([]order.Notification, error)
	RecordDeliveries(ctx context.Context, ds []order.Delivery, giveUp time.Duration) ([]order.DeliveryRecord, error)
	DeliveryBacklog(ctx context.Context, merchants []string) ([]order.DeliveryBacklog, error)
}

// Defaults of Config.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultPerMerchant = 32
	DefaultInFlight    = 8
	DefaultPoll        = time.Second
	DefaultRetryFor    = 72 * time.Hour
	DefaultBackoffBase = 10 * time.Second
	DefaultBackoffMax  = 12 * time.Hour
)

// Config is the worker's configuration; zero fields take the defaults.
type Config struct {
	Endpoints []Endpoint
	// Timeout bounds one POST, answer included.
	Timeout time.Duration
	// PerMerchant is how many of a merchant's events a lane leases at once.
	PerMerchant int
	// InFlight bounds the POSTs to one merchant's endpoint at once; 1
	// POSTs its events one after another.
	InFlight int
	// PollInterval is the wait between looks for due events.
	PollInterval time.Duration
	// Lease is how long a lane holds its events before another worker
	// may deliver them again; zero is long enough for every POST of a
	// full lane to time out, and one timeout and 5 s more to record them.
	Lease time.Duration
	// RetryFor is how long after its transition an event is retried
	// before it fails.
	RetryFor time.Duration
	// BackoffBase is the wait after the first failed try; each further
	// failure doubles it, up to BackoffMax, and a wait is drawn between
	// half of it and all of it.
	BackoffBase, BackoffMax time.Duration
	// Client sends the POSTs; nil is a client of its own that follows no
	// redirects.
	Client *http.Client
	// OnRecord, when set, is told of every recorded delivery (metrics).
	OnRecord func(order.DeliveryRecord)
	// Failpoint is called at the failpoints of the delivery (crash tests).
	Failpoint func(name string)
}

// Deliverer is the delivery worker.
type Deliverer struct {
	store     Store
	cfg       Config
	log       *slog.Logger
	endpoints map[string]Endpoint
	merchants []string
	// slots holds, per merchant, a token for each POST in flight to its
	// endpoint: the lanes of one merchant share its InFlight.
	slots map[string]chan struct{}
}

// New returns a worker delivering to cfg.Endpoints from store.
func New(store Store, cfg Config, log *slog.Logger) (*Deliverer, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PerMerchant <= 0 {
		cfg.PerMerchant = DefaultPerMerchant
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = DefaultInFlight
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPoll
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Duration(cfg.PerMerchant+1)*cfg.Timeout + 5*time.Second
	}
	if cfg.RetryFor <= 0 {
		cfg.RetryFor = DefaultRetryFor
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.BackoffMax < cfg.BackoffBase {
		return nil, errors.New("webhook: the longest backoff is shorter than the first")
	}
	if cfg.Client == nil {
		// The default transport keeps 2 idle connections a host: the
		// others of InFlight POSTs would be closed after each answer and
		// dialled again for the next.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = max(cfg.InFlight, t.MaxIdleConnsPerHost)
		cfg.Client = &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Failpoint == nil {
		cfg.Failpoint = func(string) {}
	}
	d := &Deliverer{store: store, cfg: cfg, log: log, endpoints: map[string]Endpoint{}, slots: map[string]chan struct{}{}}
	for _, e := range cfg.Endpoints {
		if _, ok := d.endpoints[e.MerchantID]; ok {
			return nil, fmt.Errorf("webhook: merchant %s has two endpoints", e.MerchantID)
		}
		if len(e.Secrets) == 0 {
			return nil, fmt.Errorf("webhook: merchant %s has no signing secret", e.MerchantID)
		}
		d.endpoints[e.MerchantID] = e
		d.merchants = append(d.merchants, e.MerchantID)
		d.slots[e.MerchantID] = make(chan struct{}, cfg.InFlight)
	}
	return d, nil
}

// Backlog returns the undelivered events of each merchant with an endpoint
// (for the metrics and their alert); merchants without one pull their
// events, and none of theirs is waiting.
func (d *Deliverer) Backlog(ctx context.Context) ([]order.DeliveryBacklog, error) {
	if len(d.merchants) == 0 {
		return nil, nil
	}
	return d.store.DeliveryBacklog(ctx, d.merchants)
}

// RunOnce leases every merchant's due events, delivers them (the lanes at
// once) and records the results; it returns how many were delivered.
func (d *Deliverer) RunOnce(ctx context.Context) (int, error) {
	if len(d.merchants) == 0 {
		return 0, nil
	}
	evs, err := d.store.LeaseDeliveries(ctx, d.merchants, d.cfg.PerMerchant, d.cfg.Lease)
	if err != nil {
		return 0, err
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		delivered int
		errs      []error
	)
	for _, lane := range lanes(evs) {
		wg.Go(func() {
			n, err := d.deliverLane(ctx, lane)
			mu.Lock()
			defer mu.Unlock()
			delivered += n
			errs = append(errs, err)
		})
	}
	wg.Wait()
	return delivered, errors.Join(errs...)
}

// pipeline is how many leased batches of one merchant Run holds at once:
// while one is POSTed, the next is leased and the one before recorded.
const pipeline = 2

// Run delivers until ctx ends. A merchant whose last batch came full has
// its next one leased while that one is POSTed, so that the worker's
// statements do not wait for its POSTs nor its POSTs for its statements;
// it holds at most two batches, and their POSTs share its InFlight, so a
// hanging endpoint holds up its own merchant alone.
func (d *Deliverer) Run(ctx context.Context) error {
	if len(d.merchants) == 0 {
		<-ctx.Done()
		return nil
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		held = map[string]int{}  // batches leased and not yet recorded
		full = map[string]bool{} // the merchant's last lease found a full batch
		wake = make(chan struct{}, 1)
	)
	defer wg.Wait()
	t := time.NewTicker(d.cfg.PollInterval)
	defer t.Stop()
	for {
		mu.Lock()
		due := make([]string, 0, len(d.merchants))
		for _, m := range d.merchants {
			if held[m] == 0 || held[m] < pipeline && full[m] {
				due = append(due, m)
				full[m] = false
			}
		}
		mu.Unlock()
		again := false
		if len(due) > 0 {
			evs, err := d.store.LeaseDeliveries(ctx, due, d.cfg.PerMerchant, d.cfg.Lease)
			if err != nil && ctx.Err() == nil {
				d.log.WarnContext(ctx, "lease event deliveries", "error", err)
			}
			for _, lane := range lanes(evs) {
				m, more := lane[0].MerchantID, len(lane) == d.cfg.PerMerchant
				mu.Lock()
				held[m]++
				full[m] = more
				again = again || more && held[m] < pipeline
				mu.Unlock()
				wg.Go(func() {
					if _, err := d.deliverLane(ctx, lane); err != nil && ctx.Err() == nil {
						d.log.WarnContext(ctx, "record event deliveries", "merchant", m, "error", err)
					}
					mu.Lock()
					held[m]--
					mu.Unlock()
					if more {
						select {
						case wake <- struct{}{}:
						default:
						}
					}
				})
			}
		}
		if again && ctx.Err() == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-wake:
		}
	}
}

// lanes groups leased events by merchant, keeping their order.
func lanes(evs []order.Notification) [][]order.Notification {
	var out [][]order.Notification
	for i, e := range evs {
		if i == 0 || e.MerchantID != evs[i-1].MerchantID {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], e)
	}
	return out
}

// deliverLane POSTs one merchant's events and records the results in one
// statement. The first POST goes alone, then up to InFlight of the
// merchant's at once. After a failed POST no more are sent: the rest are
// put back untried, with the same backoff, so that an endpoint that is
// down is not asked once per event.
func (d *Deliverer) deliverLane(ctx context.Context, lane []order.Notification) (int, error) {
	ep := d.endpoints[lane[0].MerchantID]
	slots := d.slots[ep.MerchantID]
	ds := make([]order.Delivery, len(lane))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		failed  bool
		backoff time.Duration // after the lane's first failed POST
	)
	stopped := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return failed || ctx.Err() != nil
	}
send:
	for i, e := range lane {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			// A shutdown: this event and the rest are put back untried.
			break send
		}
		if stopped() {
			<-slots
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			del := d.try(ctx, ep, e)
			if del.Outcome == order.DeliveryRetry {
				mu.Lock()
				if !failed {
					failed, backoff = true, del.Backoff
				}
				mu.Unlock()
			}
			ds[i] = del
		})
		if i == 0 {
			wg.Wait()
		}
	}
	wg.Wait()
	for i, e := range lane {
		if ds[i].Outcome == "" {
			ds[i] = order.Delivery{MerchantID: e.MerchantID, Num: e.Num, Outcome: order.DeliveryUntried, Backoff: backoff}
		}
	}
	d.cfg.Failpoint(failpoint.AfterWebhookPost)
	// The results are recorded even when ctx has ended (a shutdown), so
	// that what was delivered is not delivered again.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	recs, err := d.store.RecordDeliveries(rctx, ds, d.cfg.RetryFor)
	if err != nil {
		return 0, err
	}
	delivered := 0
	for _, r := range recs {
		if r.Outcome == order.DeliveryDelivered {
			delivered++
		}
		if r.Failed {
			d.log.WarnContext(ctx, "event failed: retries exhausted", "merchant", r.MerchantID, "event_id", order.EventID(r.Num))
		}
		if d.cfg.OnRecord != nil {
			d.cfg.OnRecord(r)
		}
	}
	return delivered, nil
}

// try POSTs one event and returns its result: delivered, or to be retried
// after a backoff.
func (d *Deliverer) try(ctx context.Context, ep Endpoint, e order.Notification) order.Delivery {
	del := order.Delivery{MerchantID: e.MerchantID, Num: e.Num}
	status, err := d.post(ctx, ep, e)
	del.Status = status
	if err == nil {
		del.Outcome = order.DeliveryDelivered
		return del
	}
	backoff := d.backoff(e.Attempts)
	del.Outcome, del.Backoff, del.Attempt, del.Error = order.DeliveryRetry, backoff, e.Attempts, err.Error()
	// The endpoint's answer is its own text: only the status and the kind
	// of failure are logged, never a body or the URL.
	d.log.InfoContext(ctx, "event delivery failed", "merchant", e.MerchantID, "event_id", e.ID(),
		"attempt", e.Attempts, "status", status, "error", err, "retry_in", backoff)
	return del
}

// errStatus is an answer other than 2xx.
type errStatus int

func (e errStatus) Error() string { return fmt.Sprintf("endpoint answered %d", int(e)) }

// post sends one event, signed, and returns the status of the answer (0
// for none); a 2xx answer is the only success.
func (d *Deliverer) post(ctx context.Context, ep Endpoint, e order.Notification) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	body := e.Payload()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("bad endpoint URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Settle-Webhooks/1")
	id, now := e.ID(), time.Now()
	req.Header.Set("Settle-Event-Id", id)
	req.Header.Set("Settle-Event-Type", e.Type)
	req.Header.Set(SignatureHeader, SignatureValue(ep.Secrets, now, body))
	req.Header.Set(HeaderWebhookID, id)
	req.Header.Set(HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderWebhookSignature, StandardSignature(ep.Secrets, id, now, body))
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		// The error quotes the URL, which may hold the merchant's token.
		if ctx.Err() != nil {
			return 0, errors.New("no answer within the timeout")
		}
		return 0, errors.New("the request failed (connection)")
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, errStatus(resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// backoff is the wait after the attempt-th failed try: BackoffBase doubled
// attempt-1 times, at most BackoffMax, drawn between half of it and all.
func (d *Deliverer) backoff(attempt int) time.Duration {
	w := d.cfg.BackoffBase
	for i := 1; i < attempt && w < d.cfg.BackoffMax; i++ {
		w *= 2
	}
	w = min(w, d.cfg.BackoffMax)
	return w/2 + rand.N(w/2+1)
}

package examples

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/delivery"
)

// phpDir is the PHP example; it needs php-cli and php-curl, nothing else.
const phpDir = "php"

// needPHP checks for php with its curl extension.
func needPHP(t *testing.T) string {
	t.Helper()
	php := needCommand(t, "php", "apt-get install php-cli php-curl")
	out, err := exec.Command(php, "-r", `echo function_exists("curl_init") ? "yes" : "no";`).Output()
	need(t, "php's curl extension", err == nil && string(out) == "yes", "apt-get install php-curl")
	return php
}

// phpCmd is `php script args...` in the example's directory.
func phpCmd(php string, env []string, script string, args ...string) *exec.Cmd {
	return exampleCmd(phpDir, php, env, script, args...)
}

// jsonURL is the base URL of dev's JSON API, from its banner's "json:"
// line.
func (d *dev) jsonURL(t *testing.T) string {
	t.Helper()
	u := bannerValue(t, d.output(), "\n  json:")
	if !strings.HasPrefix(u, "http") {
		u = "http://" + u
	}
	return strings.TrimRight(u, "/")
}

// TestPHPWorkerKilledMidCharge is the Node worker's test for the PHP queue
// job: ChargeOrderJob, dispatched with its request id into the file queue,
// is reserved by worker.php, which is killed with SIGKILL while its
// tok_slow_6000 charge is in flight over the JSON API; the next worker
// takes the job again from its payload, with the same request id, and
// the order ends PAID with one charge in the simulator's ledger.
func TestPHPWorkerKilledMidCharge(t *testing.T) {
	php := needPHP(t)
	d := startDev(t)
	base := d.jsonURL(t)
	queueDir := t.TempDir()
	env := []string{"SETTLE_JSON_URL=" + base, "SETTLE_KEY=" + d.key, "QUEUE_DIR=" + queueDir}

	const ref, amount = "php-kill-1", 3100
	out, err := phpCmd(php, env, "dispatch.php", ref, strconv.Itoa(amount), "GBP", "tok_slow_6000").Output()
	if err != nil {
		t.Fatalf("dispatch.php: %v\n%s", err, out)
	}
	var dispatched struct {
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(out, &dispatched); err != nil || dispatched.RequestID == "" {
		t.Fatalf("dispatch.php printed %q (%v); want its request_id", out, err)
	}

	first := start(t, "worker.php 1", phpCmd(php, env, "worker.php"))
	first.waitJSON(0, 20*time.Second, "charging", map[string]string{"merchant_reference": ref})
	d.waitState(t, ref, settlev1.OrderState_ORDER_STATE_CHARGING, 10*time.Second)
	first.kill()
	o := d.order(t, ref)
	if o.GetState() != settlev1.OrderState_ORDER_STATE_CHARGING {
		t.Fatalf("the worker was killed after the charge ended (%s): the test proves nothing; slow the token down", o.GetState())
	}
	if reserved, _ := filepath.Glob(filepath.Join(queueDir, "reserved", "*.job")); len(reserved) != 1 {
		t.Fatalf("reserved jobs after the kill: %v; want the killed worker's one", reserved)
	}

	second := start(t, "worker.php 2", phpCmd(php, env, "worker.php"))
	done, _ := second.waitJSON(0, 60*time.Second, "completed", map[string]string{"merchant_reference": ref})
	if done["state"] != "ORDER_STATE_PAID" || done["order_id"] != o.GetId() {
		t.Errorf("the second worker completed the job with %v; want order %s PAID", done, o.GetId())
	}
	d.checkOneCharge(t, ref, amount)
	// Every delivery charged under the request id made at dispatch (or
	// returned early once the order was PAID).
	for _, l := range strings.Split(first.output()+"\n"+second.output(), "\n") {
		if strings.Contains(l, `"msg":"charging"`) && !strings.Contains(l, `"request_id":"`+dispatched.RequestID+`"`) {
			t.Errorf("a delivery charged under another request id than the dispatch's %s: %s", dispatched.RequestID, l)
		}
	}
	if !strings.Contains(second.output(), `"request_id":"`+dispatched.RequestID+`"`) && !strings.Contains(second.output(), `"msg":"already paid"`) {
		t.Errorf("the second worker neither replayed the charge nor returned early:\n%s", second.output())
	}
}

// TestPHPReceiverVerifiesEvents puts receiver.php (PHP's built-in server)
// behind a recording proxy as settle dev's events endpoint: Settle's
// order.paid verifies with WebhookVerifier; the same delivery tampered
// with, signed with another secret, or too old, is refused with 400; a
// signature list holding the right one among others (a secret being
// rotated) is accepted.
func TestPHPReceiverVerifiesEvents(t *testing.T) {
	php := needPHP(t)
	secret := newSecret(t)
	addr := freeAddr(t)
	recv := start(t, "receiver.php", phpCmd(php, []string{"WEBHOOK_SECRET=" + secret}, "-S", addr, "receiver.php"))
	recvURL := "http://" + addr + "/events"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/"); err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("php -S does not answer on %s:\n%s", addr, recv.output())
		}
	}
	got, post := paidDelivery(t, recvURL, secret, "php-events-1")
	id := got.header.Get(delivery.HeaderWebhookID)
	recv.waitJSON(0, 5*time.Second, "event", map[string]string{"webhook_id": id, "type": "order.paid", "state": "PAID"})

	resign := func(secrets []string, at time.Time, body []byte) http.Header {
		h := got.header.Clone()
		h.Set(delivery.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
		h.Set(delivery.HeaderWebhookSignature, delivery.StandardSignature(secrets, id, at, body))
		return h
	}
	tampered := []byte(strings.Replace(string(got.body), "1999", "19", 1))
	now := time.Now()
	for _, c := range []struct {
		name   string
		header http.Header
		body   []byte
		want   int
	}{
		{"tampered body", got.header, tampered, http.StatusBadRequest},
		{"another secret", resign([]string{newSecret(t)}, now, got.body), got.body, http.StatusBadRequest},
		{"ten minutes old", resign([]string{secret}, now.Add(-10*time.Minute), got.body), got.body, http.StatusBadRequest},
		{"ten minutes ahead", resign([]string{secret}, now.Add(10*time.Minute), got.body), got.body, http.StatusBadRequest},
		{"rotation: the old secret and ours", resign([]string{newSecret(t), secret}, now, got.body), got.body, http.StatusOK},
		{"Settle's delivery again", got.header, got.body, http.StatusOK},
	} {
		if s := post(c.header, c.body); s != c.want {
			t.Errorf("%s: answered %d; want %d", c.name, s, c.want)
		}
	}
	recv.waitJSON(0, 5*time.Second, "rejected", map[string]string{"webhook_id": id, "error": "webhook-timestamp is outside the tolerance"})
	recv.waitJSON(0, 5*time.Second, "rejected", map[string]string{"webhook_id": id, "error": "no valid signature"})
}

package examples

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/delivery"
)

// nodeDir is the Node example, installed by `npm ci` there (.ci/run does).
const nodeDir = "node"

// needNode checks for node and the example's installed packages.
func needNode(t *testing.T) string {
	t.Helper()
	node := needCommand(t, "node", "apt-get install nodejs npm")
	_, err := os.Stat(filepath.Join(nodeDir, "node_modules", "bullmq", "package.json"))
	need(t, "examples/node's packages", err == nil, "run `npm ci` in examples/node")
	return node
}

// nodeCmd is `node script args...` in the example's directory.
func nodeCmd(node string, env []string, script string, args ...string) *exec.Cmd {
	return exampleCmd(nodeDir, node, env, script, args...)
}

// newSecret is an endpoint secret in the Standard Webhooks form.
func newSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// TestNodeWorkerKilledMidCharge runs the BullMQ worker against settle dev
// and a Redis of the test's own, enqueues a checkout whose charge the
// simulator answers after six seconds, kills the worker with SIGKILL
// while the charge is in flight, and starts another: BullMQ delivers the
// job again, under the same job id and so the same request_id, and the
// order ends PAID with one charge in the simulator's ledger. The checkout
// enqueued twice adds nothing either.
func TestNodeWorkerKilledMidCharge(t *testing.T) {
	node := needNode(t)
	sock := startRedis(t)
	d := startDev(t)
	env := []string{"SETTLE_ADDR=" + d.grpcAddr, "SETTLE_KEY=" + d.key, "REDIS_SOCKET=" + sock,
		// A dead worker's job is taken again within about three seconds,
		// not BullMQ's default thirty.
		"LOCK_MS=2000", "STALLED_MS=500"}

	first := start(t, "worker 1", nodeCmd(node, env, "worker.js"))
	first.waitJSON(0, 30*time.Second, "ready", nil)

	const ref, amount = "node-kill-1", 4200
	enqueue := func() {
		t.Helper()
		out, err := nodeCmd(node, env, "enqueue.js", ref, strconv.Itoa(amount), "GBP", "tok_slow_6000").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "charge-"+ref {
			t.Fatalf("enqueue.js: %v\n%s", err, out)
		}
	}
	enqueue()
	first.waitJSON(0, 20*time.Second, "charging", map[string]string{"job": "charge-" + ref})
	// The call has reached Settle, and Settle the gateway: kill the worker
	// with its answer still to come.
	d.waitState(t, ref, settlev1.OrderState_ORDER_STATE_CHARGING, 10*time.Second)
	first.kill()
	if c := d.charges(t, ref); len(c) != 1 {
		t.Fatalf("charges of %s while in flight: %+v; want one", ref, c)
	}
	o := d.order(t, ref)
	if o.GetState() != settlev1.OrderState_ORDER_STATE_CHARGING {
		t.Fatalf("the worker was killed after the charge ended (%s): the test proves nothing; slow the token down", o.GetState())
	}

	second := start(t, "worker 2", nodeCmd(node, env, "worker.js"))
	done, _ := second.waitJSON(0, 60*time.Second, "completed", map[string]string{"job": "charge-" + ref})
	if done["state"] != "ORDER_STATE_PAID" || done["orderId"] != o.GetId() {
		t.Errorf("the second worker completed the job with %v; want order %s PAID", done, o.GetId())
	}
	d.checkOneCharge(t, ref, amount)
	// The redelivery charged under the first delivery's request_id: a
	// replay of its attempt, or the early return once it was PAID.
	second.waitLine(0, time.Second, "a redelivery under the same request_id", func(l string) bool {
		return strings.Contains(l, `"msg":"already paid"`) || strings.Contains(l, `"request_id":"charge-`+ref+`"`)
	})

	// The checkout enqueues the same charge again (a double click, a
	// retried request): the job id exists, nothing is added or charged.
	enqueue()
	time.Sleep(time.Second)
	if c := d.charges(t, ref); len(c) != 1 {
		t.Fatalf("charges of %s after a second enqueue: %+v; want one", ref, c)
	}
	if strings.Count(second.output(), `"msg":"completed"`) != 1 {
		t.Errorf("the second enqueue ran the job again:\n%s", second.output())
	}
}

// TestNodeReceiverVerifiesEvents puts the Node receiver behind a recording
// proxy as the default merchant's events endpoint of settle dev: Settle's
// delivery of order.paid is verified by standardwebhooks and accepted; the
// same delivery with its body tampered with, or signed with another
// secret, is refused with 400, and a repeat of it is accepted once.
func TestNodeReceiverVerifiesEvents(t *testing.T) {
	node := needNode(t)
	secret := newSecret(t)
	recv := start(t, "receiver", nodeCmd(node, []string{"WEBHOOK_SECRET=" + secret}, "receiver.js"))
	listening, _ := recv.waitJSON(0, 30*time.Second, "listening", nil)
	got, post := paidDelivery(t, "http://"+listening["addr"].(string)+"/events", secret, "node-events-1")
	id := got.header.Get(delivery.HeaderWebhookID)
	recv.waitJSON(0, 5*time.Second, "event", map[string]string{"webhook_id": id, "type": "order.paid", "state": "PAID"})

	// The same bytes with the amount changed: refused.
	tampered := bytes.Replace(got.body, []byte("1999"), []byte("19"), 1)
	if bytes.Equal(tampered, got.body) {
		t.Fatalf("the delivery does not carry the amount: %s", got.body)
	}
	if s := post(got.header, tampered); s != http.StatusBadRequest {
		t.Errorf("a tampered delivery was answered %d; want 400", s)
	}
	// Signed by someone without the endpoint's secret: refused.
	forged := got.header.Clone()
	now := time.Now()
	forged.Set(delivery.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	forged.Set(delivery.HeaderWebhookSignature, delivery.StandardSignature([]string{newSecret(t)}, id, now, got.body))
	if s := post(forged, got.body); s != http.StatusBadRequest {
		t.Errorf("a delivery signed with another secret was answered %d; want 400", s)
	}
	// Without a signature: refused.
	bare := got.header.Clone()
	bare.Del(delivery.HeaderWebhookSignature)
	if s := post(bare, got.body); s != http.StatusBadRequest {
		t.Errorf("a delivery without a signature was answered %d; want 400", s)
	}
	recv.waitJSON(0, 5*time.Second, "rejected", map[string]string{"webhook_id": id})
	// Settle's delivery again (a retry): accepted, processed once.
	if s := post(got.header, got.body); s != http.StatusOK {
		t.Errorf("a repeat of the delivery was answered %d; want 200", s)
	}
	recv.waitJSON(0, 5*time.Second, "duplicate", map[string]string{"webhook_id": id})
	if n := strings.Count(recv.output(), `"msg":"event","webhook_id":"`+id+`"`); n != 1 {
		t.Errorf("event %s processed %d times; want once", id, n)
	}
}

package grpcapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials/insecure"

	"github.com/settlepay/settle"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/telemetry"
)

// jsonStack is a stack whose server also serves JSON over HTTP, on a
// loopback socket of its own.
type jsonStack struct {
	*stack
	base    string // http://127.0.0.1:port
	metrics *telemetry.Metrics
}

func newJSONStack(t *testing.T) *jsonStack {
	t.Helper()
	metrics := telemetry.NewMetrics()
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Metrics: metrics,
		JSON: &grpcapi.JSONOptions{OpenAPI: settle.OpenAPI}}, insecure.NewCredentials())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.srv.ServeJSON(lis) }()
	t.Cleanup(func() {
		s.srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("ServeJSON: %v", err)
		}
	})
	return &jsonStack{stack: s, base: "http://" + lis.Addr().String(), metrics: metrics}
}

// jsonReply is an HTTP answer: its status and its JSON body.
type jsonReply struct {
	code int
	body map[string]any
	raw  string
}

// call sends one request; key "" sends no Authorization, and header
// pairs are added as they come.
func (s *jsonStack) call(t *testing.T, method, path, key, contentType, body string, header ...string) jsonReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := jsonReply{code: resp.StatusCode, raw: string(b)}
	if err := json.Unmarshal(b, &r.body); err != nil {
		t.Fatalf("%s %s: %d, body is not a JSON object: %q", method, path, resp.StatusCode, b)
	}
	return r
}

func (s *jsonStack) post(t *testing.T, path, key, body string, header ...string) jsonReply {
	t.Helper()
	return s.call(t, http.MethodPost, path, key, "application/json", body, header...)
}

// get reads a string at a dotted path of a JSON body.
func (r jsonReply) get(path string) string {
	var v any = r.body
	for p := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// wantStatus checks an error answer: its HTTP status, and a
// google.rpc.Status body with the gRPC code.
func (r jsonReply) wantStatus(t *testing.T, httpCode, grpcCode int) {
	t.Helper()
	if r.code != httpCode {
		t.Fatalf("HTTP %d, want %d: %s", r.code, httpCode, r.raw)
	}
	if got := r.get("code"); got != strconv.Itoa(grpcCode) {
		t.Fatalf("google.rpc.Status code %q, want %d: %s", got, grpcCode, r.raw)
	}
	if r.get("message") == "" {
		t.Fatalf("google.rpc.Status without a message: %s", r.raw)
	}
}

const payJSON = `{"merchant_reference":"%s","amount":{"currency":"GBP","amount_minor":1250},"payment_method":"tok_ok"}`

func orderJSON(ref string) string { return strings.Replace(payJSON, "%s", ref, 1) }

// sums adds up the counter metric of metrics by the value of its label.
func sums(t *testing.T, metrics *telemetry.Metrics, metric, label string) map[string]float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					got[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// TestJSONCreateChargeGet is a checkout's whole path over JSON: create,
// charge, read back, with a Bearer key.
func TestJSONCreateChargeGet(t *testing.T) {
	t.Parallel()
	s := newJSONStack(t)
	created := s.post(t, "/v1/orders", keyA, orderJSON("json-1"))
	if created.code != http.StatusOK {
		t.Fatalf("create: %d %s", created.code, created.raw)
	}
	id := created.get("order.id")
	if id == "" || created.get("order.state") != "ORDER_STATE_PENDING" {
		t.Fatalf("create: %s", created.raw)
	}
	charged := s.post(t, "/v1/orders/"+id+":charge", keyA, `{"request_id":"json-1-click-1"}`)
	if charged.code != http.StatusOK || charged.get("order.state") != "ORDER_STATE_PAID" {
		t.Fatalf("charge: %d %s", charged.code, charged.raw)
	}
	got := s.call(t, http.MethodGet, "/v1/orders/"+id, keyA, "", "")
	if got.code != http.StatusOK || got.get("order.state") != "ORDER_STATE_PAID" || got.get("order.merchantReference") != "json-1" {
		t.Fatalf("get: %d %s", got.code, got.raw)
	}
	byRef := s.call(t, http.MethodGet, "/v1/orders?merchant_reference=json-1", keyA, "", "")
	if byRef.code != http.StatusOK || byRef.get("order.id") != id {
		t.Fatalf("get by merchant reference: %d %s", byRef.code, byRef.raw)
	}
	if n := s.charges(t, id); n != 1 {
		t.Fatalf("the simulator charged %d times, want 1", n)
	}
	// The call went through the metrics interceptor as a gRPC call does.
	handled := sums(t, s.metrics, "grpc_server_handled_total", "grpc_method")
	if handled["ChargeOrder"] < 1 || handled["CreateOrder"] < 1 {
		t.Fatalf("grpc_server_handled_total by method: %v, want ChargeOrder and CreateOrder counted", handled)
	}
	// And through the logging interceptor (debug for a success).
	if !strings.Contains(s.logs.String(), "settle.v1.OrderService") || !strings.Contains(s.logs.String(), "ChargeOrder") {
		t.Fatalf("no log line for the JSON calls:\n%s", s.logs.String())
	}
}

// TestJSONErrors: each refusal is its HTTP status with a google.rpc.Status
// body.
func TestJSONErrors(t *testing.T) {
	t.Parallel()
	s := newJSONStack(t)
	const (
		invalidArgument  = 3
		notFound         = 5
		permissionDenied = 7
		resourcesOut     = 8
		unauthenticated  = 16
	)
	t.Run("no key", func(t *testing.T) {
		s.post(t, "/v1/orders", "", orderJSON("json-err-1")).wantStatus(t, http.StatusUnauthorized, unauthenticated)
	})
	t.Run("wrong key", func(t *testing.T) {
		s.post(t, "/v1/orders", "sk_not_a_key", orderJSON("json-err-1")).wantStatus(t, http.StatusUnauthorized, unauthenticated)
	})
	t.Run("checkout key on ops", func(t *testing.T) {
		s.call(t, http.MethodGet, "/v1/ops/orders", keyA, "", "").wantStatus(t, http.StatusForbidden, permissionDenied)
	})
	t.Run("ops key on ops", func(t *testing.T) {
		if r := s.call(t, http.MethodGet, "/v1/ops/orders", keyAop, "", ""); r.code != http.StatusOK {
			t.Fatalf("ops key on /v1/ops/orders: %d %s", r.code, r.raw)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		s.post(t, "/v1/orders", keyA, `{"merchant_reference":"json-err-2","amount":{"currency":"GBP","amount_minor":-5},"payment_method":"tok_ok"}`).
			wantStatus(t, http.StatusBadRequest, invalidArgument)
	})
	t.Run("unknown field", func(t *testing.T) {
		s.post(t, "/v1/orders/ord_x:charge", keyA, `{"requestid":"typo"}`).wantStatus(t, http.StatusBadRequest, invalidArgument)
	})
	t.Run("not JSON", func(t *testing.T) {
		s.post(t, "/v1/orders", keyA, `{"merchant_reference":`).wantStatus(t, http.StatusBadRequest, invalidArgument)
	})
	t.Run("not found", func(t *testing.T) {
		id := s.post(t, "/v1/orders", keyA, orderJSON("json-err-5")).get("order.id")
		s.call(t, http.MethodGet, "/v1/orders/"+id, keyB, "", "").wantStatus(t, http.StatusNotFound, notFound)
	})
	t.Run("no such path", func(t *testing.T) {
		s.call(t, http.MethodGet, "/v1/nothing-here", keyA, "", "").wantStatus(t, http.StatusNotFound, notFound)
		s.post(t, "/settle.v1.OrderService/CreateOrder", keyA, orderJSON("json-err-3")).wantStatus(t, http.StatusNotFound, notFound)
	})
	t.Run("oversize body", func(t *testing.T) {
		big := `{"merchant_reference":"` + strings.Repeat("x", grpcapi.MaxMessageBytes) + `"}`
		s.post(t, "/v1/orders", keyA, big).wantStatus(t, http.StatusRequestEntityTooLarge, resourcesOut)
	})
	t.Run("text/plain", func(t *testing.T) {
		s.call(t, http.MethodPost, "/v1/orders", keyA, "text/plain", orderJSON("json-err-4")).
			wantStatus(t, http.StatusUnsupportedMediaType, invalidArgument)
	})
	t.Run("oversize header", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, s.base+"/v1/orders/ord_x", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Padding", strings.Repeat("p", 2*grpcapi.MaxHeaderBytes))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("oversize header: %d, want 431", resp.StatusCode)
		}
	})
}

// TestJSONIdempotencyKey: the header names the attempt where the body has
// no request_id; a replay is the same attempt and one charge; a header
// that contradicts the body is refused.
func TestJSONIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := newJSONStack(t)
	id := s.post(t, "/v1/orders", keyA, orderJSON("json-idem-1")).get("order.id")
	first := s.post(t, "/v1/orders/"+id+":charge", keyA, `{}`, grpcapi.IdempotencyKeyHeader, "json-idem-1-click-1")
	if first.code != http.StatusOK || first.get("order.state") != "ORDER_STATE_PAID" || first.get("attempt.requestId") != "json-idem-1-click-1" {
		t.Fatalf("first charge: %d %s", first.code, first.raw)
	}
	again := s.post(t, "/v1/orders/"+id+":charge", keyA, `{}`, grpcapi.IdempotencyKeyHeader, "json-idem-1-click-1")
	if again.code != http.StatusOK || again.get("attempt.id") != first.get("attempt.id") {
		t.Fatalf("replay: %d %s, want attempt %s", again.code, again.raw, first.get("attempt.id"))
	}
	// The same key in both is one request id.
	both := s.post(t, "/v1/orders/"+id+":charge", keyA, `{"request_id":"json-idem-1-click-1"}`, grpcapi.IdempotencyKeyHeader, "json-idem-1-click-1")
	if both.code != http.StatusOK || both.get("attempt.id") != first.get("attempt.id") {
		t.Fatalf("header and body alike: %d %s", both.code, both.raw)
	}
	s.post(t, "/v1/orders/"+id+":charge", keyA, `{"request_id":"json-idem-1-click-2"}`, grpcapi.IdempotencyKeyHeader, "json-idem-1-click-1").
		wantStatus(t, http.StatusBadRequest, 3)
	if n := s.charges(t, id); n != 1 {
		t.Fatalf("the simulator charged %d times, want 1", n)
	}
	// The one-call path takes the header too.
	one := s.post(t, "/v1/orders:createAndCharge", keyA, orderJSON("json-idem-2"), grpcapi.IdempotencyKeyHeader, "json-idem-2-click-1")
	oneAgain := s.post(t, "/v1/orders:createAndCharge", keyA, orderJSON("json-idem-2"), grpcapi.IdempotencyKeyHeader, "json-idem-2-click-1")
	if one.code != http.StatusOK || one.get("attempt.id") == "" || oneAgain.get("attempt.id") != one.get("attempt.id") {
		t.Fatalf("createAndCharge with Idempotency-Key: %s then %s", one.raw, oneAgain.raw)
	}
	if n := s.charges(t, one.get("order.id")); n != 1 {
		t.Fatalf("the simulator charged %d times, want 1", n)
	}
}

// TestJSONOpenAPIServed: the generated document is served and names the
// paths.
func TestJSONOpenAPIServed(t *testing.T) {
	t.Parallel()
	s := newJSONStack(t)
	r := s.call(t, http.MethodGet, grpcapi.OpenAPIPath, "", "", "")
	if r.code != http.StatusOK || r.get("swagger") != "2.0" {
		t.Fatalf("OpenAPI document: %d %.200s", r.code, r.raw)
	}
	paths, _ := r.body["paths"].(map[string]any)
	post, _ := paths["/v1/orders"].(map[string]any)
	if post["post"] == nil {
		t.Fatalf("the OpenAPI document has no POST /v1/orders: %.300s", r.raw)
	}
	if !bytes.Equal([]byte(r.raw), settle.OpenAPI) {
		t.Fatal("the served document is not the generated one")
	}
}

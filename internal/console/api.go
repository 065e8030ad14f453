package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The console is a client of Settle's own API: each read and action is a
// unary call of the Connect protocol with a JSON body, handed in process
// to the API's handler (grpcapi.Server.InProcess) with the session's ops
// key as its bearer key. The call passes the API's interceptors like any
// other: the key's role and merchant scope, its limits, the log, and the
// key's name as the actor of what it changes.

const (
	opsService   = "/settle.v1.OpsService/"
	maxReplySize = 4 << 20
)

// apiError is an API call's error as the Connect protocol answers it.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// call calls OpsService's method with req as key, from the browser's
// address, and reads the reply into resp.
func (c *Console) call(ctx context.Context, remoteAddr, key, method string, req, resp proto.Message) error {
	body, err := protojson.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://settle.internal"+opsService+method, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("call %s: %w", method, err)
	}
	r.RemoteAddr = remoteAddr
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Connect-Protocol-Version", "1")
	r.Header.Set("Authorization", "Bearer "+key)
	w := &replyWriter{header: http.Header{}}
	c.api.ServeHTTP(w, r)
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.code != http.StatusOK {
		e := &apiError{}
		if err := json.Unmarshal(w.body.Bytes(), e); err != nil || e.Code == "" {
			return &apiError{Code: "unknown", Message: fmt.Sprintf("the API answered HTTP %d", w.code)}
		}
		return e
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(w.body.Bytes(), resp); err != nil {
		return fmt.Errorf("decode %s: %w", method, err)
	}
	return nil
}

// replyWriter holds an in-process call's answer.
type replyWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *replyWriter) Header() http.Header { return w.header }

func (w *replyWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *replyWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.body.Len()+len(b) > maxReplySize {
		return 0, fmt.Errorf("the API's answer is larger than %d bytes", maxReplySize)
	}
	return w.body.Write(b)
}

// Flush implements http.Flusher, which the transcoder may ask for.
func (w *replyWriter) Flush() {}

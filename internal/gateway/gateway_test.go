package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
)

func TestIsDialErrorSeesThroughWrapping(t *testing.T) {
	transportErr := func(err error) error { return &url.Error{Op: "Post", URL: "http://psp.test/v1/charges", Err: err} }
	err := fmt.Errorf("charging: %w", transportErr(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}))
	if !IsDialError(err) {
		t.Errorf("IsDialError(%v) = false, want true", err)
	}
	if !IsDialError(transportErr(&net.DNSError{Err: "no such host", Name: "psp.test", IsNotFound: true})) {
		t.Error("IsDialError(no such host) = false, want true")
	}
	if IsDialError(transportErr(io.EOF)) {
		t.Error("IsDialError(EOF) = true, want false")
	}
	if IsDialError(errors.New("dial tcp: connection refused")) {
		t.Error("IsDialError matched an error by its text")
	}
}

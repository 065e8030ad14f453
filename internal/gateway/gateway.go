// Package gateway holds what Settle's gateway adapters share. The adapters
// are its subpackages: refpsp, stripe, and the simulator sim.
package gateway

import (
	"errors"
	"net"
)

// IsDialError reports whether err is a failure to connect: a refused or
// unreachable address, or a name that did not resolve. A request that
// failed so was never sent.
func IsDialError(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

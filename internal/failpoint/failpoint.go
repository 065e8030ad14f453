// Package failpoint kills the process at named instants, so that tests can
// prove that a crash there loses nothing. Failpoints are armed only by the
// SETTLE_FAILPOINTS environment variable (a comma-separated list of names);
// unarmed, a failpoint is a lookup in an empty map.
package failpoint

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// The failpoints compiled into Settle.
const (
	// AfterClaim: the claim has committed; the gateway has not been called.
	AfterClaim = "after-claim"
	// AfterGateway: the gateway has answered; the settle has not committed.
	AfterGateway = "after-gateway"
	// MidBatch: a reconciler has claimed a batch and started the lookups of
	// half of it; some of those may be settled, some queued to be.
	MidBatch = "reconcile-mid-batch"
	// AfterWebhookPost: a delivery lane's POSTs have been answered; their
	// results are not recorded.
	AfterWebhookPost = "after-webhook-post"
)

var known = map[string]bool{AfterClaim: true, AfterGateway: true, MidBatch: true, AfterWebhookPost: true}

// Set is the armed failpoints.
type Set map[string]bool

// Parse arms the failpoints named in spec ("after-claim,after-gateway").
func Parse(spec string) (Set, error) {
	s := Set{}
	for name := range strings.SplitSeq(spec, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !known[name] {
			return nil, fmt.Errorf("unknown failpoint %q", name)
		}
		s[name] = true
	}
	return s, nil
}

// Hit kills the process with SIGKILL if the failpoint name is armed: no
// deferred function, no flush, nothing the process could tidy up.
func (s Set) Hit(name string) {
	if s[name] {
		fmt.Fprintf(os.Stderr, "failpoint %s: killing process\n", name)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not instant; never return from here.
	}
}

// Package bench holds the pgbench scripts of `settle bench`, embedded so
// that the binary can run them wherever it is: floor.sql (the SQL floor of
// the charge path), naive.sql (the same work as multi-statement
// transactions), floor_one_call.sql (the SQL floor of the one-call path:
// create and claim in one statement, then settle), floor_refund.sql (the
// SQL floor of a refund: claim, settle), settle_floor.sql (the reconciler's
// settle statement) and deliver_floor.sql (the delivery worker's lease and
// record statements).
// README.md explains them and how to read the results.
package bench

import "embed"

// Scripts holds the pgbench scripts.
//
//go:embed *.sql
var Scripts embed.FS

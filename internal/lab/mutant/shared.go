package mutant

// Mutations that more than one package's tests build: each must be caught
// by every test that names it (the order package's own tests and the
// chaos harness alike), so it is written once.

// CascadeAfterTimeout is the orchestrator's classic double charge: an
// attempt that timed out is marked failed, and the charge cascades to the
// next gateway while the first may have charged.
var CascadeAfterTimeout = []Mutation{
	{File: "internal/order/charge.go",
		Old: "\t\t// Unknown, or an adapter that broke its contract: find out later.\n" +
			"\t\tst.Result.Outcome = OutcomeUnknown\n\t\treturn st\n\t}",
		New: "\t\tst.Event = EventFail\n\t}"},
	{File: "internal/order/cascade.go",
		Old: "\t\t// Unknown, in flight, or an outcome this table does not know:\n" +
			"\t\t// money may have moved.\n\t\treturn CascadeWait",
		New: "\t\treturn CascadeNext"},
}

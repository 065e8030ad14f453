package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// The store's conformance suite: what the store must do whichever engine
// its database runs. TestStoreOnPostgres and TestStoreOnCitus run it, each
// on a database of its engine, in the same run (River's driver test suite
// is the model). A test of the suite takes its databases from db, never
// from postgrestest; where an engine does something otherwise on purpose,
// the test says so and asks db.citus. A test of one engine alone (its
// plans, its catalog, its delegation) stays outside the suite.

// storeDB is the engine the suite runs on.
type storeDB struct {
	// pool returns a pool on a fresh migrated database of the engine,
	// closed when the test ends.
	pool func(testing.TB) *pgxpool.Pool
	// citus is whether the engine is Citus.
	citus bool
}

// storeSuite is the conformance suite, each test by name.
var storeSuite = []struct {
	name string
	test func(*testing.T, storeDB)
}{
	{"CreateOrderIdempotent", testCreateOrderIdempotent},
	{"ClaimConcurrentOneWinner", testClaimConcurrentOneWinner},
	{"SettleGuard", testSettleGuard},
	{"SettleLeaseGuard", testSettleLeaseGuard},
	{"ClaimWaitingForSettle", testClaimWaitingForSettle},
	{"CreateClaimed", testCreateClaimed},
	{"Scope", testScope},
	{"ClaimOrder", testClaimOrder},
	{"ClaimManyFailsOnlyItsRow", testClaimManyFailsOnlyItsRow},
	{"CreateOrdersGrouped", testCreateOrdersGrouped},
	{"ConcurrentClaimsGrouped", testConcurrentClaimsGrouped},
	{"CreateClaimedFailsOnlyItsOrder", testCreateClaimedFailsOnlyItsOrder},
	{"SettleMany", testSettleMany},
	{"SettleManyOverlapping", testSettleManyOverlapping},
	{"SettleManyWaitingForSettle", testSettleManyWaitingForSettle},
	{"SettleGroups", testSettleGroups},
	{"SettleGroupPoisoned", testSettleGroupPoisoned},
	{"SettleTruncatesToValidUTF8", testSettleTruncatesToValidUTF8},
	{"SettleRefundAfterConcurrentClaim", testSettleRefundAfterConcurrentClaim},
	{"RefundLeaseGuard", testRefundLeaseGuard},
	{"RefundGroup", testRefundGroup},
	{"RefundsConcurrentGrouped", testConcurrentRefundsGrouped},
	{"CaptureLeaseGuard", testCaptureLeaseGuard},
	{"RefundReplayRepliesAreConsistent", testRefundReplayRepliesAreConsistent},
	{"ChargeReplayRepliesAreConsistent", testChargeReplayRepliesAreConsistent},
	{"EventsAreTheHistory", testEventsAreTheHistory},
	{"ListEventsWaitsForOlderTransactions", testListEventsWaitsForOlderTransactions},
	{"DeliveryLeaseAndRecord", testDeliveryLeaseAndRecord},
	{"RefundEvents", testRefundEvents},
	{"AuditFindingEvents", testAuditFindingEvents},
	{"WatchOnlyOwnOrders", testWatchOnlyOwnOrders},
	{"WatchersOfDeadServersExpire", testWatchersOfDeadServersExpire},
	{"WatchedChangeIsReported", testWatchedChangeIsReported},
	{"CaptureClaimsKeepWithinTheHold", testCaptureClaimsKeepWithinTheHold},
	{"CaptureClaimReplaysAndSettles", testCaptureClaimReplaysAndSettles},
	{"VoidAndCaptureExcludeEachOther", testVoidAndCaptureExcludeEachOther},
	{"RefundOfWhatWasCaptured", testRefundOfWhatWasCaptured},
	{"HoldLeases", testHoldLeases},
	{"GatewayEventsReadBack", testGatewayEventsReadBack},
	{"GatewayEventsWakeOperations", testGatewayEventsWakeOperations},
	{"GatewayEventsCaptureFailed", testGatewayEventsCaptureFailed},
	{"ReviewQueue", testReviewQueue},
	{"GatewayEventsLapseWakesHold", testGatewayEventsLapseWakesHold},
	{"GatewayEventsRefundFailed", testGatewayEventsRefundFailed},
	{"DisputeForwardOnly", testDisputeForwardOnly},
	{"RouteRulesVersioned", testRouteRulesVersioned},
}

// runStoreSuite runs every test of the suite on db, in parallel.
func runStoreSuite(t *testing.T, db storeDB) {
	t.Parallel()
	for _, tc := range storeSuite {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, db)
		})
	}
}

// TestStoreOnPostgres runs the conformance suite on plain PostgreSQL.
func TestStoreOnPostgres(t *testing.T) {
	if postgrestest.Citus() {
		t.Skip("SETTLE_TEST_CITUS=1: every test database is Citus's, and TestStoreOnCitus runs the suite")
	}
	runStoreSuite(t, storeDB{pool: postgrestest.Pool})
}

// TestStoreOnCitus runs the conformance suite on Citus: a throwaway
// coordinator and two workers (see postgrestest.CitusURL).
func TestStoreOnCitus(t *testing.T) {
	runStoreSuite(t, storeDB{pool: postgrestest.CitusPool, citus: true})
}

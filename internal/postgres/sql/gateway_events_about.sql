-- The events recorded from @gateway whose reference is @reference (an
-- attempt's, a capture's, a void's or a refund's id, as the event gave it),
-- in the order they were recorded, for the lookups of a gateway that has no
-- status read (order.EventLog). An event names no merchant, and one about
-- nothing of ours is kept under merchant '': on Citus this read runs on
-- every shard. It is acceptable there: it serves only the lookups of
-- operations whose outcome is unknown (a lost answer), which are rare, and
-- each shard answers from gateway_events_reference_idx. The events of one
-- reference are all on its merchant's shard, numbered there (seq; NULL
-- for the events recorded before migration 00020).
SELECT gateway, event_id, event_type, object_id, reference, about, charge_id, succeeded, outcome, decline_code,
	amount_minor, currency, occurred_at
FROM gateway_events
WHERE gateway = @gateway AND reference = @reference
ORDER BY seq NULLS FIRST, received_at;

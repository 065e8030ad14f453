-- A merchant's dispute's history, oldest first.
SELECT id AS seq, dispute_id::text, coalesce(from_status, '') AS from_status, to_status,
	coalesce(from_stage, '') AS from_stage, to_stage, withdrawn_minor, reinstated_minor, event, actor,
	gateway_event_id, created_at
FROM dispute_history
WHERE merchant_id = @merchant_id AND dispute_id = @dispute_id
ORDER BY id;

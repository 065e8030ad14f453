-- Settle's tables that have grown to at least twice the rows their last
-- statistics counted (at least @floor rows, since a never-analyzed table
-- counts -1), while those statistics count fewer than @up_to rows: the
-- tables whose cached plans were made for a table much smaller than it
-- is (see statistics.go).
SELECT s.relname::text AS name
FROM pg_stat_user_tables s
JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = current_schema()
	AND c.reltuples < @up_to
	AND s.n_live_tup >= greatest(2 * c.reltuples, @floor)
ORDER BY s.relname;

-- What the database promises about a commit: whether it reaches the disk
-- (fsync), how long the committing session waits (synchronous_commit), for
-- which standbys (synchronous_standby_names), and the standbys streaming
-- now. A role without pg_monitor (or pg_read_all_stats) sees the standbys
-- but not their sync_state, which is then NULL and counted as unknown.
SELECT current_setting('fsync') = 'on' AS fsync,
       current_setting('synchronous_commit') AS synchronous_commit,
       current_setting('synchronous_standby_names') AS synchronous_standby_names,
       pg_is_in_recovery() AS in_recovery,
       count(r.pid) AS standbys,
       count(r.pid) FILTER (WHERE r.sync_state IN ('sync', 'quorum')) AS sync_standbys,
       count(r.pid) FILTER (WHERE r.sync_state IS NULL) AS unknown_standbys
FROM (SELECT) AS one
LEFT JOIN pg_stat_replication AS r ON true;

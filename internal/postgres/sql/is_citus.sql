-- Whether the database is Citus: the citus extension is installed.
SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus;

#!/bin/sh
# The entrypoint of docker-compose.yml's postgres-standby. On an empty
# volume it copies the primary with pg_basebackup (the source is libpq's
# PGHOST, PGUSER, PGPASSWORD and PGAPPNAME from the service's environment),
# retrying until the primary answers, and marks the copy a standby; then it
# runs the service's command, PostgreSQL streaming from the primary as
# primary_conninfo says.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	until pg_basebackup --pgdata="$PGDATA" --wal-method=stream --checkpoint=fast --no-password; do
		echo "standby: no base backup from $PGHOST yet; trying again in 2s" >&2
		find "$PGDATA" -mindepth 1 -delete
		sleep 2
	done
	touch "$PGDATA/standby.signal"
	# The image leaves the volume's directory world-writable; PostgreSQL
	# refuses a data directory others can read.
	chmod 0700 "$PGDATA"
fi
exec "$@"

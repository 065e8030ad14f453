-- Run once by the postgres image when it initializes the primary's volume
-- (docker-compose.yml mounts it into /docker-entrypoint-initdb.d).

-- The role the standby streams as: it may replicate, and nothing else.
-- LOCAL-ONLY example password, public here and in docker-compose.yml; set
-- your own for anything beyond your machine.
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD 'replicator_local_example';

-- Every commit waits until the standby (application_name "standby") has it
-- on disk, so that losing this machine loses no commit Settle was told of;
-- while the standby is down, commits wait. Set here, in
-- postgresql.auto.conf, rather than on the command line: the image's
-- first-run server gets the command line too, and its own commits (this
-- file's, CREATE DATABASE) would wait for a standby that cannot exist yet.
-- The standby's copy of the setting is what it keeps if promoted: it then
-- waits for a standby of its own under the same name.
ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (standby)';
ALTER SYSTEM SET synchronous_commit = 'on';

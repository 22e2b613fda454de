# pg_dump / pg_restore round trips of a database in use, the ways a DBA
# runs them (README, "Backup, restore and upgrade of PostgreSQL"):
#
#   pg_dump -Fd + pg_restore -j 4    into a new database
#   pg_dump -Fc + pg_restore         (one job) into a new database
#   pg_restore --no-owner            the tables then belong to the restoring
#                                    role while the catalog still names the
#                                    original owners: after ALTER TABLE ...
#                                    OWNER TO them, everything goes on
#   pg_restore into a database where CREATE EXTENSION streamwm already ran:
#                                    one error (schema "streamwm" already
#                                    exists, the schema is dumped on its
#                                    own), everything else restored
#
# The database: a role's streams (4 partitions with an event_time and a
# partition key; 3 partitions written with explicit write times; one with
# allowed_lateness), queries of every kind (pane plan, general plan,
# session, count, ordered output, a pane-plan query with result_retention,
# re-fired windows), late events, results.  The server preloads streamwm
# (so CREATE EXTENSION in pg_restore starts a worker) with the worker's
# processing off, so that every step is an explicit process() with an
# explicit clock.  After each restore the state is the original's; after
# the same further input, processed the same way in both, every catalog
# row, result and stream row is equal.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('restore');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'streamwm'
streamwm.enabled = off
max_worker_processes = 16
});
$node->start;

$node->safe_psql('postgres', q{
	CREATE ROLE alice LOGIN;
	CREATE DATABASE src;
});
$node->safe_psql('src', q{
	GRANT CREATE ON SCHEMA public TO alice;
	CREATE EXTENSION streamwm;
	SET ROLE alice;
	SELECT streamwm.create_stream('bids', 'auction int, bidder text, price int, at bigint',
	        partitions => 4, event_time => 'to_timestamp(at)', partition_key => 'bidder',
	        watermark_delay => '2 s', idle_timeout => '1 day', retention => '10 min');
	SELECT streamwm.create_query('q_pane',
	        'SELECT auction, count(*) AS n, sum(price) AS total, max(price) AS top FROM bids GROUP BY auction',
	        hop => '2 s', size => '10 s');
	SELECT streamwm.create_query('q_general',
	        'SELECT auction, array_agg(bidder ORDER BY bidder, price) AS who FROM bids GROUP BY auction',
	        hop => '5 s', size => '5 s');
	SELECT streamwm.create_session_query('q_session',
	        'SELECT bidder, count(*) AS n FROM bids GROUP BY bidder', gap => '3 s');
	SELECT streamwm.create_count_query('q_count',
	        'SELECT auction, sum(price) AS s FROM bids GROUP BY auction', size => 4, slide => 2);
	SELECT streamwm.create_stream('clicks', 'k text, v int', partitions => 3, idle_timeout => '1 day');
	SELECT streamwm.create_query('q_ordered', 'SELECT k, v FROM clicks', hop => NULL, size => NULL);
	SELECT streamwm.create_stream('m', 'k text, v int', partitions => 2, idle_timeout => '1 day',
	        allowed_lateness => '5 s');
	SELECT streamwm.create_query('q_refire',
	        'SELECT k, string_agg(v::text, '','' ORDER BY v) AS vs FROM m GROUP BY k',
	        hop => '5 s', size => '5 s');
	SELECT streamwm.create_query('q_refire_pane', 'SELECT k, sum(v) AS s FROM m GROUP BY k',
	        hop => '5 s', size => '10 s', result_retention => '1 min');
});
is($node->safe_psql('src', q{SELECT string_agg(query || ' ' || plan, ', ' ORDER BY query) FROM streamwm.queries}),
	'q_count count, q_general general, q_ordered general, q_pane pane, q_refire general, '
	  . 'q_refire_pane pane, q_session session',
	'queries of every plan');

# One round of input as alice, rows from second $from on: for bids (event
# time from a column, partition from the key) 30 rows and a late one; for
# clicks (write times) 30 rows over 3 partitions and a late one; for m a
# row below W but within allowed_lateness first (it re-fires a closed
# window), 30 rows, and a late one.  Then one step per stream with an
# explicit clock.
sub round
{
	my ($db, $from) = @_;
	$node->safe_psql($db, qq{
		SET ROLE alice;
		SELECT streamwm.ingest('bids', jsonb_build_object('auction', i % 7, 'bidder', 'b' || (i % 17),
		                                                  'price', i * 13 % 101, 'at', i))
		  FROM generate_series($from, $from + 29) i;
		SELECT streamwm.ingest('bids', jsonb_build_object('auction', 1, 'bidder', 'late', 'price', 1,
		                                                  'at', $from - 20));
		SELECT streamwm.ingest('clicks', jsonb_build_object('k', 'k' || (i % 4), 'v', i),
		                       partition => i % 3, write_time => to_timestamp(i))
		  FROM generate_series($from, $from + 29) i;
		SELECT streamwm.ingest('clicks', '{"k": "late", "v": -1}', partition => 1,
		                       write_time => to_timestamp($from - 20));
		SELECT streamwm.ingest('m', jsonb_build_object('k', 'k1', 'v', 1000 + $from), partition => 0,
		                       write_time => to_timestamp($from - 11));
		SELECT streamwm.ingest('m', jsonb_build_object('k', 'k' || (i % 3), 'v', i),
		                       partition => i % 2, write_time => to_timestamp(i))
		  FROM generate_series($from, $from + 29) i;
		SELECT streamwm.ingest('m', jsonb_build_object('k', 'k2', 'v', -1), partition => 1,
		                       write_time => to_timestamp($from - 30));
		SELECT streamwm.process(s, now => to_timestamp($from + 31))
		  FROM unnest('{bids,clicks,m}'::regclass[]) s;
	});
	return;
}

# Everything streamwm remembers, every result row and every stream row, as
# text.  Arrival times are the real clock's: compared only right after a
# restore.
sub state
{
	my ($db, $with_arrivals) = @_;
	my $arrival = $with_arrivals ? 'last_arrival' : "'-'";
	my $log_arrival = $with_arrivals ? 'arrival' : "'-'";
	my $log_times = $with_arrivals ? "arrival || ' ' || held_from" : "'-'";
	return $node->safe_psql($db, qq{
		SET TimeZone = 'UTC';
		SELECT string_agg(x, E'\\n' ORDER BY x) FROM (
		  SELECT format('stream %s %s %s %s %s %s %s %s %s %s', stream, owner, watermark, events,
		                late_events, expired_rows, purged_rows, retained_from, retention_horizon,
		                future_events) AS x
		    FROM streamwm.stream_def
		  UNION ALL
		  SELECT format('partition %s %s %s %s %s %s', stream, partition, processed_offset,
		                max_event_time, live, $arrival) FROM streamwm.partition_state
		  UNION ALL
		  SELECT format('query %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s', name, stream, owner,
		                plan, closed_until, windows_emitted, windows_refired, rows_upserted,
		                start_offset, errors, last_error, result_table, pane_table,
		                folded_offsets, session_from, count_needs, reads)
		    FROM streamwm.query_def
		  UNION ALL
		  SELECT format('late %s %s %s %s %s %s', stream, partition, sw_offset, sw_event_time,
		                watermark, $log_arrival) FROM streamwm.late_event_log
		  UNION ALL
		  SELECT format('mark %s %s %s %s', stream, watermark, offsets, min_event_time)
		    FROM streamwm.retention_mark
		  UNION ALL
		  SELECT format('commit %s %s %s %s %s', stream, partition, lo, hi, $log_times)
		    FROM streamwm.commit_log
		  UNION ALL SELECT 'q_pane ' || t::text FROM q_pane t
		  UNION ALL SELECT 'q_general ' || t::text FROM q_general t
		  UNION ALL SELECT 'q_session ' || t::text FROM q_session t
		  UNION ALL SELECT 'q_count ' || t::text FROM q_count t
		  UNION ALL SELECT 'q_ordered ' || t::text FROM q_ordered t
		  UNION ALL SELECT 'q_refire ' || t::text FROM q_refire t
		  UNION ALL SELECT 'q_refire_pane ' || t::text FROM q_refire_pane t
		  UNION ALL SELECT format('bids %s %s %s %s %s %s', sw_partition, sw_offset, sw_event_time,
		                          auction, bidder, price) FROM bids
		  UNION ALL SELECT format('clicks %s %s %s %s %s', sw_partition, sw_offset, sw_event_time, k, v)
		    FROM clicks
		  UNION ALL SELECT format('m %s %s %s %s %s', sw_partition, sw_offset, sw_event_time, k, v) FROM m
		) s});
}

round('src', 100);
round('src', 135);
is($node->safe_psql('src', q{
	SELECT bool_and(windows_emitted > 0) AND bool_and(last_error IS NULL)
	   AND sum(windows_refired) FILTER (WHERE stream = 'm'::regclass) = 2
	  FROM streamwm.query_def}), 't',
	'before the dump every query has results, none failed, and closed windows were re-fired');
is($node->safe_psql('src', q{
	SELECT bool_and(late_events > 0) AND bool_and(watermark > '-infinity') FROM streamwm.stream_def}),
	't', 'every stream has a watermark and late events');

my $pg_dump = $node->installed_command('pg_dump');
my $pg_restore = $node->installed_command('pg_restore');
my $dir = $node->basedir . '/dump_dir';
my $file = $node->basedir . '/dump.custom';
$node->command_ok([ $pg_dump, '-Fd', '-f', $dir, '-d', $node->connstr('src') ], 'pg_dump -Fd');
$node->command_ok([ $pg_dump, '-Fc', '-f', $file, '-d', $node->connstr('src') ], 'pg_dump -Fc');

my $original = state('src', 1);

# --- pg_restore -j 4 of the directory dump, and -Fc with one job ----------
$node->safe_psql('postgres', 'CREATE DATABASE r_parallel; CREATE DATABASE r_custom;');
$node->command_ok([ $pg_restore, '-j', '4', '-e', '-d', $node->connstr('r_parallel'), $dir ],
	'pg_restore -j 4 into a new database');
$node->command_ok([ $pg_restore, '-e', '-d', $node->connstr('r_custom'), $file ],
	'pg_restore of the custom format, one job, into a new database');
for my $db ('r_parallel', 'r_custom')
{
	is(state($db, 1), $original, "$db: catalog, late log, results and stream rows restored as they were");
	my $triggers = q{
		SELECT string_agg(tgrelid::regclass || ' ' || tgname, ', ' ORDER BY tgrelid::regclass::text, tgname)
		  FROM pg_trigger
		 WHERE tgrelid IN ('bids'::regclass, 'clicks'::regclass, 'm'::regclass) AND tgname LIKE 'sw\_%'};
	is($node->safe_psql($db, $triggers), $node->safe_psql('src', $triggers),
		"$db: every stream trigger is back");
	is($node->safe_psql($db, q{
		SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
		 WHERE e.extname = 'streamwm' AND d.deptype = 'e' AND d.classid = 'pg_class'::regclass
		   AND d.objid IN (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)}),
		'0', "$db: stream, result and state tables are not extension members");
	# the views work, for the owner too
	is($node->safe_psql($db, q{
		SET ROLE alice;
		SELECT (SELECT count(*) FROM streamwm.streams) || ' ' || (SELECT count(*) FROM streamwm.queries)
		       || ' ' || (SELECT count(*) FROM streamwm.partitions)}),
		'3 7 9', "$db: the views show every stream, query and partition");
}

# the same further input, processed the same way, in all three
for my $from (170, 205)
{
	round($_, $from) for ('src', 'r_parallel', 'r_custom');
}
my $after = state('src', 0);
like($after, qr/q_refire_pane/, 'the state compared holds the results');
is(state('r_parallel', 0), $after, 'after pg_restore -j 4, processing goes on exactly as in the original');
is(state('r_custom', 0), $after, 'after pg_restore -Fc, processing goes on exactly as in the original');
is($node->safe_psql('r_parallel', q{
	SELECT string_agg(DISTINCT coalesce(last_error, 'none'), ', ') || ' ' || sum(windows_refired)
	  FROM streamwm.query_def}),
	'none 6', 'no query failed after the restore, and late rows still re-fire windows');

# --- --no-owner --------------------------------------------------------------
# The tables then belong to the role that restored them, but the catalog
# still says which role each stream and query runs as (alice).  Giving the
# tables back to that role is all it takes.
$node->safe_psql('postgres', 'CREATE DATABASE r_noowner');
$node->command_ok([ $pg_restore, '--no-owner', '-e', '-d', $node->connstr('r_noowner'), $file ],
	'pg_restore --no-owner');
is($node->safe_psql('r_noowner', q{
	SELECT string_agg(DISTINCT relowner::regrole::text, ',')
	  FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'}),
	'postgres', '--no-owner: the tables belong to the restoring role');
is($node->safe_psql('r_noowner', q{
	SELECT string_agg(DISTINCT owner::text, ',') FROM (
	  SELECT owner FROM streamwm.stream_def UNION ALL SELECT owner FROM streamwm.query_def) o}),
	'alice', '--no-owner: the catalog still names the streams\' and queries\' owner');
# the views do not fail for it: what only the owner could read is NULL
is($node->safe_psql('r_noowner', q{
	SELECT (SELECT count(*) FROM streamwm.streams) || ' ' || (SELECT count(*) FROM streamwm.queries)
	       || ' ' || (SELECT count(*) FROM streamwm.partitions WHERE NOT behind)}),
	'3 7 9', '--no-owner: the views still answer, with nothing read from streams the recorded owner cannot read');
$node->safe_psql('r_noowner', q{
	DO $$
	DECLARE
	    t regclass;
	BEGIN
	    FOR t IN SELECT c.oid FROM pg_class c
	              WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' LOOP
	        EXECUTE format('ALTER TABLE %s OWNER TO alice', t);
	    END LOOP;
	END $$;
});
for my $from (170, 205)
{
	round('r_noowner', $from);
}
is(state('r_noowner', 0), $after, '--no-owner, then the tables given back: processing goes on as in the original');

# --- into a database that already has the extension ------------------------
# pg_dump writes CREATE SCHEMA streamwm (the schema is not an extension
# member) and CREATE EXTENSION IF NOT EXISTS: the first fails, pg_restore
# goes on, reports one error and exits 1; the catalog tables, empty in the
# new extension, take the dumped rows.
$node->safe_psql('postgres', 'CREATE DATABASE r_existing');
$node->safe_psql('r_existing', 'CREATE EXTENSION streamwm');
command_checks_all(
	[ $pg_restore, '-d', $node->connstr('r_existing'), $file ],
	1,
	[qr/^$/],
	[ qr/schema "streamwm" already exists/, qr/errors ignored on restore: 1$/m ],
	'pg_restore into a database with the extension: one error, schema "streamwm" already exists');
is(state('r_existing', 1), $original, 'and everything else is restored as it was');
round('r_existing', $_) for (170, 205);
is(state('r_existing', 0), $after, 'and processing goes on as in the original');

$node->stop;
done_testing();

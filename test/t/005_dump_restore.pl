# pg_dump and restore: streams, queries, their state and results survive a
# dump and restore into another database, and processing goes on where it
# stopped (stream and result tables are user tables, never extension
# members; the catalog is dumped as extension configuration).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION streamwm;
	SELECT streamwm.create_stream('ds', 'k text, v int', partitions => 2, watermark_delay => '1 s');
	SELECT streamwm.create_query('ds_q', 'SELECT k, count(*) AS n, sum(v) AS s FROM ds GROUP BY k',
	                             hop => '5 s', size => '10 s');
	SELECT streamwm.ingest('ds', jsonb_build_object('k', 'k' || (i % 3), 'v', i),
	                       partition => i % 2, write_time => to_timestamp(i))
	  FROM generate_series(1, 40) i;
	SELECT streamwm.ingest('ds', '{"k": "late", "v": 1000}', partition => 0, write_time => to_timestamp(2));
	SELECT streamwm.process('ds');
});
my $before = $node->safe_psql('postgres', q{
	SELECT watermark, events, late_events FROM streamwm.streams WHERE stream = 'ds'::regclass});

my $dump = $node->basedir . '/dump.sql';
$node->command_ok([ $node->installed_command('pg_dump'), '-d', $node->connstr('postgres'), '-f', $dump ],
	'pg_dump');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
	 WHERE e.extname = 'streamwm' AND d.deptype = 'e'
	   AND d.classid = 'pg_class'::regclass AND d.objid IN ('ds'::regclass, 'ds_q'::regclass)}),
	'0', 'stream and result tables are not extension members');

$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ $node->installed_command('psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1',
	'-d', $node->connstr('restored'), '-f', $dump ], 'restore');

is($node->safe_psql('restored', q{
	SELECT watermark, events, late_events FROM streamwm.streams WHERE stream = 'ds'::regclass}),
	$before, 'the watermark and counters are restored');
is($node->safe_psql('restored', 'SELECT count(*) FROM streamwm.late_events'), '1', 'the late log too');
is($node->safe_psql('restored', q{SELECT count(*) FROM ds_q}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM ds_q}), 'and the results');

# processing goes on in the restored database, from where it stopped
for my $db ('postgres', 'restored')
{
	$node->safe_psql($db, q{
		SELECT streamwm.ingest('ds', jsonb_build_object('k', 'k' || (i % 3), 'v', i),
		                       partition => i % 2, write_time => to_timestamp(i))
		  FROM generate_series(41, 80) i;
		SELECT streamwm.process('ds');
	});
}
my $results = q{SELECT string_agg(format('%s %s %s %s', window_start, k, n, s), ';' ORDER BY window_start, k) FROM ds_q};
is($node->safe_psql('restored', $results), $node->safe_psql('postgres', $results),
	'the restored database computes the same results as the original');
is($node->safe_psql('restored', q{
	SELECT events, late_events FROM streamwm.streams WHERE stream = 'ds'::regclass}),
	'81|1', 'every row processed once after the restore');
is($node->safe_psql('restored', q{
	SELECT count(DISTINCT sw_offset) = count(*) FROM ds}), 't', 'offsets stay unique after the restore');

# --- directory format, pg_restore -j 4, three times in a row ----------------
# pg_restore -j loads the catalog tables in parallel, in any order (there
# are no foreign keys between them), and creates the stream tables'
# triggers, keys and sequences' ownership after their data.  Several
# streams (partitions, an event_time expression, a partition key), queries
# ('latest' and 'earliest'), late events and a purge; after each restore
# the restored database has the same state, and processing the same new
# rows in both gives the same results.
$node->safe_psql('postgres', q{
	SELECT streamwm.create_stream('pj1', 'k text, v int', partitions => 3,
	                              idle_timeout => '1 day');
	SELECT streamwm.create_stream('pj2', 'at bigint, who text, v int',
	                              event_time => 'to_timestamp(at)', partition_key => 'who',
	                              partitions => 4, watermark_delay => '2 s',
	                              idle_timeout => '1 day', retention => '1 min');
	SELECT streamwm.create_query('pj1_q', 'SELECT k, count(*) AS n, sum(v) AS s FROM pj1 GROUP BY k',
	                             hop => '5 s', size => '15 s');
	SELECT streamwm.create_query('pj1_all', 'SELECT array_agg(v ORDER BY v) AS vs FROM pj1',
	                             hop => '10 s', size => '10 s', start_from => 'earliest');
	SELECT streamwm.create_query('pj2_q', 'SELECT who, max(v) AS top FROM pj2 GROUP BY who',
	                             hop => '3 s', size => '6 s');
});

# one round of input for the pj streams: rows from second $from on, a late
# row in each, then a step with an explicit clock
sub pj_round
{
	my ($db, $from) = @_;
	my $to = $from + 29;
	$node->safe_psql($db, qq{
		SELECT streamwm.ingest('pj1', jsonb_build_object('k', 'k' || (i % 4), 'v', i),
		                       partition => i % 3, write_time => to_timestamp(i))
		  FROM generate_series($from, $to) i;
		SELECT streamwm.ingest('pj1', '{"k": "late", "v": -1}', partition => 1,
		                       write_time => to_timestamp($from - 20));
		SELECT streamwm.ingest('pj2', jsonb_build_object('at', i, 'who', 'w' || (i % 17), 'v', i * 7 % 11))
		  FROM generate_series($from, $to) i;
		SELECT streamwm.ingest('pj2', jsonb_build_object('at', $from - 30, 'who', 'w0', 'v', 100));
		SELECT streamwm.process('pj1', now => to_timestamp($to + 1));
		SELECT streamwm.process('pj2', now => to_timestamp($to + 1));
	});
	return;
}

# everything streamwm remembers, and every result and stream row, as text;
# arrival times are the real clock's, so they are compared only right
# after a restore
sub pj_state
{
	my ($db, $with_arrivals) = @_;
	my $arrival = $with_arrivals ? 'last_arrival' : "'-'";
	my $log_times = $with_arrivals ? "arrival || ' ' || held_from" : "'-'";
	return $node->safe_psql($db, qq{
		SET TimeZone = 'UTC';
		SELECT string_agg(x, E'\\n' ORDER BY x) FROM (
		  SELECT format('stream %s %s %s %s %s %s %s %s', stream, watermark, events, late_events,
		                expired_rows, purged_rows, retained_from, future_events) AS x
		    FROM streamwm.stream_def
		  UNION ALL
		  SELECT format('partition %s %s %s %s %s', stream, partition, processed_offset,
		                max_event_time, $arrival) FROM streamwm.partition_state
		  UNION ALL
		  SELECT format('query %s %s %s %s %s %s %s %s', name, stream, closed_until, windows_emitted,
		                rows_upserted, start_offset, errors, last_error) FROM streamwm.query_def
		  UNION ALL
		  SELECT format('late %s %s %s %s %s', stream, partition, sw_offset, sw_event_time, watermark)
		    FROM streamwm.late_event_log
		  UNION ALL SELECT format('pj1_q %s %s %s %s', window_start, k, n, s) FROM pj1_q
		  UNION ALL SELECT format('pj1_all %s %s', window_start, vs) FROM pj1_all
		  UNION ALL SELECT format('pj2_q %s %s %s', window_start, who, top) FROM pj2_q
		  UNION ALL
		  SELECT format('commit %s %s %s %s %s', stream, partition, lo, hi, $log_times)
		    FROM streamwm.commit_log
		  UNION ALL SELECT format('pj1 %s %s %s %s %s', sw_partition, sw_offset, sw_event_time, k, v) FROM pj1
		  UNION ALL SELECT format('pj2 %s %s %s %s %s', sw_partition, sw_offset, sw_event_time, who, v) FROM pj2
		) s});
}

pj_round('postgres', 100);
# a purge of unread rows, counted (and dumped with the catalog)
$node->safe_psql('postgres', q{
	SELECT streamwm.ingest('pj1', '{"k": "gone", "v": 0}', partition => 2,
	                       write_time => to_timestamp(131));
	DELETE FROM pj1 WHERE k = 'gone';
});
is($node->safe_psql('postgres', q{
	SELECT purged_rows FROM streamwm.streams WHERE stream = 'pj1'::regclass}), '1',
	'the purge is counted before the dump');
is($node->safe_psql('postgres', q{
	SELECT (SELECT count(*) > 0 FROM pj1_q) AND (SELECT count(*) > 0 FROM pj1_all)
	   AND (SELECT count(*) > 0 FROM pj2_q)
	   AND (SELECT bool_and(late_events > 0) FROM streamwm.stream_def
	         WHERE stream IN ('pj1'::regclass, 'pj2'::regclass))}), 't',
	'every query has results and every stream late events before the dump');

for my $round (1 .. 3)
{
	my $dir = $node->basedir . "/dump_dir_$round";
	my $db = "restored_j$round";
	$node->command_ok([ $node->installed_command('pg_dump'), '-Fd', '-f', $dir,
		'-d', $node->connstr('postgres') ], "round $round: pg_dump -Fd");
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->command_ok([ $node->installed_command('pg_restore'), '-j', '4', '-e',
		'-d', $node->connstr($db), $dir ], "round $round: pg_restore -j 4 into a fresh database");
	is(pj_state($db, 1), pj_state('postgres', 1),
		"round $round: catalog, late log, results and stream rows restored as they were");
	my $triggers = q{
		SELECT string_agg(tgrelid::regclass || ' ' || tgname, ', ' ORDER BY tgrelid::regclass::text, tgname)
		  FROM pg_trigger
		 WHERE tgrelid IN ('pj1'::regclass, 'pj2'::regclass) AND tgname LIKE 'sw\_%'};
	is($node->safe_psql($db, $triggers), $node->safe_psql('postgres', $triggers),
		"round $round: every stream trigger is back");

	# the same new rows, late ones included, in both databases
	my $from = 100 + 30 * $round + 5;
	pj_round($_, $from) for ('postgres', $db);
	my $original = pj_state('postgres', 0);
	is(pj_state($db, 0), $original,
		"round $round: processing goes on identically in the restored database");
	# and the restored database is really usable: a purge there counts too
	$node->safe_psql($db, qq{
		SELECT streamwm.ingest('pj2', '{"at": 9999, "who": "x", "v": 1}');
		DELETE FROM pj2 WHERE at = 9999;
	});
	is($node->safe_psql($db, q{
		SELECT purged_rows FROM streamwm.streams WHERE stream = 'pj2'::regclass}), '1',
		"round $round: a purge in the restored database is counted");
}
unlike($node->safe_psql('postgres', q{
	SELECT string_agg(coalesce(last_error, ''), '') FROM streamwm.query_def}), qr/\S/,
	'no query failed in the original');
# query_def.reads is dumped by name and restored to the new OIDs, so the
# DDL guards work in the restored database: a used column cannot be
# dropped, and renames keep the query running
is($node->safe_psql('restored', q{
	SELECT reads = ARRAY['ds'::regclass] FROM streamwm.query_def WHERE name = 'ds_q'}),
	't', 'what the query reads is restored');
my ($rc, $out, $err) = $node->psql('restored', 'ALTER TABLE ds DROP COLUMN v');
like($err, qr/cannot drop column "v" of stream "ds" because query "ds_q" uses it/,
	'a column the query uses cannot be dropped after the restore');
$node->safe_psql('restored', q{
	ALTER TABLE ds RENAME TO ds_renamed;
	ALTER TABLE ds_renamed RENAME COLUMN v TO value;
	SELECT streamwm.ingest('ds_renamed', jsonb_build_object('k', 'k0', 'value', 1000),
	                       partition => i % 2, write_time => to_timestamp(i))
	  FROM generate_series(81, 100) i;
	SELECT streamwm.process('ds_renamed');
});
is($node->safe_psql('restored', q{
	SELECT coalesce(last_error, 'none'), errors FROM streamwm.query_def WHERE name = 'ds_q'}),
	'none|0', 'the query runs after renames in the restored database');
is($node->safe_psql('restored', q{
	SELECT s FROM ds_q WHERE window_start = to_timestamp(85) AND k = 'k0'}),
	'10000', 'and sums the renamed column');

# --- pg_dump --no-table-access-method ---------------------------------------
# The stream comes back a plain heap: its rows are restored as they were, but
# nothing would fill a new row (it would be stored without partition and
# offset, where no step reads it).  An insert is refused, with the repair in
# its hint, and after that repair the stream takes rows again.
my $noam = $node->basedir . '/noam.sql';
$node->command_ok([ $node->installed_command('pg_dump'), '--no-table-access-method',
	'-d', $node->connstr('postgres'), '-f', $noam ], 'pg_dump --no-table-access-method');
$node->safe_psql('postgres', 'CREATE DATABASE noam');
$node->command_ok([ $node->installed_command('psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1',
	'-d', $node->connstr('noam'), '-f', $noam ], 'restore without access methods');
is($node->safe_psql('noam', q{
	SELECT a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = 'ds'::regclass}),
	'heap', 'the stream came back a heap');
($rc, $out, $err) = $node->psql('noam', q{INSERT INTO ds (k, v) VALUES ('x', 1)});
like($err, qr/stream "ds" is not stored with the access method streamwm_stream.*HINT:  ALTER TABLE public.ds SET ACCESS METHOD streamwm_stream/s,
	'an insert into it is refused, with the repair');
($rc, $out, $err) = $node->psql('noam', q{SELECT streamwm.ingest('ds', '{"k": "x", "v": 1}')});
like($err, qr/is not stored with the access method streamwm_stream/, 'so is ingest()');
is($node->safe_psql('noam', q{
	SELECT count(*) FROM ds WHERE sw_offset IS NULL}), '0', 'nothing was stored unfilled');
my $counts = $node->safe_psql('noam', q{
	SELECT events + 40, late_events FROM streamwm.streams WHERE stream = 'ds'::regclass});
$node->safe_psql('noam', q{
	ALTER TABLE ds SET ACCESS METHOD streamwm_stream;
	SELECT streamwm.ingest('ds', jsonb_build_object('k', 'k' || (i % 3), 'v', i),
	                       partition => i % 2, write_time => to_timestamp(i))
	  FROM generate_series(1001, 1040) i;
	SELECT streamwm.process('ds');
});
is($node->safe_psql('noam', q{
	SELECT count(*) FILTER (WHERE sw_offset IS NULL), count(DISTINCT sw_offset) = count(*) FROM ds}),
	'0|t', 'after ALTER TABLE ... SET ACCESS METHOD rows are filled again');
is($node->safe_psql('noam', q{
	SELECT events, late_events FROM streamwm.streams WHERE stream = 'ds'::regclass}),
	$counts, 'and processed once each');

$node->stop;
done_testing();

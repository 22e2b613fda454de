# Background workers (SPEC section 7): streams processed without any call to
# streamwm.process(), one worker per database with the extension, restarts,
# error isolation, DROP while processing, work run as the query's owner.
#
# Timing: every wait is a poll with a generous timeout; nothing asserts that
# something happened within a tight bound.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('worker');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'streamwm'
restart_after_crash = on
streamwm.launcher_naptime = 1
streamwm.worker_restart_seconds = 1
max_worker_processes = 16
});
$node->start;

sub workers
{
	my ($db) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = '$db'");
}

# --- one worker per database that has streams, none elsewhere -------------
$node->safe_psql('postgres', 'CREATE DATABASE withext');
$node->safe_psql('postgres', 'CREATE DATABASE noext');
$node->safe_psql('withext', 'CREATE EXTENSION streamwm');
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm launcher'"),
	'the launcher runs');
# give the launcher time to probe every database, then count
sleep 2;
is(workers('withext'), '0', 'no worker holds a slot for a database with the extension but no stream');
is(workers('noext'), '0', 'no worker stays in a database without the extension');
is(workers('postgres'), '0', 'no worker in postgres either');
$node->safe_psql('withext', q{SELECT streamwm.create_stream('first', 'v int')});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'withext'"),
	'its first stream starts the database\'s worker');

$node->safe_psql('postgres', 'CREATE DATABASE third');
$node->safe_psql('third', 'CREATE EXTENSION streamwm');
$node->safe_psql('third', q{SELECT streamwm.create_stream('first', 'v int')});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'third'"),
	'a stream created while the server runs starts that database\'s worker');
is(workers('withext'), '1', 'still exactly one worker for withext');

# --- live processing, real write times, no process() call ------------------
$node->safe_psql('withext', q{
	SELECT streamwm.create_stream('clicks', 'k text', watermark_delay => '0',
	                              watermark_granularity => '200 ms', idle_timeout => '1 hour');
	SELECT streamwm.create_query('clicks_per_sec', 'SELECT k, count(*) AS n FROM clicks GROUP BY k',
	                             hop => '1 s', size => '1 s');
	SELECT streamwm.create_query('clicks_hop', 'SELECT count(*) AS n FROM clicks',
	                             hop => '1 s', size => '3 s');
});
for my $i (1 .. 20)
{
	$node->safe_psql('withext', "INSERT INTO clicks (k) VALUES ('a'), ('b'), ('a')");
	select(undef, undef, undef, 0.15);
}
# the watermark is the newest write time: every window ending before it closes
ok($node->poll_query_until('withext', q{
	SELECT closed_until >= (SELECT max(sw_event_time) FROM clicks)
	  FROM streamwm.queries WHERE query = 'clicks_per_sec'}),
	'the worker advanced the watermark to the newest event');
ok($node->poll_query_until('withext', q{
	SELECT count(*) > 0 FROM clicks_per_sec}), 'results appear without process()');

# --- the README's usage example, as written: its result row appears with no
# further event (the heartbeat of a write-time stream closes the last windows)
$node->safe_psql('withext', q{
	SELECT streamwm.create_stream('input', 'pass int8, payload text', watermark_delay => 'PT5S');
	SELECT streamwm.create_query('example',
	  $$SELECT array_agg(payload ORDER BY payload) AS result
	      FROM input WHERE pass > 0$$,
	  hop => 'PT5S', size => 'PT10S');
});
$node->safe_psql('withext', q{INSERT INTO input (pass, payload) VALUES (1, 'a')});
$node->safe_psql('withext', q{SELECT streamwm.ingest('input', '{"pass": 1, "payload": "b"}')});
$node->safe_psql('withext',
	q{SELECT streamwm.ingest_lines('input', E'{"pass":1,"payload":"c"}\n{"pass":0,"payload":"d"}')});
ok($node->poll_query_until('withext', q{
	SELECT count(*) > 0 AND bool_and(result <@ '{a,b,c}')
	   AND (SELECT count(*) FROM streamwm.late_events l WHERE l.stream = 'input'::regclass) = 0
	  FROM example
	 WHERE window_end <= (SELECT max(sw_event_time) FROM input) + interval '5 s'}),
	'the README example shows its result under the worker with no further event');
ok($node->poll_query_until('withext', q{
	SELECT closed_until >= (SELECT max(sw_event_time) FROM input) + interval '10 s'
	  FROM streamwm.queries WHERE query = 'example'}),
	'and closes every window holding its rows');
is($node->safe_psql('withext', q{
	SELECT count(*) FROM input i WHERE pass > 0 AND (SELECT count(*) FROM example e
	  WHERE e.window_start <= i.sw_event_time AND i.sw_event_time < e.window_end
	    AND i.payload = ANY (e.result)) <> 2}), '0',
	'every row that passes the WHERE is in both of its windows');

my $check_per_sec = q{
	SELECT count(*) FROM (
	  (SELECT window_start, k, n FROM clicks_per_sec
	   EXCEPT
	   SELECT streamwm.window_start(sw_event_time, '1 s'), k, count(*) FROM clicks
	    GROUP BY 1, 2 HAVING streamwm.window_start(sw_event_time, '1 s') + '1 s'
	                         <= (SELECT watermark FROM streamwm.streams WHERE stream = 'clicks'::regclass))
	  UNION ALL
	  (SELECT streamwm.window_start(sw_event_time, '1 s'), k, count(*) FROM clicks
	    GROUP BY 1, 2 HAVING streamwm.window_start(sw_event_time, '1 s') + '1 s'
	                         <= (SELECT closed_until FROM streamwm.queries WHERE query = 'clicks_per_sec')
	   EXCEPT
	   SELECT window_start, k, n FROM clicks_per_sec)) d};
is($node->safe_psql('withext', $check_per_sec), '0',
	'live results equal a recomputation from the stream');
ok($node->poll_query_until('withext', q{
	SELECT count(*) > 0 FROM pg_stat_activity
	 WHERE backend_type = 'streamwm worker' AND application_name = 'streamwm worker'
	   AND query = 'streamwm: processing stream clicks'}),
	'pg_stat_activity names the stream being processed');

# --- an idle partition with the real clock ---------------------------------
$node->safe_psql('withext', q{
	SELECT streamwm.create_stream('idle4', 'v int', partitions => 4, watermark_delay => '0',
	                              watermark_granularity => '200 ms', idle_timeout => '2 s');
	SELECT streamwm.create_query('idle4_q', 'SELECT count(*) AS n FROM idle4', hop => '1 s', size => '1 s');
});
for my $i (1 .. 8)
{
	$node->safe_psql('withext',
		"INSERT INTO idle4 (sw_partition, v) VALUES (0, $i), (1, $i), (2, $i)");
	select(undef, undef, undef, 0.2);
}
ok($node->poll_query_until('withext', q{
	SELECT count(*) > 0 FROM idle4_q}),
	'windows close once the empty partition is idle');
is($node->safe_psql('withext', q{
	SELECT bool_and(idle) FILTER (WHERE partition = 3) FROM streamwm.partitions
	 WHERE stream = 'idle4'::regclass}), 't', 'partition 3 is shown idle');

# --- a failing query: recorded, others unaffected, catches up once fixed ---
$node->safe_psql('withext', q{
	CREATE TABLE divisor (d int);
	INSERT INTO divisor VALUES (0);
	SELECT streamwm.create_stream('errs', 'v int', watermark_granularity => '200 ms',
	                              idle_timeout => '1 hour');
	SELECT streamwm.create_query('errs_bad', 'SELECT sum(v) / (SELECT d FROM divisor) AS r FROM errs',
	                             hop => '1 s', size => '1 s');
	SELECT streamwm.create_query('errs_good', 'SELECT sum(v) AS s FROM errs', hop => '1 s', size => '1 s');
	SELECT streamwm.ingest('errs', '[{"v": 4}, {"v": 6}]', write_time => to_timestamp(10));
	SELECT streamwm.ingest('errs', '{"v": 1}', write_time => to_timestamp(20));
});
ok($node->poll_query_until('withext', q{
	SELECT last_error LIKE '%division by zero%' FROM streamwm.queries WHERE query = 'errs_bad'}),
	'the failing query records last_error');
ok($node->poll_query_until('withext', q{SELECT count(*) = 1 FROM errs_good}),
	'the other query of the stream goes on');
is($node->safe_psql('withext', q{SELECT count(*) FROM errs_bad}), '0', 'nothing from the failing query');
$node->safe_psql('withext', 'UPDATE divisor SET d = 2');
ok($node->poll_query_until('withext', q{
	SELECT last_error IS NULL AND windows_emitted = 1 FROM streamwm.queries WHERE query = 'errs_bad'}),
	'once fixed, the query catches up');
is($node->safe_psql('withext', q{SELECT r FROM errs_bad}), '5', 'with the right value');

# --- a lock timeout: a user holds the result table; recorded, then catches up
my $holder = $node->background_psql('withext');
$holder->query_safe('BEGIN');
$holder->query_safe('LOCK TABLE errs_good IN ACCESS EXCLUSIVE MODE');
$node->safe_psql('withext', q{SELECT streamwm.ingest('errs', '{"v": 7}', write_time => to_timestamp(30))});
ok($node->poll_query_until('withext', q{
	SELECT last_error LIKE '%lock timeout%' FROM streamwm.queries WHERE query = 'errs_good'}),
	'a lock timeout on the result table is recorded');
ok($node->poll_query_until('withext', q{
	SELECT windows_emitted = 2 FROM streamwm.queries WHERE query = 'errs_bad'}),
	'the other query of the stream goes on meanwhile');
$holder->query_safe('COMMIT');
$holder->quit;
ok($node->poll_query_until('withext', q{
	SELECT last_error IS NULL AND windows_emitted = 2 FROM streamwm.queries WHERE query = 'errs_good'}),
	'once the lock is gone the query catches up');

# --- a query owned by an unprivileged role runs as that role ---------------
$node->safe_psql('withext', q{
	CREATE ROLE alice;
	GRANT CREATE ON SCHEMA public TO alice;
	CREATE TABLE secret (v int);
	INSERT INTO secret VALUES (42);
	GRANT SELECT ON secret TO alice;
	SET ROLE alice;
	SELECT streamwm.create_stream('alice_s', 'v int', watermark_granularity => '200 ms',
	                              idle_timeout => '1 hour');
	SELECT streamwm.create_query('alice_q', 'SELECT sum(v) + (SELECT max(v) FROM secret) AS r FROM alice_s',
	                             hop => '1 s', size => '1 s');
	RESET ROLE;
	REVOKE SELECT ON secret FROM alice;
	SET ROLE alice;
	SELECT streamwm.ingest('alice_s', '{"v": 1}', write_time => to_timestamp(1));
	SELECT streamwm.ingest('alice_s', '{"v": 1}', write_time => to_timestamp(5));
	RESET ROLE;
});
ok($node->poll_query_until('withext', q{
	SELECT last_error LIKE '%permission denied for table secret%' FROM streamwm.queries WHERE query = 'alice_q'}),
	'the superuser worker cannot read a table for a query whose owner may not');
is($node->safe_psql('withext', q{SELECT count(*) FROM alice_q}), '0', 'and emits nothing');

# --- SIGKILL of the worker: restarted, nothing lost or duplicated ----------
my $pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'withext'");
ok($pid =~ /^\d+$/, 'found the worker');
$node->safe_psql('withext', "INSERT INTO clicks (k) VALUES ('c')");
kill 'KILL', $pid;
# the postmaster reinitialises; wait until we can connect and a worker runs again
$node->poll_query_until('postgres', 'SELECT 1', '1');
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'withext'"),
	'the worker is back after SIGKILL');
for my $i (1 .. 10)
{
	$node->safe_psql('withext', "INSERT INTO clicks (k) VALUES ('a'), ('c')");
	select(undef, undef, undef, 0.15);
}
ok($node->poll_query_until('withext', q{
	SELECT closed_until >= (SELECT max(sw_event_time) FROM clicks)
	  FROM streamwm.queries WHERE query = 'clicks_per_sec'}),
	'processing resumed after the crash');
is($node->safe_psql('withext', $check_per_sec), '0',
	'after the crash the results still equal a recomputation: nothing lost, nothing doubled');
is($node->safe_psql('withext', q{
	SELECT (SELECT events FROM streamwm.streams WHERE stream = 'clicks'::regclass) = count(*) FROM clicks}),
	't', 'every event counted exactly once');

# --- DROP while the worker processes: no deadlock, no error storm ----------
my $log_before = -s $node->logfile;
$node->safe_psql('withext', q{
	SELECT streamwm.create_stream('busy', 'v int', watermark_granularity => '100 ms');
	SELECT streamwm.create_query('busy_q', 'SELECT count(*) AS n FROM busy', hop => '1 s', size => '1 s');
	SELECT streamwm.create_query('busy_q2', 'SELECT sum(v) AS s FROM busy', hop => '1 s', size => '2 s');
});
for my $i (1 .. 10)
{
	$node->safe_psql('withext', "INSERT INTO busy (v) SELECT g FROM generate_series(1, 500) g");
}
$node->safe_psql('withext', "SELECT streamwm.drop_query('busy_q')");
$node->safe_psql('withext', "SELECT streamwm.drop_stream('busy', cascade => true)");
$node->safe_psql('third', q{
	SELECT streamwm.create_stream('t3', 'v int', watermark_granularity => '100 ms');
	INSERT INTO t3 (v) SELECT g FROM generate_series(1, 1000) g;
});
$node->safe_psql('third', 'DROP EXTENSION streamwm CASCADE');
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'third'"),
	'DROP EXTENSION stops that database\'s worker');
is(workers('withext'), '1', 'the other database\'s worker goes on');
sleep 1;
my $log = slurp_file($node->logfile, $log_before);
my $errors = () = $log =~ /ERROR:/g;
ok($errors <= 2, "no error storm in the log after the drops ($errors errors)");
unlike($log, qr/deadlock detected/, 'no deadlock');

# --- the schedule is cached, and stream_def changes invalidate it ----------
# The worker reads streamwm.stream_def only when a change of it commits (the
# schedule_changed trigger): idle, it scans it no more.  Scans are counted in
# pg_stat_user_tables; a count flushed late by the worker may show once, so a
# few 3 s windows are tried and one flat window is enough (before the cache,
# every loop read stream_def: no window was ever flat).
$node->safe_psql('postgres', 'CREATE DATABASE sched');
$node->safe_psql('sched', 'CREATE EXTENSION streamwm');
$node->safe_psql('sched', q{SELECT streamwm.create_stream('keep', 'v int', watermark_granularity => '1 hour')});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'sched'"),
	'a worker runs for the database sched');
sub stream_def_scans
{
	return $node->safe_psql('sched', q{
		SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables
		 WHERE relid = 'streamwm.stream_def'::regclass});
}
sub flat_while_idle
{
	for my $try (1 .. 5)
	{
		my $before = stream_def_scans();
		sleep 3;
		return 1 if stream_def_scans() == $before;
	}
	return 0;
}
sleep 2;
ok(flat_while_idle(), 'no stream due, no catalog change: the worker does not read stream_def');

my $sched_log = -s $node->logfile;
$node->safe_psql('sched', q{
	SELECT streamwm.create_stream('fresh', 'v int', watermark_granularity => '200 ms',
	                              idle_timeout => '1 hour');
	SELECT streamwm.create_query('fresh_q', 'SELECT sum(v) AS s FROM fresh', hop => '1 s', size => '1 s');
	SELECT streamwm.ingest('fresh', '[{"v": 4}, {"v": 6}]', write_time => to_timestamp(10));
	SELECT streamwm.ingest('fresh', '{"v": 1}', write_time => to_timestamp(20));
});
ok($node->poll_query_until('sched', q{SELECT count(*) = 1 FROM fresh_q}),
	'a stream created while the worker runs is processed');
is($node->safe_psql('sched', q{SELECT s FROM fresh_q}), '10', 'with the right value');
my $scans = stream_def_scans();
ok($node->poll_query_until('sched', qq{
	SELECT seq_scan + coalesce(idx_scan, 0) > $scans + 2 FROM pg_stat_user_tables
	 WHERE relid = 'streamwm.stream_def'::regclass}),
	'while the stream exists its ticks read its stream_def row (the count is live)');

$node->safe_psql('sched', q{SELECT streamwm.drop_stream('fresh', cascade => true)});
ok(flat_while_idle(), 'a dropped stream is no longer scheduled: stream_def is read no more');
$node->safe_psql('sched', q{
	SELECT streamwm.create_stream('fresh', 'v int', watermark_granularity => '200 ms',
	                              idle_timeout => '1 hour');
	SELECT streamwm.create_query('fresh_q2', 'SELECT count(*) AS n FROM fresh', hop => '1 s', size => '1 s');
	SELECT streamwm.ingest('fresh', '{"v": 1}', write_time => to_timestamp(30));
	SELECT streamwm.ingest('fresh', '{"v": 1}', write_time => to_timestamp(40));
});
ok($node->poll_query_until('sched', q{SELECT count(*) = 1 FROM fresh_q2}),
	'a stream re-created under the same name is processed again');
# (a tick may legitimately skip the stream while create_query or
# drop_stream holds its row: a tick that found it before the drop
# committed logs "skipped stream" when it cannot lock it, possibly just
# after the commit; what must not happen is a tick of the stream once it
# is dropped, so the slice starts after the drop and after such a tick)
$node->safe_psql('sched', q{SELECT streamwm.drop_stream('fresh', cascade => true)});
sleep 1;
$sched_log = -s $node->logfile;
ok(flat_while_idle(), 'and once dropped again, it is no longer scheduled');
my $sched_lines = slurp_file($node->logfile, $sched_log);
unlike($sched_lines, qr/skipped stream/, 'no tick of a dropped stream');
is(workers('sched'), '1', 'the worker of sched still runs');
$node->safe_psql('sched', q{SELECT streamwm.drop_stream('keep')});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'sched'"),
	'its last stream dropped, the worker leaves (no slot held)');
$node->safe_psql('sched', q{SELECT streamwm.create_stream('keep', 'v int', watermark_granularity => '1 hour')});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'sched'"),
	'and a new stream brings it back');
$node->safe_psql('sched', 'DROP EXTENSION streamwm CASCADE');
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'sched'"),
	'an idle worker with a cached schedule still stops at DROP EXTENSION');

# --- plain DROP DATABASE (and RENAME) while the worker runs ----------------
$node->safe_psql('postgres', 'CREATE DATABASE doomed');
$node->safe_psql('doomed', q{
	CREATE EXTENSION streamwm;
	SELECT streamwm.create_stream('d', 'v int', watermark_granularity => '100 ms');
	SELECT streamwm.create_query('d_q', 'SELECT count(*) AS n FROM d', hop => '1 s', size => '1 s');
	INSERT INTO d (v) SELECT g FROM generate_series(1, 100) g;
});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'doomed'"),
	'a worker runs for the database doomed');
$node->safe_psql('postgres', 'ALTER DATABASE doomed RENAME TO renamed');
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'renamed'"),
	'ALTER DATABASE ... RENAME TO works while the worker runs, and the worker comes back');
my $drop_log = -s $node->logfile;
my ($rc, $out, $err) = $node->psql('postgres', 'DROP DATABASE renamed');
is($rc, 0, 'plain DROP DATABASE works while the worker runs');
is($err, '', 'without an error');
sleep 3;	# longer than worker_restart_seconds and launcher_naptime
my $after_drop = slurp_file($node->logfile, $drop_log);
unlike($after_drop, qr/does not exist/, 'no worker is restarted into the dropped database');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'streamwm worker'}),
	$node->safe_psql('postgres', q{SELECT count(DISTINCT datname) FROM pg_stat_activity WHERE backend_type = 'streamwm worker'}),
	'one worker per database still');
is(workers('withext'), '1', 'the other databases keep theirs');

$node->stop;
done_testing();

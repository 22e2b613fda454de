# Fairness and limits under the background worker (issue 7): one role's
# query must not stall every stream of its database, and must leave no lock
# behind.
#
#  - streamwm.query_timeout: a query that sleeps is canceled, recorded in
#    last_error and backed off, while another stream of the same database
#    keeps producing its windows;
#  - a session advisory lock a query takes is released after its step, and
#    the worker stays the only one of its database (its own lock is not an
#    advisory lock);
#  - a stream held by a user's open transaction that called process() is
#    skipped, and the worker says so in the log, naming the holder;
#  - the stream owner's code that reading a stream and retention run (a
#    DELETE trigger, a forced row-level security policy) is bounded by
#    streamwm.query_timeout too.
#
# Timing: every wait is a poll with a generous timeout.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('limits');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'streamwm'
streamwm.launcher_naptime = 1
streamwm.query_timeout = '500ms'
max_worker_processes = 16
});
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION streamwm');
# --- streamwm.query_timeout: a sleeping query does not stall another stream --
$node->safe_psql('postgres', q{
	CREATE FUNCTION slow(x int) RETURNS int LANGUAGE plpgsql AS
	  $$BEGIN PERFORM pg_sleep(60); RETURN x; END$$;
	SELECT streamwm.create_stream('slow_s', 'v int', watermark_granularity => '100 ms',
	                              idle_timeout => '1 hour');
	SELECT streamwm.create_stream('fast_s', 'v int', watermark_granularity => '100 ms',
	                              idle_timeout => '1 hour');
	SELECT streamwm.create_query('slow_q', 'SELECT sum(slow(v)) AS s FROM slow_s',
	                             hop => '1 s', size => '1 s');
	SELECT streamwm.create_query('fast_q', 'SELECT count(*) AS n FROM fast_s',
	                             hop => '1 s', size => '1 s');
	SELECT streamwm.ingest('slow_s', '{"v": 1}', write_time => to_timestamp(1));
	SELECT streamwm.ingest('slow_s', '{"v": 1}', write_time => to_timestamp(5));
});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm worker'"),
	'the worker runs (the database has streams)');
my $worker_pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamwm worker'");
ok($node->poll_query_until('postgres', q{
	SELECT last_error = 'query "slow_q" exceeded streamwm.query_timeout (500ms)'
	  FROM streamwm.queries WHERE query = 'slow_q'}),
	'the sleeping query is canceled at streamwm.query_timeout and recorded');
my $t0 = time;
for my $i (1 .. 10)
{
	$node->safe_psql('postgres',
		"SELECT streamwm.ingest('fast_s', '{\"v\": 1}', write_time => to_timestamp($i))");
	select(undef, undef, undef, 0.1);
}
ok($node->poll_query_until('postgres', q{
	SELECT windows_emitted >= 9 FROM streamwm.queries WHERE query = 'fast_q'}),
	'the other stream of the database keeps closing its windows');
my $elapsed = time - $t0;
note("fast_s closed 9 windows ${elapsed}s after the first of them was ingested");
cmp_ok($elapsed, '<', 60, 'well within the sleeping query\'s 60 s');
is($node->safe_psql('postgres', q{SELECT count(*) FROM slow_q}), '0',
	'the timed-out query wrote nothing');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'streamwm worker'"),
	'1', 'the worker is still the same single one');
is($node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamwm worker'"),
	$worker_pid, 'and was not restarted');
$node->safe_psql('postgres', q{SELECT streamwm.drop_query('slow_q')});

# --- a session advisory lock taken by a query is released after the step ---
$node->safe_psql('postgres', q{
	CREATE FUNCTION take_lock() RETURNS boolean LANGUAGE plpgsql AS
	  $$BEGIN PERFORM pg_advisory_lock(42); RETURN true; END$$;
	SELECT streamwm.create_stream('lock_s', 'v int', watermark_granularity => '100 ms',
	                              idle_timeout => '1 hour');
	SELECT streamwm.create_query('lock_q', 'SELECT count(*) AS n FROM lock_s WHERE take_lock()',
	                             hop => '1 s', size => '1 s');
	SELECT streamwm.ingest('lock_s', '{"v": 1}', write_time => to_timestamp(1));
	SELECT streamwm.ingest('lock_s', '{"v": 1}', write_time => to_timestamp(5));
});
ok($node->poll_query_until('postgres', q{
	SELECT windows_emitted = 1 AND last_error IS NULL FROM streamwm.queries WHERE query = 'lock_q'}),
	'the query that takes an advisory lock ran in the worker');
my $free = 'f';
for (1 .. 50)
{
	# a fresh session each time: the lock it takes goes when it ends
	$free = $node->safe_psql('postgres', 'SELECT pg_try_advisory_lock(42)');
	last if $free eq 't';
	select(undef, undef, undef, 0.1);
}
is($free, 't', 'another session can take the advisory lock the query took');
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM pg_locks WHERE pid = $worker_pid AND locktype = 'advisory'}),
	'0', 'the worker holds no advisory lock');
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM pg_locks WHERE pid = $worker_pid AND locktype = 'object'
	   AND classid = 'pg_extension'::regclass AND objid = 0 AND granted}),
	'1', 'it still holds the lock that makes it unique in its database');

# a step that fails as a whole (here a lock timeout on the stream table)
# aborts its transaction, which releases session locks of the default lock
# method: the worker takes its own lock again
my $fail_offset = -s $node->logfile;
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE lock_s IN ACCESS EXCLUSIVE MODE');
$node->wait_for_log(qr/canceling statement due to lock timeout/, $fail_offset);
$locker->query_safe('ROLLBACK');
$locker->quit;
ok($node->poll_query_until('postgres', qq{
	SELECT count(*) = 1 FROM pg_locks WHERE pid = $worker_pid AND locktype = 'object'
	   AND classid = 'pg_extension'::regclass AND objid = 0 AND granted}),
	'after a failed step the worker holds its lock again');
is($node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamwm worker'"),
	$worker_pid, 'and goes on as the same worker');

# --- a stream held by a user's open process() is skipped, and said so ------
my $log_offset = -s $node->logfile;
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN');
$holder->query_safe(q{SELECT streamwm.process('fast_s')});
my $holder_pid = $holder->query_safe('SELECT pg_backend_pid()');
$holder_pid =~ s/\s+//g;
$node->wait_for_log(
	qr/streamwm worker skipped stream "fast_s": another step holds it\n.*DETAIL:  Process $holder_pid holds the stream in an open transaction/,
	$log_offset);
pass('the worker says that the stream is held, and by which process');
# at most once a minute per stream, although it is skipped every 100 ms
sleep 2;
my $log = slurp_file($node->logfile, $log_offset);
my $said = () = $log =~ /skipped stream "fast_s"/g;
is($said, 1, 'once, not on every tick');
$holder->query_safe('COMMIT');
$holder->quit;
$node->safe_psql('postgres',
	"SELECT streamwm.ingest('fast_s', '{\"v\": 1}', write_time => to_timestamp(20))");
ok($node->poll_query_until('postgres', q{
	SELECT closed_until >= to_timestamp(20) FROM streamwm.queries WHERE query = 'fast_q'}),
	'once the transaction ends, the worker processes the stream again');

# --- a stream's own code is bounded too ---------------------------------------
# Reading a stream and retention's DELETE run as the stream's owner and run
# the owner's code: here a BEFORE DELETE trigger that sleeps (retention is
# due) and a row-level security policy, forced on a non-superuser owner,
# that sleeps.  Both steps fail at streamwm.query_timeout and are retried
# with backoff, and the other streams of the database go on.
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', q{
	CREATE FUNCTION sleepy() RETURNS trigger LANGUAGE plpgsql AS
	  $$BEGIN PERFORM pg_sleep(60); RETURN NULL; END$$;
	SELECT streamwm.create_stream('sleepy_s', 'v int', watermark_granularity => '100 ms',
	                              idle_timeout => '1 hour', retention => '1 s');
	CREATE TRIGGER sleepy BEFORE DELETE ON sleepy_s FOR EACH STATEMENT EXECUTE FUNCTION sleepy();
	-- one transaction: a step between the two rows would commit the first
	-- (nothing is due for retention yet) and the test expects no step to
	BEGIN;
	SELECT streamwm.ingest('sleepy_s', '{"v": 1}', write_time => to_timestamp(1));
	SELECT streamwm.ingest('sleepy_s', '{"v": 1}', write_time => to_timestamp(10));
	COMMIT;

	CREATE ROLE regress_owner;
	GRANT CREATE ON SCHEMA public TO regress_owner;
	SET ROLE regress_owner;
	CREATE FUNCTION slow_policy() RETURNS boolean LANGUAGE plpgsql AS
	  $$BEGIN PERFORM pg_sleep(60); RETURN true; END$$;
	SELECT streamwm.create_stream('policy_s', 'v int', watermark_granularity => '100 ms',
	                              idle_timeout => '1 hour');
	ALTER TABLE policy_s ENABLE ROW LEVEL SECURITY;
	CREATE POLICY slow_read ON policy_s FOR SELECT USING (slow_policy());
	CREATE POLICY any_insert ON policy_s FOR INSERT WITH CHECK (true);
	SELECT streamwm.ingest('policy_s', '{"v": 1}', write_time => to_timestamp(1));
	RESET ROLE;
});
# the owner's policies never run when streamwm reads the stream: FORCE ROW
# LEVEL SECURITY, which would make them apply to the owner, is refused
my ($rc_force, $out_force, $err_force) = $node->psql('postgres',
	'SET ROLE regress_owner; ALTER TABLE policy_s FORCE ROW LEVEL SECURITY');
like($err_force, qr/cannot force row level security on stream/,
	'FORCE ROW LEVEL SECURITY on a stream is refused');
$node->wait_for_log(
	qr/ERROR:  retention of stream public.sleepy_s exceeded streamwm.query_timeout \(500ms\)/,
	$log_offset);
pass('retention running the owner\'s sleeping DELETE trigger fails at streamwm.query_timeout');
ok($node->poll_query_until('postgres', q{
	SELECT events = 1 FROM streamwm.streams WHERE stream = 'policy_s'::regclass}),
	'a stream with a sleeping policy (not forced) is read without running it');
my $emitted = $node->safe_psql('postgres',
	q{SELECT windows_emitted FROM streamwm.queries WHERE query = 'fast_q'});
$t0 = time;
for my $i (30 .. 40)
{
	$node->safe_psql('postgres',
		"SELECT streamwm.ingest('fast_s', '{\"v\": 1}', write_time => to_timestamp($i))");
	select(undef, undef, undef, 0.1);
}
ok($node->poll_query_until('postgres', qq{
	SELECT windows_emitted >= $emitted + 10 FROM streamwm.queries WHERE query = 'fast_q'}),
	'meanwhile the other stream keeps closing its windows');
$elapsed = time - $t0;
note("fast_s closed 10 windows ${elapsed}s after the first of them was ingested");
cmp_ok($elapsed, '<', 60, 'well within the 60 s the owners\' code sleeps');
is($node->safe_psql('postgres', q{SELECT count(*) FROM sleepy_s}), '2',
	'the failed steps rolled back: retention removed nothing');
is($node->safe_psql('postgres', q{
	SELECT events FROM streamwm.streams WHERE stream = 'sleepy_s'::regclass}), '0',
	'and recorded nothing');
is($node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamwm worker'"),
	$worker_pid, 'the worker is still the same one');

# A query whose code catches the cancel (WHEN query_canceled) and goes on:
# streamwm.query_timeout cannot stop it with a cancel, so 5 s later the
# worker ends itself (FATAL, which no user code catches) and is restarted;
# the other streams go on.
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', q{
	CREATE FUNCTION stubborn(int) RETURNS int LANGUAGE plpgsql AS
	  $$BEGIN LOOP BEGIN PERFORM pg_sleep(3600);
	    EXCEPTION WHEN query_canceled THEN RAISE LOG 'stubborn caught a cancel'; END; END LOOP; END$$;
	SELECT streamwm.create_stream('stub_s', 'v int', watermark_granularity => '100 ms',
	                              idle_timeout => '1 hour');
	SELECT streamwm.create_query('stub_q', 'SELECT sum(stubborn(v)) AS n FROM stub_s',
	                             hop => '1 s', size => '1 s');
	SELECT streamwm.ingest('stub_s', '{"v": 1}', write_time => to_timestamp(1));
	SELECT streamwm.ingest('stub_s', '{"v": 1}', write_time => to_timestamp(5));
});
$node->wait_for_log(qr/stubborn caught a cancel/, $log_offset);
$node->wait_for_log(qr/terminating background worker "streamwm worker" due to administrator command/,
	$log_offset);
pass('a query that swallows the cancel ends the worker process after the grace period');
$node->wait_for_log(qr/the last step of stream stub_s did not finish \(its worker ended\); retrying it in/,
	$log_offset);
pass('the restarted worker knows which stream it was and backs it off');
$emitted = $node->safe_psql('postgres',
	q{SELECT windows_emitted FROM streamwm.queries WHERE query = 'fast_q'});
for my $i (50 .. 53)
{
	$node->safe_psql('postgres',
		"SELECT streamwm.ingest('fast_s', '{\"v\": 1}', write_time => to_timestamp($i))");
}
ok($node->poll_query_until('postgres', qq{
	SELECT windows_emitted >= $emitted + 3 FROM streamwm.queries WHERE query = 'fast_q'}),
	'the restarted worker goes on with the other streams');
$node->safe_psql('postgres', q{SELECT streamwm.drop_query('stub_q', drop_result => true)});

$node->stop;
done_testing();

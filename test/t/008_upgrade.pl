# Versioned upgrades (issue 12): a database filled under streamwm 0.1 goes
# through a real package upgrade (new library and scripts, restart) and
# ALTER EXTENSION streamwm UPDATE, and goes on processing with nothing lost or
# repeated; the updated extension is object for object a fresh installation.
#
# 0.1 is built from the history (git archive of the commit tagged v0.1) and
# installed into a private copy of the PostgreSQL installation found on PATH
# (pg_config); "upgrading the package" copies the streamwm library and
# extension files installed there (the version under test) over it.
# STREAMWM_GIT_DIR names the repository (default: the .git two levels above
# this file); without the history (a shallow clone, an export) the test is
# skipped.
#
# Every later change of the SQL API adds an update script and extends this
# test: fill the database with what the new version changes, before the
# update, and check it after.
#
# Timing: processing is driven by streamwm.process(now => ...) with explicit
# event and write times; where the worker must act (or must not), the test
# polls with a timeout.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Copy qw(copy);
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $v01_commit = 'a5c0aeef346c92df4261bc37451375341e7e6da2';

# --- the 0.1 sources, from the history --------------------------------------
my $git_dir = $ENV{STREAMWM_GIT_DIR} // dirname(abs_path(__FILE__)) . '/../../.git';
if (-f $git_dir)
{
	# a worktree or submodule: ".git" is a file naming the real one
	my $line = slurp_file($git_dir);
	$git_dir = $1 if $line =~ /^gitdir:\s*(\S+)/m;
}
my @git = ('git', '-c', 'safe.directory=*', "--git-dir=$git_dir");
plan skip_all => "the git history of streamwm is not available at $git_dir (a shallow clone or "
  . "an export?): set STREAMWM_GIT_DIR to a repository that has commit $v01_commit (v0.1)"
  unless -e $git_dir
  && system(@git, 'cat-file', '-e', "$v01_commit^{commit}") == 0;
plan skip_all => 'make and a C compiler are needed to build streamwm 0.1'
  unless system('sh', '-c', 'command -v make >/dev/null && command -v cc >/dev/null') == 0;

my $pg_config = 'pg_config';
chomp(my $bindir = `$pg_config --bindir`);
chomp(my $pkglibdir = `$pg_config --pkglibdir`);
chomp(my $sharedir = `$pg_config --sharedir`);
die "pg_config not found on PATH" unless $bindir && -d $bindir;

my $work = PostgreSQL::Test::Utils::tempdir('upgrade');
my $src01 = "$work/streamwm-0.1";
make_path($src01);
system_or_bail("@git archive $v01_commit | tar -x -C $src01");
system_or_bail('sh', '-c',
	"cd $src01 && make PG_CONFIG=$bindir/pg_config >$work/build-0.1.log 2>&1");
ok(-f "$src01/streamwm.so", 'streamwm 0.1 built from the history');

# --- a private installation: PostgreSQL as installed, with streamwm 0.1 -----
# The installation's directories keep their relative places (the binaries find
# share/ and lib/ relative to themselves), under $root.
my $root = "$work/install";
for my $dir ($bindir, $pkglibdir, $sharedir)
{
	next if -d "$root$dir";
	make_path(dirname("$root$dir"));
	system_or_bail('cp', '-a', $dir, "$root$dir");
}
my $install_path = dirname("$root$bindir");
my $extdir = "$root$sharedir/extension";
unlink glob("$extdir/streamwm*");
copy("$src01/streamwm.so", "$root$pkglibdir/streamwm.so") or die "copy: $!";
copy("$src01/streamwm.control", "$extdir/streamwm.control") or die "copy: $!";
copy("$src01/sql/streamwm--0.1.sql", "$extdir/streamwm--0.1.sql") or die "copy: $!";

my $node = PostgreSQL::Test::Cluster->new('upgrade', install_path => $install_path);
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'streamwm'
streamwm.enabled = off
streamwm.launcher_naptime = 1
max_worker_processes = 16
});
$node->start;

# --- fill it under 0.1 -------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', q{
	CREATE EXTENSION streamwm VERSION '0.1';
	CREATE ROLE alice LOGIN;
	GRANT CREATE ON SCHEMA public TO alice;
});
is($node->safe_psql('app', "SELECT extversion FROM pg_extension WHERE extname = 'streamwm'"),
	'0.1', 'the database has streamwm 0.1');

# Every row ever ingested is also kept in a plain table (inputs), with what it
# was meant to be: the recomputation at the end reads the stream tables and
# the late-event log, and this says that no row went missing.
$node->safe_psql('app', q{
	CREATE TABLE inputs (stream text, n int);
	GRANT ALL ON inputs TO alice;
	SET ROLE alice;
	-- event time from the data, three partitions by key, 2 s of delay
	SELECT streamwm.create_stream('clicks', 'page text, uid int, ts timestamptz, v int',
	    partitions => 3, watermark_delay => '2 seconds', event_time => 'ts',
	    partition_key => 'uid', retention => '36500 days');
	-- event time = write time, two partitions chosen by the writer
	SELECT streamwm.create_stream('wt', 'k int, v int', partitions => 2, retention => '36500 days');
	-- a user's table referencing rows of it by their primary key
	CREATE TABLE wt_refs (p int, o bigint, FOREIGN KEY (p, o) REFERENCES wt (sw_partition, sw_offset));
	-- short retention, no query: 0.1's retention removes rows
	SELECT streamwm.create_stream('short', 'v int, ts timestamptz', event_time => 'ts',
	    retention => '1 minute');
	-- a pane-plan query (count, sum), sliding
	SELECT streamwm.create_query('per_page', 'SELECT page, count(*) AS n, sum(v) AS s FROM clicks GROUP BY page',
	    hop => '10 seconds', size => '30 seconds', start_from => 'earliest');
	-- a general-plan query (DISTINCT), tumbling
	SELECT streamwm.create_query('distinct_users',
	    'SELECT page, count(DISTINCT uid) AS users FROM clicks GROUP BY page',
	    hop => '5 seconds', size => '5 seconds', start_from => 'earliest');
	-- pane plan over the write-time stream
	SELECT streamwm.create_query('wt_sum', 'SELECT k, sum(v) AS s, max(v) AS m FROM wt GROUP BY k',
	    hop => '1 minute', size => '2 minutes', start_from => 'earliest');
});

my $batch = 0;
# feed_clicks(base second, count, disorder): rows with event times around
# 2024-01-01 00:00:00 + base, out of order by up to 'disorder' seconds
sub feed_clicks
{
	my ($base, $count, $disorder) = @_;
	$batch++;
	$node->safe_psql('app', qq{
		SET ROLE alice;
		WITH r AS (
		  SELECT 'p' || (i % 4) AS page, (i * 7 + $batch) % 11 AS uid,
		         '2024-01-01 00:00:00+00'::timestamptz + make_interval(secs => $base + i - (i * 13 % ($disorder + 1))) AS ts,
		         $batch * 1000 + i AS v
		    FROM generate_series(1, $count) i),
		ins AS (INSERT INTO clicks (page, uid, ts, v) SELECT * FROM r RETURNING 1)
		INSERT INTO inputs SELECT 'clicks', count(*) FROM ins;
	});
}
# feed_wt(minute): a few rows into each partition of wt at explicit write times
sub feed_wt
{
	my ($second) = @_;
	$node->safe_psql('app', qq{
		SET ROLE alice;
		SELECT streamwm.ingest('wt', jsonb_build_array(jsonb_build_object('k', 1, 'v', $second),
		                                               jsonb_build_object('k', 2, 'v', $second + 1)),
		                       partition => 0, write_time => 'epoch'::timestamptz + make_interval(secs => 1704067200 + $second));
		SELECT streamwm.ingest('wt', jsonb_build_object('k', 1, 'v', $second * 2),
		                       partition => 1, write_time => 'epoch'::timestamptz + make_interval(secs => 1704067200 + $second + 5));
		INSERT INTO inputs VALUES ('wt', 3);
	});
}
# The steps' clock: long after every arrival.  (Late rows expire by arrival,
# retention after; the streams keep a century, so nothing expires here.)
my $now = "'2030-01-01 00:00:00+00'";

# feed_short(from second, to second): one row a second into 'short'
sub feed_short
{
	my ($from, $to) = @_;
	$node->safe_psql('app', qq{
		SET ROLE alice;
		INSERT INTO short (v, ts) SELECT i, '2024-01-01 00:00:00+00'::timestamptz + make_interval(secs => i)
		  FROM generate_series($from, $to) i;
		INSERT INTO inputs VALUES ('short', $to - $from + 1);
	});
}

feed_clicks(0, 200, 8);
feed_short(0, 299);
# a user's own BRIN index on event time (not the one create_stream made):
# the update keeps it
$node->safe_psql('app', 'CREATE INDEX wt_user_brin ON wt USING brin (sw_event_time)');
feed_wt(10);
feed_wt(70);
$node->safe_psql('app', "SELECT streamwm.process(now => $now)");
# late rows: far below W
$node->safe_psql('app', q{
	SET ROLE alice;
	INSERT INTO clicks (page, uid, ts, v) VALUES ('p1', 1, '2024-01-01 00:00:05+00', -1),
	                                             ('p2', 2, '2024-01-01 00:00:07+00', -2);
	INSERT INTO inputs VALUES ('clicks', 2);
});
feed_clicks(200, 150, 5);
feed_wt(130);
$node->safe_psql('app', "SELECT streamwm.process(now => $now)");
# rows 0.1 never reads: the update must leave them to be read once
feed_clicks(350, 120, 6);
feed_short(300, 359);
feed_wt(250);
# A foreign key whose check runs alice's code: her column's type reaches
# the stream's by an implicit cast of hers that tries to make her superuser
# (once the update is under way: RESET ROLE undid a plain SET ROLE, then
# ALTER ROLE).  The update re-makes the key; checking it must run as alice,
# in a security-restricted operation.
$node->safe_psql('app', q{
	SET ROLE alice;
	CREATE TYPE part AS ENUM ('0', '1');
	CREATE FUNCTION part_int(p part) RETURNS int LANGUAGE plpgsql AS $$
	BEGIN
		IF to_regclass('public.updating') IS NOT NULL THEN
			BEGIN
				PERFORM set_config('role', 'none', true);
			EXCEPTION WHEN insufficient_privilege THEN
				NULL;
			END;
			BEGIN
				ALTER ROLE alice SUPERUSER;
			EXCEPTION WHEN insufficient_privilege THEN
				NULL;
			END;
		END IF;
		RETURN p::text::int;
	END $$;
	CREATE CAST (part AS int) WITH FUNCTION part_int(part) AS IMPLICIT;
	CREATE TABLE wt_refs_cast (p part, o bigint, FOREIGN KEY (p, o) REFERENCES wt (sw_partition, sw_offset));
	INSERT INTO wt_refs_cast SELECT sw_partition::text::part, sw_offset FROM wt LIMIT 1;
});

my $before = $node->safe_psql('app', q{
	SELECT string_agg(format('%s %s %s %s', stream, watermark, events, late_events), ' | ' ORDER BY stream::text)
	  FROM streamwm.streams});
my $emitted = $node->safe_psql('app',
	'SELECT sum(windows_emitted) FROM streamwm.queries');
cmp_ok($emitted, '>', 0, "0.1 closed windows ($emitted)");
my $pending01 = $node->safe_psql('app', 'SELECT sum(unprocessed_events) FROM streamwm.streams');
cmp_ok($pending01, '>', 0, "rows 0.1 has not read yet ($pending01)");
my $expired01 = $node->safe_psql('app', "SELECT expired_rows FROM streamwm.streams WHERE stream = 'short'::regclass");
cmp_ok($expired01, '>', 0, "0.1's retention removed rows ($expired01)");
my $late01 = $node->safe_psql('app', "SELECT late_events FROM streamwm.streams WHERE stream = 'clicks'::regclass");
cmp_ok($late01, '>=', 2, "late events under 0.1 ($late01)");

# --- the package upgrade: new library and scripts, restart -------------------
$node->stop;
unlink glob("$extdir/streamwm*");
copy("$pkglibdir/streamwm.so", "$root$pkglibdir/streamwm.so") or die "copy: $!";
copy($_, $extdir) or die "copy $_: $!" for glob("$sharedir/extension/streamwm*");
chomp(my $new_version = `sed -n "s/^default_version *= *'\\(.*\\)'/\\1/p" $extdir/streamwm.control`);
isnt($new_version, '0.1', "the package now has streamwm $new_version");
$node->append_conf('postgresql.conf', "streamwm.enabled = on\n");
my $log_offset = -s $node->logfile;
$node->start;

# the worker waits and says why, once
my $waiting = qr/streamwm library \Q$new_version\E is installed but the extension in database "app" is 0\.1/;
my $said = 0;
for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
{
	if (slurp_file($node->logfile, $log_offset) =~ $waiting) { $said = 1; last; }
	select(undef, undef, undef, 0.1);
}
ok($said, 'the worker says the library is newer than the extension');
like(slurp_file($node->logfile, $log_offset), qr/HINT:  Run ALTER EXTENSION streamwm UPDATE/,
	'... with a hint to update');
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'app'"),
	'the worker of app is running');
sleep 2;
my @said = slurp_file($node->logfile, $log_offset) =~ /$waiting/g;
is(scalar(@said), 1, 'it says so once');
is($node->safe_psql('app', q{
	SELECT string_agg(format('%s %s %s %s', stream, watermark, events, late_events), ' | ' ORDER BY stream::text)
	  FROM streamwm.streams}), $before, 'and processes nothing');

# every entry point fails clearly, and touches nothing
my ($ret, $out, $err) = $node->psql('app', "\\set VERBOSITY verbose\nSELECT streamwm.process(now => $now)");
isnt($ret, 0, 'process() fails before the update');
like($err, qr/ERROR:  55000: $waiting/, '... with the version error (object_not_in_prerequisite_state)');
like($err, qr/HINT:  Run ALTER EXTENSION streamwm UPDATE/, '... and the hint');
($ret, $out, $err) = $node->psql('app',
	"SET ROLE alice; INSERT INTO clicks (page, uid, ts, v) VALUES ('p0', 1, now(), 1)");
like($err, $waiting, 'an insert into a stream fails before the update');
($ret, $out, $err) = $node->psql('app',
	"SELECT streamwm.ingest('wt', '{\"k\": 1, \"v\": 1}', partition => 0)");
like($err, $waiting, 'so does ingest()');
($ret, $out, $err) = $node->psql('app',
	"SELECT streamwm.create_query('q2', 'SELECT count(*) AS n FROM wt', '1 minute', '1 minute')");
like($err, $waiting, 'and create_query()');

# --- ALTER EXTENSION streamwm UPDATE ------------------------------------------
$node->safe_psql('app', 'CREATE TABLE updating (); ALTER EXTENSION streamwm UPDATE; DROP TABLE updating');
is($node->safe_psql('app', "SELECT extversion FROM pg_extension WHERE extname = 'streamwm'"),
	$new_version, "the database has streamwm $new_version");
is($node->safe_psql('app', q{
	SELECT string_agg(format('%s %s', name, last_error), ', ') FROM streamwm.query_def
	 WHERE last_error IS NOT NULL}), '', 'every 0.1 query came through the update without an error');
is($node->safe_psql('app', q{
	SELECT string_agg(format('%s %s', name, plan), ', ' ORDER BY name) FROM streamwm.query_def}),
	'distinct_users general, per_page pane, wt_sum pane',
	'each query has the plan create_query would give it');
is($node->safe_psql('app', q{
	SELECT pg_get_constraintdef(f.oid) || ' on ' || i.indexrelid::regclass
	  FROM pg_constraint f JOIN pg_index i ON i.indexrelid = f.conindid
	 WHERE f.conrelid = 'wt_refs'::regclass AND f.contype = 'f'}),
	'FOREIGN KEY (p, o) REFERENCES wt(sw_partition, sw_offset) on wt_sw_partition_sw_offset_key',
	"a user's foreign key to the stream's primary key now references its unique constraint");
is($node->safe_psql('app', q{
	SELECT format('%s %s', r.rolsuper, c.convalidated)
	  FROM pg_roles r, pg_constraint c
	 WHERE r.rolname = 'alice' AND c.conrelid = 'wt_refs_cast'::regclass AND c.contype = 'f'}),
	'f t', "a foreign key checked with alice's cast is valid again, checked as alice, who is no superuser");
is($node->safe_psql('app', q{
	SELECT count(*) FROM pg_attribute WHERE attrelid IN ('clicks'::regclass, 'wt'::regclass)
	   AND attname = 'sw_arrival' AND NOT attisdropped}), '0', 'stream tables lost sw_arrival');
is($node->safe_psql('app', q{
	SELECT string_agg(pg_get_indexdef(indexrelid), '; ' ORDER BY indexrelid) FROM pg_index
	 WHERE indrelid = 'clicks'::regclass AND NOT indisunique}),
	'CREATE INDEX clicks_sw_partition_sw_offset_sw_event_time_idx ON public.clicks USING streamwm_brin (sw_partition, sw_offset, sw_event_time) '
	  . 'WITH (pages_per_range=\'32\', autosummarize=off)',
	'the btree on event time became a BRIN index, on offset and event time since 0.3');
is($node->safe_psql('app', q{
	SELECT string_agg(indrelid::regclass::text, ' ' ORDER BY indrelid::regclass::text) FROM pg_index
	 WHERE indrelid IN ('clicks'::regclass, 'wt'::regclass) AND indisunique}),
	'wt', "a stream's key is gone, but where a user's foreign key references it");
is($node->safe_psql('app', q{
	SELECT string_agg(c.relname, ' ' ORDER BY c.relname) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
	 JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = 'wt'::regclass AND a.amname = 'brin'}),
	'wt_user_brin', "the update dropped create_stream's BRIN index on event time, not the user's");

# the worker goes on by itself: its first steps read the rows 0.1 left
ok($node->poll_query_until('app', q{
	SELECT sum(unprocessed_events) = 0 FROM streamwm.streams}),
	'the worker resumed and read the rows 0.1 had left');
like(slurp_file($node->logfile, $log_offset), qr/processing resumes/, 'and said it resumes');

# keep ingesting: with process(now => ...) and the worker both at work
feed_clicks(470, 150, 7);
$node->safe_psql('app', q{
	SET ROLE alice;
	INSERT INTO clicks (page, uid, ts, v) VALUES ('p3', 3, '2024-01-01 00:01:00+00', -3);
	INSERT INTO inputs VALUES ('clicks', 1);
});
feed_wt(310);
$node->safe_psql('app', "SELECT streamwm.process(now => $now)");
feed_clicks(620, 100, 3);
feed_wt(400);
feed_wt(520);
feed_short(360, 599);
$node->safe_psql('app', "SELECT streamwm.process(now => $now)");
ok($node->poll_query_until('app', q{
	SELECT sum(unprocessed_events) = 0 FROM streamwm.streams}), 'everything read');

# --- nothing lost, nothing repeated -----------------------------------------
# counters: every row ingested was read once (events), late ones are logged
is($node->safe_psql('app', q{
	SELECT string_agg(format('%s events=%s late=%s', s.stream,
	                         s.events = (SELECT sum(n) FROM inputs i WHERE i.stream = s.stream::text),
	                         s.late_events = (SELECT count(*) FROM streamwm.late_event_log l
	                                           WHERE l.stream = s.stream)), ', ' ORDER BY s.stream::text)
	  FROM streamwm.streams s}),
	'clicks events=t late=t, short events=t late=t, wt events=t late=t',
	'events and late events add up to the rows ingested');
is($node->safe_psql('app', q{
	SELECT (SELECT count(*) FROM clicks) = (SELECT sum(n) FROM inputs WHERE stream = 'clicks')
	   AND (SELECT count(*) FROM wt) = (SELECT sum(n) FROM inputs WHERE stream = 'wt')}),
	't', 'every row ingested is in its stream');
is($node->safe_psql('app', q{
	SELECT count(*) FROM streamwm.late_event_log l JOIN clicks c
	    ON c.sw_partition = l.partition AND c.sw_offset = l.sw_offset
	 WHERE l.stream = 'clicks'::regclass AND c.sw_event_time >= l.watermark}),
	'0', 'only rows below W were late');
# retention goes on where 0.1's stopped: rows removed plus rows kept are the
# rows ingested, and no accepted row older than W - retention is left
is($node->safe_psql('app', q{
	SELECT format('%s %s', d.expired_rows + (SELECT count(*) FROM short)
	                       = (SELECT sum(n) FROM inputs WHERE stream = 'short'),
	              (SELECT count(*) FROM short s
	                WHERE s.sw_event_time < d.watermark - d.retention
	                  AND NOT EXISTS (SELECT 1 FROM streamwm.late_event_log l
	                                   WHERE l.stream = d.stream AND l.partition = s.sw_partition
	                                     AND l.sw_offset = s.sw_offset)))
	  FROM streamwm.stream_def d WHERE d.stream = 'short'::regclass}),
	't 0', 'retention after the update: removed + kept = ingested, nothing older than W - retention');
cmp_ok($node->safe_psql('app', "SELECT expired_rows FROM streamwm.streams WHERE stream = 'short'::regclass"),
	'>', $expired01, 'and it removed rows read before and after the update');
cmp_ok($node->safe_psql('app', "SELECT late_events FROM streamwm.streams WHERE stream = 'clicks'::regclass"),
	'>', $late01, 'late rows after the update were logged too');

# results: every closed window equals a plain-SQL recomputation over the
# accepted rows (all rows minus the late ones), and no other row is there
sub recompute_diff
{
	my ($query, $stream, $hop, $size, $cols, $aggs) = @_;
	my $diff = $node->safe_psql('app', qq{
		WITH acc AS (
		  SELECT * FROM $stream s
		   WHERE NOT EXISTS (SELECT 1 FROM streamwm.late_event_log l
		                      WHERE l.stream = '$stream'::regclass AND l.partition = s.sw_partition
		                        AND l.sw_offset = s.sw_offset)),
		q AS (SELECT closed_until FROM streamwm.queries WHERE query = '$query'),
		w AS (SELECT DISTINCT streamwm.window_start(sw_event_time, '$hop') - sw_k * interval '$hop' AS ws
		        FROM acc, generate_series(0, (extract(epoch FROM interval '$size') /
		                                      extract(epoch FROM interval '$hop'))::int - 1) sw_k),
		model AS (
		  SELECT w.ws AS window_start, w.ws + interval '$size' AS window_end, $aggs
		    FROM w JOIN acc ON acc.sw_event_time >= w.ws AND acc.sw_event_time < w.ws + interval '$size', q
		   WHERE w.ws + interval '$size' <= q.closed_until
		   GROUP BY 1, 2, $cols),
		got AS (SELECT * FROM $query)
		SELECT (SELECT count(*) FROM model) || ' windows, ' ||
		       (SELECT count(*) FROM (SELECT * FROM model EXCEPT SELECT * FROM got) x) || ' missing, ' ||
		       (SELECT count(*) FROM (SELECT * FROM got EXCEPT SELECT * FROM model) x) || ' extra, ' ||
		       (SELECT count(*) FROM got) || ' rows'});
	note("$query: $diff");
	return $diff;
}
like(recompute_diff('per_page', 'clicks', '10 seconds', '30 seconds', 'page',
		'page, count(*) AS n, sum(v) AS s'),
	qr/^[1-9]\d* windows, 0 missing, 0 extra, /, 'per_page (pane plan) equals the recomputation');
like(recompute_diff('distinct_users', 'clicks', '5 seconds', '5 seconds', 'page',
		'page, count(DISTINCT uid) AS users'),
	qr/^[1-9]\d* windows, 0 missing, 0 extra, /, 'distinct_users (general plan) equals the recomputation');
like(recompute_diff('wt_sum', 'wt', '1 minute', '2 minutes', 'k',
		'k, sum(v) AS s, max(v) AS m'),
	qr/^[1-9]\d* windows, 0 missing, 0 extra, /, 'wt_sum (pane plan, write time) equals the recomputation');
is($node->safe_psql('app', q{
	SELECT bool_and(closed_until >= '2024-01-01 00:10:00+00') FROM streamwm.queries
	 WHERE stream = 'clicks'::regclass}), 't', 'the clicks queries closed windows far past the update');

# a new query on an upgraded stream, 'earliest', sees every retained row
$node->safe_psql('app', q{
	SET ROLE alice;
	SELECT streamwm.create_query('per_page_new', 'SELECT page, count(*) AS n, sum(v) AS s FROM clicks GROUP BY page',
	    hop => '10 seconds', size => '30 seconds', start_from => 'earliest');
});
$node->safe_psql('app', "SELECT streamwm.process('clicks', now => $now)");
is($node->safe_psql('app', q{
	SELECT count(*) FROM ((SELECT * FROM per_page EXCEPT SELECT * FROM per_page_new)
	                UNION ALL (SELECT * FROM per_page_new EXCEPT SELECT * FROM per_page)) x}),
	'0', 'a new query from the earliest row equals the upgraded one');

# --- the updated extension is a fresh installation ---------------------------
# The objects of the extension, described generically (members, functions
# with arguments and defaults, views, catalog columns and constraints,
# policies, privileges, comments): identical in a database created at the
# current version.
my $describe = q{
WITH ext AS (SELECT oid, extconfig, extcondition FROM pg_extension WHERE extname = 'streamwm')
SELECT 'member ' || pg_describe_object(d.classid, d.objid, d.objsubid)
  FROM pg_depend d, ext WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
UNION ALL
SELECT 'config ' || extconfig::regclass[]::text || ' ' || extcondition::text FROM ext
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text || ' (' || pg_get_function_arguments(p.oid) || ') -> ' ||
       pg_get_function_result(p.oid) || ' ' || concat_ws(' ', p.prokind, p.provolatile, p.proisstrict,
       p.prosecdef, p.proleakproof, p.proparallel, p.procost, p.prorows, l.lanname, p.proconfig::text,
       p.probin, p.prosrc, p.proacl::text, p.proowner::regrole::text) ||
       ' comment ' || coalesce(obj_description(p.oid, 'pg_proc'), '-')
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace IN ('streamwm'::regnamespace, 'streamwm_internal'::regnamespace)
UNION ALL
SELECT 'aggregate ' || a.aggfnoid::regprocedure::text || ' ' || concat_ws(' ', a.aggtransfn::regproc,
       a.aggfinalfn::regproc, a.aggfinalextra, a.aggtranstype::regtype, a.aggtransspace)
  FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid
 WHERE p.pronamespace IN ('streamwm'::regnamespace, 'streamwm_internal'::regnamespace)
UNION ALL
SELECT 'relation ' || c.relname || ' ' || concat_ws(' ', c.relkind, c.relrowsecurity, c.relforcerowsecurity,
       c.reloptions::text, c.relacl::text, c.relowner::regrole::text) ||
       ' comment ' || coalesce(obj_description(c.oid, 'pg_class'), '-') ||
       CASE WHEN c.relkind = 'v' THEN ' view ' || pg_get_viewdef(c.oid) ELSE '' END
  FROM pg_class c WHERE c.relnamespace = 'streamwm'::regnamespace
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attnum || ' ' || a.attname || ' ' ||
       format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' ' ||
       coalesce(pg_get_expr(ad.adbin, ad.adrelid), '-') || ' ' || coalesce(a.attacl::text, '-') ||
       ' comment ' || coalesce(col_description(c.oid, a.attnum), '-')
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
 WHERE c.relnamespace = 'streamwm'::regnamespace
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'streamwm'::regnamespace
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE c.relnamespace = 'streamwm'::regnamespace
UNION ALL
SELECT 'policy ' || concat_ws(' ', tablename, policyname, permissive, roles::text, cmd, qual, with_check)
  FROM pg_policies WHERE schemaname = 'streamwm'
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid)
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = 'streamwm'::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'event trigger ' || concat_ws(' ', evtname, evtevent, evtfoid::regproc, evtenabled, evttags::text,
       evtowner::regrole::text) FROM pg_event_trigger
UNION ALL
SELECT 'schema ' || concat_ws(' ', nspname, nspowner::regrole, nspacl::text) ||
       ' comment ' || coalesce(obj_description(oid, 'pg_namespace'), '-')
  FROM pg_namespace WHERE nspname = 'streamwm'
UNION ALL
SELECT 'type ' || concat_ws(' ', t.typname, t.typtype, t.typacl::text)
  FROM pg_type t WHERE t.typnamespace = 'streamwm'::regnamespace
ORDER BY 1};
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION streamwm');
my $fresh = $node->safe_psql('fresh', $describe);
my $updated = $node->safe_psql('app', $describe);
cmp_ok(scalar(split /\n/, $fresh), '>', 300, 'the description of a fresh installation is thorough');
if ($updated eq $fresh)
{
	pass('the updated extension is, object for object, a fresh installation');
}
else
{
	my %f = map { $_ => 1 } split /\n/, $fresh;
	my %u = map { $_ => 1 } split /\n/, $updated;
	diag("only in the fresh installation: $_") for grep { !$u{$_} } sort keys %f;
	diag("only in the updated one: $_") for grep { !$f{$_} } sort keys %u;
	fail('the updated extension is, object for object, a fresh installation');
}

# 0.2 (its install script, still installed) updated to the current version:
# the same objects (0.2 -> 0.3: the pane plan's aggregates declare SSPACE)
$node->safe_psql('postgres', 'CREATE DATABASE from02');
$node->safe_psql('from02', "CREATE EXTENSION streamwm VERSION '0.2'");
is($node->safe_psql('from02', q{
	SELECT string_agg(aggtransspace::text, ' ') FROM pg_aggregate
	 WHERE aggfnoid::regproc::text LIKE 'streamwm_internal.%'}), '0 0 0 0',
	'0.2: the pane plan aggregates declared no state size');
$node->safe_psql('from02', 'ALTER EXTENSION streamwm UPDATE');
is($node->safe_psql('from02', $describe), $fresh,
	'0.2 updated is, object for object, a fresh installation');
is($node->safe_psql('from02', q{
	SELECT string_agg(aggtransspace::text, ' ') FROM pg_aggregate
	 WHERE aggfnoid::regproc::text LIKE 'streamwm_internal.%'}), '128 128 128 128',
	'... with the state size declared');

# the stream tables are what create_stream makes: same triggers and indexes
$node->safe_psql('fresh', q{
	CREATE ROLE bob;
	SELECT streamwm.create_stream('clicks', 'page text, uid int, ts timestamptz, v int',
	    partitions => 3, watermark_delay => '2 seconds', event_time => 'ts',
	    partition_key => 'uid', retention => '36500 days');
	SELECT streamwm.create_stream('wt', 'k int, v int', partitions => 2, retention => '36500 days');
	-- the updated wt keeps its key: the user's foreign keys reference it
	ALTER TABLE wt ADD CONSTRAINT wt_sw_partition_sw_offset_key UNIQUE (sw_partition, sw_offset);
	-- ... and the user's own BRIN index
	CREATE INDEX wt_user_brin ON wt USING brin (sw_event_time);
});
my $shape = q{
	SELECT string_agg(x, E'\n' ORDER BY x) FROM (
	  SELECT 'trigger ' || pg_get_triggerdef(t.oid) AS x FROM pg_trigger t
	   WHERE t.tgrelid IN ('clicks'::regclass, 'wt'::regclass) AND NOT t.tgisinternal
	  UNION ALL
	  SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM pg_index i
	   WHERE i.indrelid IN ('clicks'::regclass, 'wt'::regclass)
	  UNION ALL
	  SELECT 'column ' || attrelid::regclass || ' ' || attname || ' ' || format_type(atttypid, atttypmod)
	         || CASE WHEN attnotnull THEN ' not null' ELSE '' END
	    FROM pg_attribute WHERE attrelid IN ('clicks'::regclass, 'wt'::regclass) AND attnum > 0
	     AND NOT attisdropped
	  UNION ALL
	  SELECT 'table ' || c.oid::regclass || ' using ' || a.amname || ' replica identity ' || c.relreplident::text FROM pg_class c
	    JOIN pg_am a ON a.oid = c.relam WHERE c.oid IN ('clicks'::regclass, 'wt'::regclass)) s};
is($node->safe_psql('app', $shape), $node->safe_psql('fresh', $shape),
	'the upgraded stream tables have the access method, replica identity, triggers, indexes and columns of new ones');

# pane tables and results stay the users' own, out of the extension
is($node->safe_psql('app', q{
	SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
	  JOIN pg_class c ON c.oid = d.objid AND d.classid = 'pg_class'::regclass
	 WHERE e.extname = 'streamwm' AND d.deptype = 'e' AND c.relnamespace <> 'streamwm'::regnamespace}),
	'0', 'no user table became an extension member');
is($node->safe_psql('app', q{
	SELECT string_agg(DISTINCT pane_table::text || ' ' || pg_get_userbyid(c.relowner), ', ')
	  FROM streamwm.query_def q JOIN pg_class c ON c.oid = q.pane_table
	 WHERE q.name IN ('per_page', 'wt_sum')}),
	'per_page_panes alice, wt_sum_panes alice', 'the pane tables belong to the query owner');

$node->stop;
done_testing();

# Retention in steady state (issue 4): an hour of event time (explicit write
# times) through a stream with retention => '5 minutes'.  The stream table's
# row count and on-disk size stay bounded; results stay right; rows a query
# has not finished with are kept, not skipped.  Sizes are printed.
#
# STREAMWM_TEST_SCALE multiplies the hours pushed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $scale = $ENV{STREAMWM_TEST_SCALE} || 1;
my $minutes = 60 * $scale;
my $per_second = 20;

my $node = PostgreSQL::Test::Cluster->new('retention');
$node->init;
# VACUUM runs after every minute of events, not autovacuum: the whole run
# takes a few seconds of wall time, and whether autovacuum came by in them
# decided the size check (it failed once when commits got faster)
$node->append_conf('postgresql.conf', q{
autovacuum = off
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION streamwm;
	SELECT streamwm.create_stream('ret', 'k int, v int', partitions => 2,
	                              watermark_delay => '2 s', retention => '5 minutes');
	SELECT streamwm.create_query('ret_hop', 'SELECT k, count(*) AS n, sum(v) AS s FROM ret GROUP BY k',
	                             hop => '10 s', size => '1 min');
	CREATE TABLE truth (t timestamptz, k int, v int);
});

my @samples;
for my $m (0 .. $minutes - 1)
{
	# one minute of events, slightly out of order, two partitions
	$node->safe_psql('postgres', qq{
		CREATE TEMP TABLE batch AS
		SELECT to_timestamp($m * 60 + i::float8 / $per_second - (i % 7) * 0.1) AS t,
		       i % 5 AS k, i AS v, i % 2 AS p
		  FROM generate_series(1, 60 * $per_second) i;
		INSERT INTO truth SELECT t, k, v FROM batch;
		INSERT INTO ret (sw_partition, sw_write_time, k, v) SELECT p, t, k, v FROM batch ORDER BY t;
		SELECT streamwm.process('ret');
	});
	$node->safe_psql('postgres', 'VACUUM ret');
	if ($m % 5 == 4)
	{
		my ($rows, $bytes, $expired) = split /\|/, $node->safe_psql('postgres', q{
			SELECT (SELECT count(*) FROM ret), pg_total_relation_size('ret'),
			       (SELECT expired_rows FROM streamwm.streams WHERE stream = 'ret'::regclass)});
		push @samples, { m => $m + 1, rows => $rows, bytes => $bytes, expired => $expired };
		note(sprintf("after %3d min of event time: %6d rows, %6d kB on disk, %7d expired",
			$m + 1, $rows, $bytes / 1024, $expired));
	}
}

my $third = int(@samples / 3);
my ($max1, $max2, $bmax1, $bmax2) = (0, 0, 0, 0);
for my $i ($third .. $#samples)
{
	my $s = $samples[$i];
	if ($i < $third + int((@samples - $third) / 2))
	{
		$max1 = $s->{rows} if $s->{rows} > $max1;
		$bmax1 = $s->{bytes} if $s->{bytes} > $bmax1;
	}
	else
	{
		$max2 = $s->{rows} if $s->{rows} > $max2;
		$bmax2 = $s->{bytes} if $s->{bytes} > $bmax2;
	}
}
ok($samples[-1]{rows} <= 7 * 60 * $per_second,
	"row count bounded by retention plus open windows: $samples[-1]{rows} rows");
ok($max2 <= $max1 * 1.2, "row count flat: $max1 then $max2");
ok($bmax2 <= $bmax1 * 1.5 + 256 * 1024, "on-disk size flat: $bmax1 then $bmax2 bytes");
ok($samples[-1]{expired} > 0, "rows were expired: $samples[-1]{expired}");

# nothing was skipped: every closed window equals a recomputation from the
# full input (no event here is late: delay 2 s covers the disorder)
is($node->safe_psql('postgres', q{SELECT late_events FROM streamwm.streams WHERE stream = 'ret'::regclass}),
	'0', 'no late events');
my ($windows, $wrong) = split /\|/, $node->safe_psql('postgres', q{
	WITH model AS (
	  SELECT ws AS window_start, k, count(*) AS n, sum(v) AS s
	    FROM truth, LATERAL (SELECT streamwm.window_start(t, '10 s') - j * interval '10 s' AS ws
	                           FROM generate_series(0, 5) j) w
	   GROUP BY ws, k
	  HAVING ws + interval '1 min' <= (SELECT closed_until FROM streamwm.queries WHERE query = 'ret_hop'))
	SELECT (SELECT count(*) FROM model),
	       (SELECT count(*) FROM (SELECT * FROM model EXCEPT SELECT window_start, k, n, s FROM ret_hop
	                              UNION ALL
	                              SELECT window_start, k, n, s FROM ret_hop EXCEPT SELECT * FROM model) d)});
ok($windows > 100, "$windows result rows");
is($wrong, '0', 'every result equals a recomputation from the full input');

# a failing query holds rows back instead of losing them
$node->safe_psql('postgres', q{
	CREATE TABLE gate (ok boolean);
	INSERT INTO gate VALUES (false);
	SELECT streamwm.create_query('ret_gated',
	    'SELECT count(*) AS n FROM ret WHERE v / CASE WHEN (SELECT ok FROM gate) THEN 1 ELSE 0 END IS NOT NULL',
	    hop => '1 min', size => '1 min');
});
my $rows_before = $node->safe_psql('postgres', 'SELECT count(*) FROM ret');
for my $m ($minutes .. $minutes + 9)
{
	$node->safe_psql('postgres', qq{
		INSERT INTO truth SELECT to_timestamp($m * 60 + i::float8 / $per_second), i % 5, i
		  FROM generate_series(1, 60 * $per_second) i;
		INSERT INTO ret (sw_partition, sw_write_time, k, v)
		SELECT i % 2, to_timestamp($m * 60 + i::float8 / $per_second), i % 5, i
		  FROM generate_series(1, 60 * $per_second) i;
		SELECT streamwm.process('ret');
	});
}
my $rows_held = $node->safe_psql('postgres', 'SELECT count(*) FROM ret');
# every row ingested since the query was created (ten minutes) is still
# there, though retention is five minutes
is($node->safe_psql('postgres', qq{
	SELECT count(*) >= 10 * 60 * $per_second FROM ret WHERE sw_event_time >= to_timestamp($minutes * 60)}),
	't', "while a query fails its rows are kept ($rows_before -> $rows_held rows)");
$node->safe_psql('postgres', q{UPDATE gate SET ok = true; SELECT streamwm.process('ret');});
my $gated_wrong = $node->safe_psql('postgres', q{
	SELECT count(*) FROM ret_gated g
	 WHERE n <> (SELECT count(*) FROM truth WHERE t >= g.window_start AND t < g.window_end)});
is($gated_wrong, '0', 'once fixed it catches up with the right counts');
ok($node->safe_psql('postgres', 'SELECT count(*) FROM ret') < $rows_held,
	'and retention then removes what it had held');

$node->stop;
done_testing();

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

$node->stop;
done_testing();

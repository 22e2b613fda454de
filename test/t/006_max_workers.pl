# streamwm.max_workers bounds the database workers the launcher starts.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('maxw');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'streamwm'
streamwm.max_workers = 2
streamwm.launcher_naptime = 1
max_worker_processes = 16
});
$node->start;
for my $db (qw(d1 d2 d3 d4))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION streamwm');
	$node->safe_psql($db, q{SELECT streamwm.create_stream('s', 'v int')});
}
$node->restart;
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'streamwm worker'}),
	'the launcher starts two database workers');
sleep 3;
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'streamwm worker'}),
	'2', 'and no more');
$node->append_conf('postgresql.conf', 'streamwm.max_workers = 8');
$node->reload;
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 4 FROM pg_stat_activity WHERE backend_type = 'streamwm worker'}),
	'raising streamwm.max_workers starts the others');

# a database with the extension but no stream holds no slot
$node->safe_psql('postgres', 'CREATE DATABASE empty');
$node->safe_psql('empty', 'CREATE EXTENSION streamwm');
sleep 3;
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'empty'}),
	'0', 'a database with no stream has no worker');
$node->stop;
done_testing();

# 200 fixed-seed hostile inputs to every streamwm function (test/fuzz/README.md)
# against a cluster of its own: no crash, no leaked-resource warning, the same
# postmaster throughout.  The longer modes are run by hand (test/fuzz/run.sh).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('fuzz');
$node->init;
$node->start;

my $bindir = $node->config_data('--bindir');
my $findings = "$PostgreSQL::Test::Utils::tmp_check/fuzz_findings.txt";
local $ENV{PGHOST} = $node->host;
local $ENV{PGPORT} = $node->port;
my ($stdout, $stderr);
my $ok = IPC::Run::run(
	[ 'python3', 'test/fuzz/fuzz.py', '--smoke', '--pg-bin', $bindir,
	  '--watch-log', $node->logfile, '--findings', $findings ],
	'>', \$stdout, '2>', \$stderr);
ok($ok, 'the fuzz smoke run finds nothing');
diag("$stdout\n$stderr") unless $ok;
note($stdout);
$node->stop;
done_testing();

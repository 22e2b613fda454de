# Soak (issue 4): the worker runs while writers are active; the worker's
# private memory and the stream table stay flat.  Samples are printed and
# written to tmp_check/soak_samples.txt.
#
# STREAMWM_TEST_SCALE (default 1) multiplies the duration: CI runs 40 s,
# `STREAMWM_TEST_SCALE=6` runs four minutes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $scale = $ENV{STREAMWM_TEST_SCALE} || 1;
my $duration = 40 * $scale;
my $interval = 4;

my $node = PostgreSQL::Test::Cluster->new('soak');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'streamwm'
autovacuum_naptime = 5s
streamwm.launcher_naptime = 1
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION streamwm;
	SELECT streamwm.create_stream('soak', 'k int, v int', partitions => 4,
	                              watermark_delay => '1 s', watermark_granularity => '100 ms',
	                              idle_timeout => '2 s', retention => '10 s');
	SELECT streamwm.create_query('soak_hop', 'SELECT k, count(*) AS n, sum(v) AS s FROM soak GROUP BY k',
	                             hop => '1 s', size => '5 s');
	SELECT streamwm.create_query('soak_tumble', 'SELECT count(*) AS n, avg(v) AS a FROM soak',
	                             hop => '2 s', size => '2 s');
});
my $worker = $node->safe_psql('postgres', q{
	SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamwm worker' AND datname = 'postgres'});
if ($worker eq '')
{
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'streamwm worker'});
	$worker = $node->safe_psql('postgres', q{
		SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamwm worker'});
}
ok($worker =~ /^\d+$/, "the worker runs (pid $worker)");

my $script = $node->basedir . '/soak.sql';
open(my $f, '>', $script) or die;
print $f q{\set p random(0, 3)
\set v random(0, 999)
INSERT INTO soak (sw_partition, k, v) VALUES (:p, :v % 10, :v);
};
close $f;
my $pgbench = $node->installed_command('pgbench');
my ($out, $err) = ('', '');
my $bench = IPC::Run::start([ $pgbench, '-n', '-c', '4', '-R', '800', '-T', $duration,
	'-f', $script, $node->connstr('postgres') ], '>', \$out, '2>', \$err);

sub memory_kb
{
	my ($pid, $field) = @_;
	open(my $s, '<', "/proc/$pid/status") or return -1;
	while (<$s>) { return $1 if /^$field:\s+(\d+)/; }
	return -1;
}

my @samples;
my $start = time;
while (time - $start < $duration)
{
	sleep $interval;
	my ($rows, $bytes, $events, $lag, $panes, $pane_bytes) = split /\|/, $node->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM soak), pg_total_relation_size('soak'),
		       (SELECT events FROM streamwm.streams WHERE stream = 'soak'::regclass),
		       (SELECT extract(epoch FROM processing_lag) FROM streamwm.streams WHERE stream = 'soak'::regclass),
		       (SELECT count(*) FROM soak_hop_panes) + (SELECT count(*) FROM soak_tumble_panes),
		       pg_total_relation_size('soak_hop_panes') + pg_total_relation_size('soak_tumble_panes')});
	my $sample = {
		t => int(time - $start), rows => $rows, bytes => $bytes, events => $events,
		anon => memory_kb($worker, 'RssAnon'), rss => memory_kb($worker, 'VmRSS'), lag => $lag,
		panes => $panes, pane_bytes => $pane_bytes };
	push @samples, $sample;
	note(sprintf("t=%3ds events=%7d rows=%6d table=%6d kB pane rows=%5d pane tables=%5d kB worker RssAnon=%6d kB VmRSS=%6d kB processing lag=%.2fs",
		$sample->{t}, $events, $rows, $bytes / 1024, $panes, $pane_bytes / 1024, $sample->{anon}, $sample->{rss}, $lag));
}
$bench->finish;

open(my $log, '>', $PostgreSQL::Test::Utils::tmp_check . '/soak_samples.txt');
for my $s (@samples)
{
	printf $log "t=%d events=%d rows=%d table_bytes=%d worker_rss_anon_kb=%d worker_vmrss_kb=%d lag_s=%s\n",
	  $s->{t}, $s->{events}, $s->{rows}, $s->{bytes}, $s->{anon}, $s->{rss}, $s->{lag};
}
close $log;

ok(@samples >= 6, scalar(@samples) . ' samples');
ok($samples[-1]{events} > 1000, "the stream was busy ($samples[-1]{events} events)");

# flat: after the first third (retention and autovacuum settling), the
# second half never exceeds the first half by much
my $third = int(@samples / 3);
my @warm = @samples[$third .. $#samples];
my $half = int(@warm / 2);
my @first = @warm[0 .. $half - 1];
my @second = @warm[$half .. $#warm];
sub maxof { my ($k, @s) = @_; my $m = 0; for (@s) { $m = $_->{$k} if $_->{$k} > $m; } return $m; }
my ($anon1, $anon2) = (maxof('anon', @first), maxof('anon', @second));
my ($rows1, $rows2) = (maxof('rows', @first), maxof('rows', @second));
my ($bytes1, $bytes2) = (maxof('bytes', @first), maxof('bytes', @second));
ok($anon2 <= $anon1 * 1.10 + 1024,
	"worker private memory flat: $anon1 kB then $anon2 kB");
ok($rows2 <= $rows1 * 1.5 + 1000, "stream rows bounded by retention: $rows1 then $rows2");
ok($bytes2 <= $bytes1 * 1.5 + 256 * 1024, "stream table size bounded: $bytes1 then $bytes2 bytes");
# pane state holds only the open windows' panes: bounded, not growing
my ($panes1, $panes2) = (maxof('panes', @first), maxof('panes', @second));
my ($pbytes1, $pbytes2) = (maxof('pane_bytes', @first), maxof('pane_bytes', @second));
ok($panes2 <= $panes1 * 1.5 + 100, "pane rows bounded: $panes1 then $panes2");
ok($pbytes2 <= $pbytes1 * 1.5 + 256 * 1024, "pane tables bounded: $pbytes1 then $pbytes2 bytes");
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM streamwm.queries WHERE last_error IS NOT NULL}), '0', 'no query failed');

$node->stop;
done_testing();

# META.json is complete and valid for PGXN (Meta Spec 1.0.0): required keys,
# types and formats, the files it names exist, its version is the control
# file's (test/pgxn/check_meta.py).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;

my ($stdout, $stderr);
my $ok = IPC::Run::run([ 'python3', 'test/pgxn/check_meta.py' ], '>', \$stdout, '2>', \$stderr);
ok($ok, 'META.json is valid for PGXN');
diag("$stdout\n$stderr") unless $ok;
done_testing();

# streamwm — PGXS build.  `make && make install`; then `make installcheck`
# runs the whole suite against the running server (regress and isolation
# tests in databases of their own, TAP tests in clusters of their own), with
# or without streamwm preloaded.  test/run_tests.sh sets a machine up, starts
# a throwaway cluster and runs it, ending with "N passed, N failed".

MODULE_big = streamwm
OBJS = \
	src/streamwm.o \
	src/api.o \
	src/catalog.o \
	src/citus.o \
	src/citus_fold.o \
	src/citus_route.o \
	src/ingest.o \
	src/stream_am.o \
	src/stream_brin.o \
	src/commit_order.o \
	src/window.o \
	src/query.o \
	src/aggstate.o \
	src/pane.o \
	src/step_cache.o \
	src/result.o \
	src/watermark.o \
	src/process.o \
	src/limit.o \
	src/worker.o \
	src/worker_coord.o \
	src/monitor.o \
	src/guard.o \
	src/purge.o \
	src/query_ddl.o \
	src/alter.o \
	src/session.o \
	src/count.o \
	src/version.o \
	src/upgrade.o

EXTENSION = streamwm
# the install script of the current version, the first release's and every
# update script (each later change of the SQL API adds one: see DESIGN.md)
DATA = sql/streamwm--0.3.sql sql/streamwm--0.1.sql sql/streamwm--0.2.sql \
       sql/streamwm--0.1--0.2.sql sql/streamwm--0.2--0.3.sql
# the version the C code is written for (version.c compares it with the
# database's extension version)
EXTVERSION := $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(dir $(lastword $(MAKEFILE_LIST)))streamwm.control)
PG_CPPFLAGS = -DSW_LIBRARY_VERSION='"$(EXTVERSION)"'
PGFILEDESC = "streamwm - event-time stream processing"

REGRESS = ydb_example ingest stream_am windows watermarks queries retention property security recreate hostile stream_guard limits fuzz_regress spellings purge query_ddl panes engine extension_aggs aggstate_attack commit_order heartbeat controls chain lateness alter_query recompute origin ordered processing_time session count descriptions result_write batching stream_brin
REGRESS_OPTS = --inputdir=. --outputdir=test/results
ISOLATION = concurrent_writers concurrent_process commit_order idle_holds renumber heartbeat notify alter_query partition_claims speculative invalidation renumber_rights renumber_nokey start_latest latest_chunks chunk_turns renumber_in_place renumber_fk
ISOLATION_OPTS = --inputdir=test --outputdir=test/results/isolation
# pg_isolation_regress does not make its output directory's parents
REGRESS_PREP = results_dirs
# TAP tests live in test/t; each starts clusters of its own
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl
PROVE_FLAGS = -I test

PG_CFLAGS = -Wall -Wmissing-prototypes -Wpointer-arith -Werror=vla -Wendif-labels \
	-Wmissing-format-attribute -Wformat-security

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every object reads SW_LIBRARY_VERSION through version.h
$(OBJS): streamwm.control src/version.h $(wildcard src/*.h)

.PHONY: results_dirs
results_dirs:
	@mkdir -p test/results/isolation

-- Inputs the fuzz driver (test/fuzz/) found to misbehave, one each.
SET client_min_messages = warning;
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;
RESET client_min_messages;
\set VERBOSITY sqlstate

-- _ingest_when() of a relation that does not exist: a clean 42P01, not the
-- internal error "could not open relation with OID" (XX000)
SELECT streamwm_internal._ingest_when(0::oid::regclass, 'ts', 'k');
SELECT streamwm_internal._ingest_when(4294967295::oid::regclass, NULL, NULL);

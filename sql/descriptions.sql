-- Every object of the extension has a description (COMMENT ON ...), and so
-- does every column of its views and catalog tables, the catalog's trigger
-- and policies, and the schema: each query lists what has none and must
-- return no row.  A new function, view, column or table without a COMMENT
-- fails here.  (The extension may already exist: this test only reads.)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS streamwm;
RESET client_min_messages;

-- extension members (functions, aggregates, tables, views, event triggers, ...)
SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS undescribed_member
  FROM pg_depend d
  JOIN pg_extension e ON e.oid = d.refobjid AND d.refclassid = 'pg_extension'::regclass
 WHERE e.extname = 'streamwm' AND d.deptype = 'e'
   AND obj_description(d.objid, d.classid::regclass::name) IS NULL
 ORDER BY 1;

-- columns of the extension's views and tables
SELECT c.oid::regclass AS relation, a.attname AS undescribed_column
  FROM pg_depend d
  JOIN pg_extension e ON e.oid = d.refobjid AND d.refclassid = 'pg_extension'::regclass
  JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE e.extname = 'streamwm' AND d.deptype = 'e' AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
   AND col_description(c.oid, a.attnum) IS NULL
 ORDER BY 1, 2;

-- the schema, triggers and row-level security policies on the catalog
SELECT x.what AS undescribed
  FROM (SELECT 'schema ' || n.nspname AS what, obj_description(n.oid, 'pg_namespace') AS descr
          FROM pg_namespace n WHERE n.nspname IN ('streamwm', 'streamwm_internal')
        UNION ALL
        SELECT format('trigger %s on %s', t.tgname, t.tgrelid::regclass),
               obj_description(t.oid, 'pg_trigger')
          FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE c.relnamespace = 'streamwm'::regnamespace AND NOT t.tgisinternal
        UNION ALL
        SELECT format('policy %s on %s', p.polname, p.polrelid::regclass),
               obj_description(p.oid, 'pg_policy')
          FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
         WHERE c.relnamespace = 'streamwm'::regnamespace) x
 WHERE x.descr IS NULL
 ORDER BY 1;

-- internal functions live in streamwm_internal and say so; public ones do neither
SELECT p.oid::regprocedure AS misdescribed
  FROM pg_proc p
 WHERE p.pronamespace IN ('streamwm'::regnamespace, 'streamwm_internal'::regnamespace)
   AND (p.pronamespace = 'streamwm_internal'::regnamespace) <> (obj_description(p.oid, 'pg_proc') LIKE 'internal: %')
 ORDER BY 1;

-- \dx+ streamwm: the schema streamwm holds only public objects
SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS internal_in_public_schema
  FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid AND d.refclassid = 'pg_extension'::regclass
 WHERE e.extname = 'streamwm' AND d.deptype = 'e'
   AND pg_describe_object(d.classid, d.objid, d.objsubid) ~ '^(function|aggregate) streamwm\._'
 ORDER BY 1;


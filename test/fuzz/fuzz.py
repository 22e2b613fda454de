#!/usr/bin/env python3
"""Fuzz driver for streamwm: hostile input to every SQL function of the
extension, through psql, checking after each batch that the server is still
up and is the same server.

It creates a database (--dbname, dropped first) with a few fixture streams
and a query, then sends --inputs generated statements in batches of
--batch.  Every input runs in its own transaction, rolled back:

    BEGIN; SET LOCAL statement_timeout = ...; <input>; ROLLBACK;

An ERROR is fine.  A failure is:
  - a crash: a batch's psql losing its connection, the watchdog session (one
    connection held for the whole run) dying, or pg_postmaster_start_time()
    changing;
  - a WARNING about a leaked resource (relcache/snapshot/TupleDesc/buffer
    reference leaks, "resource was not closed"): PostgreSQL's own leak check;
  - a new report in a log given with --watch-log (AddressSanitizer,
    UndefinedBehaviorSanitizer, valgrind memcheck, "terminated by signal",
    "TRAP:").
Internal errors (SQLSTATE XX000: elog(ERROR) reached from user input) are
listed as findings too, but fail the run only with --strict.

After a crashing batch the driver re-runs its inputs one per connection to
name the input that crashes, waits for the server to come back, and goes on.

The functions are read from the catalog (every function in schema
streamwm), so a function added later is fuzzed too, by its argument types;
the main ones also have generators that know what they take.  Everything is
generated from --seed: the same seed and --inputs give the same inputs.

--soak SECONDS instead commits a stream of fuzzed ingest() calls (one
persistent session) while the background worker processes them, and samples
the worker's and the session's memory (RssAnon from /proc) to show whether
either grows.

Exit status: 0 if nothing failed, 1 otherwise.  Python 3 and psql only.
"""

import argparse
import ctypes
import ctypes.util
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

# ---------------------------------------------------------------------
# Pools of hostile values
# ---------------------------------------------------------------------

MB = ["é", "ñ", "名", "ストリーム", "流", "😀", "\u0301", "ß", "Ω", "\u200b", "\ufeff"]

HOSTILE_TEXT = [
    "", " ", "\t", "\n", "\r\n", "'", "''", "\"", "\"\"", "\\", "\\\\", ";", ";;",
    "--", "/*", "*/", "/* unterminated", "-- comment\n", "$$", "$a$", "$a$ $$ $a$",
    "'; DROP TABLE fz_s1; --", "x); DROP TABLE fz_s1; --", "\"; DROP TABLE fz_s1; --",
    "1; SELECT pg_sleep(0)", "%s", "%I", "%L", "%%", "%1$s", "NULL", "null",
    "U&\"\\0041\"", "U&\"d\\0000\"", "U&\"\\D800\"", "U&'\\+01F600'", "E'\\x00'",
    "sw_offset", "sw_partition", "sw_event_time", "sw_write_time", "sw_arrival",
    "ctid", "xmin", "oid", "tableoid", "pg_catalog.pg_class", "pg_temp.x", "public.",
    ".", "..", "a.b.c", "a..b", "\"a\".\"b\"", "\"a\"\"b\"", "fz_s1", "public.fz_s1",
    "streamwm.stream_def", "\"fz_s1", "fz_s1\"", "x" * 63, "x" * 64, "x" * 100,
    "x" * 10000, "名" * 21, "名" * 22, "é" * 40, "😀" * 16, "a\u0301" * 30,
    "SELECT", "select 1", "(", ")", "((((((((", "))))", "[", "{", "}", "\\0",
    "\x01\x02\x7f", "\u2028", "\ufeffk", "k\u200b", "K", "\"K\"", "k k", "k,v",
]

INTERVALS = [
    "0", "1 microsecond", "-1 microsecond", "0.4 microseconds", "1 second", "5 seconds",
    "1 minute", "1 hour", "1 day", "1 month", "1 year", "-1 month +30 days",
    "1 mon -30 days", "1 day -86400 seconds", "2147483647 days", "-2147483648 days",
    "178000000 years", "-178000000 years", "2562047788 hours", "-2562047788 hours",
    "2562047788:00:54.775807", "-2562047788:00:54.775808", "1 week", "7 days 1 microsecond",
    "PT5S", "P1D", "P1M", "PT0.000001S", "@ 1 sec ago", "1e-6 s", "86399.999999 s",
    "1 century", "1 millennium", "3 microseconds", "1000000 days",
]

TIMESTAMPS = [
    "infinity", "-infinity", "294276-12-31 23:59:59.999999+00", "294276-12-31 23:59:59+00",
    "4714-11-24 00:00:00+00 BC", "4713-01-01 00:00:00+00 BC", "1970-01-01 00:00:00+00",
    "1970-01-01 00:00:00.000001+00", "1969-12-31 23:59:59.999999+00", "2000-01-01+00",
    "epoch", "2024-02-29 12:00:00+14", "9999-12-31 23:59:59+00", "0001-01-01 00:00:00+00 BC",
    "2024-01-01 00:00:00+00", "2024-01-01 00:00:05+00", "2024-01-01 00:01:00+00",
]

INTS = ["0", "1", "-1", "3", "4", "4096", "2147483647", "-2147483648", "100000"]
BIGINTS = INTS + ["9223372036854775807", "-9223372036854775808"]

EXPRESSIONS = [
    "sw_write_time", "to_timestamp(big)", "to_timestamp(k)", "ts", "d::timestamptz",
    "ts + interval '1000000 years'", "1/0", "now()", "clock_timestamp()",
    "(SELECT now())", "sw_event_time", "sw_offset", "sw_partition", "k", "v", "j",
    "js", "ROW(k, v)", "ARRAY[k]", "v COLLATE \"C\"", "k::text::json", "xmlparse(content v)",
    "NULL", "NULL::timestamptz", "'infinity'::timestamptz", "'-infinity'::timestamptz",
    "k, k", "k /*", "k --", "k); DROP TABLE fz_s1; --", "pg_sleep(0.01)::text",
    "random()", "count(*)", "row_number() OVER ()", "generate_series(1, 2)",
    "CASE WHEN k > 0 THEN ts END", "ts::timestamp", "ts AT TIME ZONE 'UTC'",
    "(j->>'t')::timestamptz", "to_timestamp(f)", "to_timestamp(n)", "c", "(c).a",
    "arr[1]", "arr", "tarr", "by", "iv", "p", "U&\"\\006B\"", "\"K\"", "nosuch",
    "pg_catalog.to_timestamp(big)", "streamwm.window_start(ts, '1 s')",
    "$1", "?", "sw_write_time + iv", "ts - '294276 years'::interval",
]

COLUMN_LISTS = [
    "k int", "k int, v text", "k int, sw_x int", "sw_offset text", "k int, k int",
    "", " ", "k", "k int); DROP TABLE fz_s1; --", "k int, v text DEFAULT 'x'); SELECT (1",
    "LIKE fz_s1", "LIKE pg_class", "k serial", "c fz_comp", "a int[], b text[][]",
    "\"名前\" text, \"😀\" int", "\"" + "é" * 40 + "\" int", "x" * 70 + " int",
    "k int GENERATED ALWAYS AS (1/0) STORED", "k int CHECK (false)", "k int NOT NULL",
    "j jsonb, js json, p point", "sw_partition int", "\"sw_partition\" text",
    "window_start int", "oid int", "ctid int", "k int PRIMARY KEY", "k int UNIQUE",
    "k int REFERENCES fz_s1", "k int COLLATE \"C\"", "t text COLLATE \"und-x-icu\"",
    "k int, v text, ts timestamptz, big bigint",
]

QUERIES = [
    "SELECT count(*) AS n FROM fz_s1",
    "SELECT k, count(*) AS n, sum(f) AS s FROM fz_s1 GROUP BY k",
    "SELECT k, count(*), sum(big), min(v), max(n), avg(k) FROM fz_s1 GROUP BY k",
    "SELECT v, count(*) FROM fz_s1 GROUP BY v",
    "SELECT array_agg(v ORDER BY v) AS r FROM fz_s1",
    "SELECT count(*) FILTER (WHERE k > 0) AS n FROM fz_s1",
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY f) AS p FROM fz_s1",
    "SELECT count(DISTINCT k) AS n FROM fz_s1",
    "SELECT k, count(*) AS n FROM fz_s1 GROUP BY k HAVING count(*) > 1",
    "SELECT k, count(*) AS n FROM fz_s1 WHERE v <> '' GROUP BY k",
    "SELECT count(*) AS n FROM ONLY fz_s1",
    "SELECT count(*) AS n FROM public.fz_s1",
    "SELECT count(*) AS n FROM \"fz_s1\"",
    "SELECT count(*) AS n FROM U&\"fz\\005Fs1\"",
    "SELECT count(*) AS n FROM fz_s1 AS s(a, b, c)",
    "SELECT count(*) AS n FROM fz_s1 s",
    "SELECT count(*) AS n FROM fz_s1 -- trailing comment",
    "SELECT count(*) AS n FROM fz_s1 /* trailing */",
    "SELECT count(*) AS n FROM fz_s1;",
    "SELECT count(*) AS n FROM fz_s1; DROP TABLE fz_s1",
    "SELECT count(*) AS n FROM fz_s1; SELECT 1",
    "SELECT 1",
    "SELECT * FROM fz_s1",
    "SELECT k FROM fz_s1",
    "SELECT k, row_number() OVER () FROM fz_s1",
    "SELECT count(*) AS n FROM fz_s1, fz_s2",
    "SELECT count(*) AS n FROM fz_s1 a JOIN fz_s1 b USING (k)",
    "SELECT count(*) AS n FROM fz_s1 WHERE k IN (SELECT k FROM fz_s1)",
    "WITH x AS (SELECT * FROM fz_s1) SELECT count(*) AS n FROM x",
    "SELECT count(*) AS n FROM fz_s1 UNION SELECT 1",
    "SELECT count(*) AS n FROM fz_s1 FOR UPDATE",
    "SELECT count(*) AS n FROM fz_s1 ORDER BY 1 LIMIT 1",
    "SELECT DISTINCT ON (k) k, count(*) FROM fz_s1 GROUP BY k",
    "SELECT k, v, count(*) AS n FROM fz_s1 GROUP BY GROUPING SETS ((k), (v))",
    "SELECT k, count(*) AS n FROM fz_s1 GROUP BY ROLLUP (k)",
    "SELECT count(*) AS window_start FROM fz_s1",
    "SELECT count(*) AS window_end FROM fz_s1",
    "SELECT k AS sw_window_start, count(*) FROM fz_s1 GROUP BY k",
    "SELECT count(*) AS n, count(*) AS n FROM fz_s1",
    "SELECT count(*) AS \"" + "x" * 80 + "\" FROM fz_s1",
    "SELECT count(*) AS \"名前\", sum(k) AS \"😀\" FROM fz_s1",
    "SELECT count(*) AS \"a\"\"b\" FROM fz_s1",
    "SELECT k + 1, count(*) FROM fz_s1 GROUP BY k + 1",
    "SELECT 1 AS one, count(*) FROM fz_s1 GROUP BY 1",
    "SELECT c, count(*) FROM fz_s1 GROUP BY c",
    "SELECT j, count(*) FROM fz_s1 GROUP BY j",
    "SELECT p, count(*) FROM fz_s1 GROUP BY p",
    "SELECT generate_series(1, 3) AS g, count(*) FROM fz_s1",
    "SELECT count(*) AS n INTO fz_into FROM fz_s1",
    "SELECT count(*) AS n FROM fz_s1 TABLESAMPLE SYSTEM (50)",
    "SELECT count(*) AS n FROM (SELECT * FROM fz_s1) sub",
    "SELECT count(*) AS n FROM fz_s1 WHERE sw_event_time > now()",
    "SELECT max(sw_offset) AS o, min(sw_window_start) FROM fz_s1",
    "SELECT count(*) AS n FROM fz_s1 WHERE $$x$$ = 'x'",
    "SELECT count(*) AS n FROM fz_s1 WHERE 'a;b' = ';'",
    "SELECT count(*) AS n, 'GROUP BY' AS g FROM fz_s1",
    "SELECT count(*) AS n FROM fz_s1 WHERE k = 1 -- GROUP BY k",
    "SELECT count(*) AS n FROM fz_s1 WINDOW w AS ()",
    "SELECT string_agg(v, ',') AS s FROM fz_s1 WHERE v LIKE '%\\'",
    "SELECT count(*) AS n FROM \"流ストリーム\"",
    "SELECT count(*) AS n FROM fz_s2",
    "SELECT k, count(*) AS n FROM fz_s2 GROUP BY k",
    "INSERT INTO fz_s1 (k) VALUES (1)",
    "DELETE FROM fz_s1",
    "VALUES (1)",
    "TABLE fz_s1",
    "SELECT count(*) FROM fz_s1 GROUP BY ()",
    "SELECT pg_sleep(0.01)::text AS s, count(*) FROM fz_s1",
    "SELECT count(*) / 0 AS n FROM fz_s1",
    "SELECT (count(*))::int2 AS n FROM fz_s1",
    "SELECT sum(k) OVER () FROM fz_s1 GROUP BY k",
    "SELECT xmlagg(xmlelement(name x, v)) AS x FROM fz_s1",
    "SELECT json_agg(fz_s1) AS j FROM fz_s1",
    "SELECT count(fz_s1.*) AS n FROM fz_s1",
    "SELECT count(*) AS n FROM fz_s1 NATURAL JOIN fz_s1",
    "SELECT count(*) AS n FROM LATERAL (SELECT * FROM fz_s1) x",
    "SELECT count(*) AS n FROM fz_s1, LATERAL (SELECT fz_s1.k) x",
    "SELECT count(*) AS n FROM fz_s1 WHERE EXISTS (SELECT FROM fz_s2)",
]

START_FROM = ["latest", "earliest", "LATEST", "Earliest", " latest", "earliest\n",
              "middle", "", "'; DROP TABLE fz_s1; --", "é" * 30]

STREAMS = ["fz_s1", "fz_s2", "\"流ストリーム\"", "fz_plain", "fz_view", "pg_class",
           "streamwm.stream_def", "fz_r1"]

# columns of fz_s1 and the kinds of JSON values that fit them
S1_COLUMNS = ["k", "v", "n", "ts", "j", "js", "arr", "tarr", "b", "f", "c", "d", "big",
              "by", "iv", "p", "nm", "ov", "mtx"]


def sql_literal(s):
    """A standard-conforming string literal (E'' is avoided on purpose)."""
    return "'" + s.replace("'", "''") + "'"


class Gen:
    """Every generator takes the random source and returns (label, sql)."""

    def __init__(self, rnd, big):
        self.r = rnd
        self.big = big            # allow multi-megabyte values
        self.many = False         # inside a long list: keep each item small
        self.bad = None
        self.argno = -1

    # --- building blocks ---------------------------------------------

    def hostile_text(self):
        r = self.r
        c = r.random()
        if c < 0.5:
            return r.choice(HOSTILE_TEXT)
        if c < 0.7:
            return "".join(r.choice(MB + ["'", "\"", ";", " ", "a", "$", "\\", "-", "/", "*"])
                           for _ in range(r.randint(1, 80)))
        if c < 0.8:
            return self.mutate(r.choice(QUERIES + EXPRESSIONS + COLUMN_LISTS))
        return r.choice(HOSTILE_TEXT) + r.choice(HOSTILE_TEXT)

    def mutate(self, s):
        """A random small edit of s: delete, duplicate, insert a special char."""
        r = self.r
        for _ in range(r.randint(1, 3)):
            if not s:
                s = r.choice(HOSTILE_TEXT)
                continue
            i = r.randrange(len(s) + 1)
            op = r.random()
            if op < 0.3:
                s = s[:i] + s[i + r.randint(1, 5):]
            elif op < 0.6:
                s = s[:i] + r.choice(["'", "\"", ";", "--", "/*", "$$", "(", ")", ",", " ",
                                      "\n", "\\", "名", "😀", "\u0000"[0:0], "::", "U&"]) + s[i:]
            elif op < 0.8:
                j = r.randrange(len(s) + 1)
                a, b = min(i, j), max(i, j)
                s = s[:b] + s[a:b] + s[b:]
            else:
                s = s[:i] + r.choice(HOSTILE_TEXT) + s[i:]
        return s

    def text_arg(self, pool=None):
        r = self.r
        if r.random() < 0.05:
            return "NULL"
        if pool is not None and r.random() < 0.6:
            v = r.choice(pool)
            if r.random() < 0.25:
                v = self.mutate(v)
            return sql_literal(v)
        return sql_literal(self.hostile_text())

    def interval_arg(self):
        r = self.r
        c = r.random()
        if c < 0.05:
            return "NULL"
        if c < 0.8:
            return sql_literal(r.choice(INTERVALS)) + "::interval"
        if c < 0.9:
            return "make_interval(secs => %s)" % r.choice(["1e-7", "1e9", "-1", "0", "9.3e12",
                                                            "'NaN'", "'Infinity'"])
        return sql_literal(self.hostile_text()) + "::interval"

    def ts_arg(self):
        r = self.r
        c = r.random()
        if c < 0.05:
            return "NULL"
        if c < 0.9:
            return sql_literal(r.choice(TIMESTAMPS)) + "::timestamptz"
        return sql_literal(self.hostile_text()) + "::timestamptz"

    def int_arg(self, pool=INTS):
        r = self.r
        return "NULL" if r.random() < 0.1 else r.choice(pool)

    def bool_arg(self):
        return self.r.choice(["true", "false", "NULL"])

    def stream_arg(self):
        r = self.r
        c = r.random()
        if c < 0.05:
            return "NULL"
        if c < 0.8:
            return sql_literal(r.choice(STREAMS)) + "::regclass"
        if c < 0.9:
            return r.choice(["0", "1", "4294967295", "1259", "16384"]) + "::oid::regclass"
        return sql_literal(self.hostile_text()) + "::regclass"

    # --- JSON ----------------------------------------------------------

    def json_scalar(self):
        r = self.r
        c = r.random()
        if c < 0.15:
            return r.choice([0, 1, -1, 2147483647, 2147483648, -2147483649,
                             9223372036854775807, 9223372036854775808, 1.5, -0.0])
        if c < 0.25:
            # raw JSON number text (huge/tiny/negative zero)
            return RawJSON(r.choice(["1e1000", "-1e-1000", "1e131072", "123456789012345678901234567890",
                                     "0.000000000000000000001", "-0", "1E+308", "9" * 1000,
                                     "1e-16383", "1e400000"]))
        if c < 0.35:
            return r.choice([True, False, None])
        if c < 0.45:
            return RawJSON(r.choice(["\"\\u0000\"", "\"a\\u0000b\"", "\"\\ud800\"", "\"\\udfff\"",
                                     "\"\\ud83d\\ude00\"", "\"\\ud83d\"", "\"\\uDC00\\uD800\"",
                                     "\"\\u00e9\"", "\"\\\"\"", "\"\\\\\"", "\"\\/\"",
                                     "\"\\b\\f\\n\\r\\t\"", "\"\\x41\"", "\"\\u12\""]))
        if c < 0.55:
            return r.choice(TIMESTAMPS + INTERVALS)
        if c < 0.65:
            n = r.choice([10, 100] if self.many else
                         [100, 10000, 100000] + ([2000000] if self.big else []))
            return r.choice(["x", "名", "\"", "\\", "{", ","]) * n
        if c < 0.75:
            return r.choice(["(1,abc)", "(1,\"a\"\"b\")", "()", "(,)", "{1,2}", "{{1},{2}}",
                             "{\"a\",NULL}", "NULL", "(1,2)", "\\x00ff", "\\xZZ", "1 2 3", "a:b"])
        return self.hostile_text()

    def json_value(self, depth=0):
        r = self.r
        c = r.random()
        if depth > 3 or c < 0.6:
            return self.json_scalar()
        if c < 0.8:
            return [self.json_value(depth + 1) for _ in range(r.randint(0, 5))]
        return {self.hostile_text()[:20]: self.json_value(depth + 1) for _ in range(r.randint(0, 4))}

    def column_value(self, col):
        """A value for column col of fz_s1, often of the right shape."""
        r = self.r
        if r.random() < 0.3:
            return self.json_value()
        right = {
            "k": lambda: r.choice([0, 1, 7, -5, 2147483647]),
            "v": lambda: r.choice(["a", "", "名前", "x'y", "x\"y"]),
            "n": lambda: r.choice([1.5, 0, RawJSON("1e100"), "NaN", "Infinity"]),
            "ts": lambda: r.choice(TIMESTAMPS),
            "j": lambda: self.json_value(),
            "js": lambda: self.json_value(),
            "arr": lambda: r.choice([[1, 2], [], [[1], [2]], [[1], [2, 3]], [None, 1], [[[[1]]]],
                                     ["1", "a"], [{"a": 1}], [[]], [1] * 100]),
            "tarr": lambda: r.choice([["a", "b"], ["\"", "\\", "{", "}", ",", " "], ["NULL", None],
                                      [[["x"]]], ["名", "😀"], [""], [["a"], ["b", "c"]]]),
            "b": lambda: r.choice([True, False, "t", "yes", 1]),
            "f": lambda: r.choice([1.5, RawJSON("1e308"), RawJSON("1e309"), "NaN", "-Infinity"]),
            "c": lambda: r.choice(["(1,x)", {"a": 1, "b": "x"}, [1, "x"], "(", "(1,2,3)"]),
            "d": lambda: r.choice(["2024-01-01", "infinity", "5874897-12-31", "4714-11-24 BC"]),
            "big": lambda: r.choice([0, 1704067200, 9223372036854775807, -9223372036854775808,
                                     RawJSON("9223372036854775808"), 1e20]),
            "by": lambda: r.choice(["\\x00", "\\xdeadbeef", "abc", "\\x0"]),
            "iv": lambda: r.choice(INTERVALS),
            "p": lambda: r.choice(["(1,2)", [1, 2], [1, 2, 3], [], "(1e400,1)"]),
            "nm": lambda: r.choice(["x" * 100, "名" * 30, [1, 2]]),
            "ov": lambda: r.choice(["1 2", [1, 2], [[1]], "-1"]),
            "mtx": lambda: r.choice([[[1, 2], [3, 4]], [[1, 2], [3]], [1, [2]], [[None]]]),
        }
        return right[col]() if col in right else self.json_value()

    def json_object(self):
        r = self.r
        c = r.random()
        if c < 0.6:
            cols = r.sample(S1_COLUMNS, r.randint(0, 5))
            obj = [(col, self.column_value(col)) for col in cols]
        elif c < 0.7:
            # system columns and other reserved names
            obj = [(r.choice(["sw_offset", "sw_partition", "sw_write_time", "sw_event_time",
                              "sw_arrival", "ctid", "xmin", "tableoid", "oid", "sw_x", "",
                              "K", "\"k\"", "k ", "名"]), self.json_scalar())]
        elif c < 0.8:
            # many keys, duplicate keys
            obj = [(r.choice(S1_COLUMNS), self.column_value("k")) for _ in range(r.randint(2, 40))]
            if r.random() < 0.3:
                obj += [("x%d" % i, i) for i in range(r.randint(100, 200 if self.many else 2000))]
        else:
            obj = [(self.hostile_text()[:30], self.json_value()) for _ in range(r.randint(0, 5))]
        return RawJSON("{" + ",".join(dump_json(k) + ":" + dump_json(v) for k, v in obj) + "}")

    def json_document(self):
        """Text of a JSON document for ingest(): object, array of objects, or junk."""
        r = self.r
        c = r.random()
        if c < 0.4:
            return dump_json(self.json_object())
        if c < 0.7:
            n = r.randint(0, r.choice([3, 10] if self.many else [3, 10, 1500]))
            many, self.many = self.many, self.many or n > 10
            doc = "[" + ",".join(dump_json(self.json_object()) for _ in range(n)) + "]"
            self.many = many
            return doc
        if self.many and c < 0.85:
            return "{\"j\":" + "[" * 50 + "]" * 50 + "}"
        if c < 0.75:
            d = r.choice([100, 1000, 5000, 100000])
            return "{\"j\":" + "[" * d + "]" * d + "}"
        if c < 0.8:
            d = r.choice([100, 1000, 100000])
            return "{\"j\":" + "{\"a\":" * d + "1" + "}" * d + "}"
        if c < 0.85:
            return dump_json(self.json_value())
        if c < 0.95:
            return self.mutate(dump_json(self.json_object()))
        return r.choice(["", "null", "[]", "{}", "[{}]", "[1]", "[[{}]]", "\"x\"", "[null]",
                         "{\"k\":1}{\"k\":2}", "{\"k\":1,}", "\ufeff{}", "{\"k\":1}\u0000"[0:7]])

    # --- generators per function ---------------------------------------

    def g_ingest(self):
        r = self.r
        stream = "'fz_s1'" if r.random() < 0.8 else self.stream_arg()
        doc = self.json_document()
        if r.random() < 0.1:
            # invalid UTF-8 through convert_from
            rows = "convert_from(%s::bytea, 'UTF8')::jsonb" % sql_literal(
                r.choice(["\\xc3", "\\xed\\xa0\\x80", "\\xff\\xfe", "\\xf4\\x90\\x80\\x80"]))
        else:
            rows = sql_literal(doc) + "::jsonb"
        args = [stream, rows]
        if r.random() < 0.4:
            args.append("partition => " + self.int_arg())
        if r.random() < 0.4:
            args.append("write_time => " + self.ts_arg())
        sql = "SELECT streamwm.ingest(%s)" % ", ".join(args)
        if r.random() < 0.2:
            sql += ";\nSELECT streamwm.process(now => %s)" % self.ts_arg()
        return "ingest", sql

    def g_ingest_lines(self):
        r = self.r
        stream = "'fz_s1'" if r.random() < 0.8 else self.stream_arg()
        lines = []
        n = r.randint(0, r.choice([3, 20, 1200]))
        many, self.many = self.many, n > 20
        for _ in range(n):
            c = r.random()
            if c < 0.6:
                lines.append(dump_json(self.json_object()))
            elif c < 0.7:
                lines.append(r.choice(["", " ", "\t", "\r", " \r ", "\f", "\v"]))
            elif c < 0.8:
                lines.append(self.json_document())
            else:
                lines.append(self.mutate(dump_json(self.json_object())))
        self.many = many
        sep = r.choice(["\n", "\r\n", "\r", "\n\r", "\n\n", "\r\r\n"])
        text = sep.join(lines)
        if r.random() < 0.3:
            text += r.choice(["\n", "\r\n", "\r", "\\", "{"])
        args = [stream, sql_literal(text)]
        if r.random() < 0.3:
            args.append("partition => " + self.int_arg())
        if r.random() < 0.3:
            args.append("write_time => " + self.ts_arg())
        sql = "SELECT streamwm.ingest_lines(%s)" % ", ".join(args)
        if r.random() < 0.2:
            sql += ";\nSELECT streamwm.process(now => %s)" % self.ts_arg()
        return "ingest_lines", sql

    def g_insert(self):
        """Plain INSERT into a stream table: the insert trigger."""
        r = self.r
        cols, vals = ["k"], [self.int_arg(BIGINTS)]
        for col, gen in (("sw_partition", lambda: self.int_arg()),
                         ("sw_write_time", self.ts_arg),
                         ("sw_offset", lambda: self.int_arg(BIGINTS)),
                         ("sw_event_time", self.ts_arg),
                         ("ts", self.ts_arg),
                         ("big", lambda: self.int_arg(BIGINTS))):
            if r.random() < 0.35:
                cols.append(col)
                vals.append(gen())
        table = r.choice(["fz_s1", "fz_s2", "\"流ストリーム\""])
        if table == "\"流ストリーム\"":
            cols, vals = cols[1:], vals[1:]
            if not cols:
                return "_stream_insert", "INSERT INTO \"流ストリーム\" DEFAULT VALUES"
        n = r.choice([1, 1, 3, 2000])
        sql = "INSERT INTO %s (%s) SELECT %s FROM generate_series(1, %d)" % (
            table, ", ".join(cols), ", ".join(vals), n)
        if r.random() < 0.3:
            sql += ";\nSELECT streamwm.process(now => %s)" % self.ts_arg()
        return "_stream_insert", sql

    def valid_or(self, valid, hostile, p=0.6):
        """valid (an SQL text), or the hostile generator's: hostile if this
        argument is one of the call's chosen bad ones (self.bad)."""
        self.argno += 1
        if self.bad is not None:
            return hostile() if self.argno in self.bad else valid
        return valid if self.r.random() < p else hostile()

    def choose_bad(self, nargs):
        """Most calls get 0 to 2 hostile arguments, the rest valid ones."""
        self.argno = -1
        self.bad = set(self.r.sample(range(nargs), self.r.choice([0, 1, 1, 1, 2, 2, 3])))

    def g_create_stream(self):
        """Mostly well-formed calls with one or two hostile arguments, so that
        the later steps (the trigger, the expressions) run too."""
        r = self.r
        self.choose_bad(9)
        fresh = sql_literal(r.choice(["fz_new", "\"Weird \"\"Name\"\"\"", "public.fz_new2",
                                      "\"" + "名" * 25 + "\"", "\"" + "é" * 40 + "\"", "x" * 70]))
        args = ["name => " + self.valid_or(fresh, lambda: self.text_arg(
                    ["fz_new", "nosuchschema.x", "pg_catalog.fz", "pg_temp.fz_tmp", "fz_s1",
                     "U&\"\\0061\"", "a.b.c"]), 0.7),
                "columns => " + self.valid_or(sql_literal(r.choice(
                    ["k int, v text, ts timestamptz, big bigint", "k int", "\"名前\" text, k int",
                     "k int, v text, ts timestamptz, big bigint, j jsonb, c fz_comp, f float8"])),
                    lambda: self.text_arg(COLUMN_LISTS), 0.7)]
        for name, gen, p in (("partitions", lambda: self.int_arg(), 0.5),
                             ("watermark_delay", self.interval_arg, 0.7),
                             ("event_time", lambda: self.text_arg(EXPRESSIONS), 0.4),
                             ("partition_key", lambda: self.text_arg(EXPRESSIONS), 0.4),
                             ("watermark_granularity", self.interval_arg, 0.8),
                             ("idle_timeout", self.interval_arg, 0.8),
                             ("retention", self.interval_arg, 0.8)):
            if r.random() < 0.5 or self.argno + 1 in self.bad:
                args.append("%s => %s" % (name, self.valid_or(
                    {"partitions": "3", "event_time": "'ts'", "partition_key": "'k'"}.get(
                        name, "'1 second'"), gen, p)))
        sql = "SELECT streamwm.create_stream(%s)" % ", ".join(args)
        if r.random() < 0.6:
            # use it: rows through the new stream's trigger, then a step
            sql += (";\nSELECT streamwm.ingest(s.stream, %s) FROM streamwm.stream_def s"
                    " WHERE s.stream::text NOT LIKE 'fz\\_s_'" % sql_literal(
                        r.choice(["{}", "[{\"k\": 1, \"ts\": \"2024-01-01\"}, {\"k\": 2, \"big\": 5}]",
                                  "{\"k\": null, \"ts\": \"infinity\"}", "{\"名前\": \"x\"}"])))
            sql += ";\nSELECT streamwm.process(now => %s)" % self.ts_arg()
        return "create_stream", sql

    def g_create_query(self):
        """Mostly a fresh name and a valid hop and size, so that the query
        text is checked, rewritten, planned and run by a step."""
        r = self.r
        self.choose_bad(6)
        hop, size = r.choice([("'1 second'", "'5 seconds'"), ("'10 seconds'", "'10 seconds'"),
                              ("'1 minute'", "'1 hour'"), ("'1 microsecond'", "'3 microseconds'")])
        args = ["name => " + self.valid_or("'fz_new_q'", lambda: self.text_arg(
                    ["fz_q", "fz q", "\"fz\"", "FZ", "名前", "x" * 70, "fz_q1", "pg_class",
                     "streamwm.stream_def"]), 0.7),
                "query => " + self.valid_or(sql_literal(r.choice(QUERIES)),
                                            lambda: self.text_arg(QUERIES)),
                "hop => " + self.valid_or(hop, self.interval_arg, 0.7),
                "size => " + self.valid_or(size, self.interval_arg, 0.7)]
        rt = self.valid_or("'fz_res'", lambda: self.text_arg(
            ["fz_res", "fz_r1", "pg_class", "streamwm.stream_def", "fz_s1", "pg_temp.fz_t",
             "public.\"名前\"", "x" * 70, "nosuchschema.t", "fz_plain"]))
        if self.argno in self.bad or r.random() < 0.3:
            args.append("result_table => " + rt)
        sf = self.valid_or(r.choice(["'latest'", "'earliest'"]), lambda: self.text_arg(START_FROM))
        if self.argno in self.bad or r.random() < 0.5:
            args.append("start_from => " + sf)
        self.bad = None
        sql = "SELECT streamwm.create_query(%s)" % ", ".join(args)
        if r.random() < 0.7:
            sql += ";\nSELECT streamwm.ingest('fz_s1', %s::jsonb)" % sql_literal(
                r.choice([self.json_document(),
                          dump_json([{"k": r.randint(0, 3), "v": r.choice(["a", "名"]), "f": r.random(),
                                      "big": r.randint(0, 9), "n": 1, "ts": "2024-01-01"}
                                     for _ in range(r.randint(1, 30))])]))
            sql += ";\nSELECT streamwm.process(now => %s)" % r.choice(
                [self.ts_arg(), "now() + interval '1 minute'", "'2024-01-01 00:05:00+00'"])
            sql += ";\nSELECT streamwm.process(now => now() + interval '1 hour')"
        return "create_query", sql

    def g_process(self):
        r = self.r
        args = []
        if r.random() < 0.6:
            args.append("stream => " + self.stream_arg())
        if r.random() < 0.8:
            args.append("now => " + self.ts_arg())
        pre = ""
        if r.random() < 0.5:
            pre = "INSERT INTO fz_s1 (k, v, f, big, sw_write_time) SELECT g %% 5, g::text, g, g, %s " \
                  "FROM generate_series(1, %d) g;\n" % (self.ts_arg(), r.choice([1, 10, 500]))
        return "process", pre + "SELECT streamwm.process(%s)" % ", ".join(args)

    def g_ddl(self):
        """The stream's owner changing its table or trigger, then using it."""
        r = self.r
        ddl = r.choice([
            "ALTER TABLE fz_s1 DROP COLUMN sw_partition",
            "ALTER TABLE fz_s1 DROP COLUMN sw_write_time",
            "ALTER TABLE fz_s1 ALTER COLUMN sw_offset TYPE text",
            "ALTER TABLE fz_s1 ALTER COLUMN sw_partition TYPE numeric",
            "ALTER TABLE fz_s1 ALTER COLUMN sw_partition TYPE int2",
            "ALTER TABLE fz_s1 ALTER COLUMN sw_event_time TYPE timestamp",
            "ALTER TABLE fz_s1 ALTER COLUMN sw_write_time TYPE text",
            "ALTER TABLE fz_s1 ALTER COLUMN sw_write_time DROP NOT NULL",
            "ALTER TABLE fz_s1 RENAME COLUMN sw_offset TO o",
            "ALTER TABLE fz_s1 DROP COLUMN k",
            "ALTER TABLE fz_s1 DROP COLUMN f",
            "ALTER TABLE fz_s1 ADD COLUMN sw_extra int",
            "ALTER TABLE fz_s2 DROP COLUMN big",
            "ALTER TABLE fz_s2 ALTER COLUMN k TYPE text",
            "ALTER TABLE fz_s1 RENAME TO fz_renamed",
            "DROP TRIGGER sw_ingest ON fz_s1",
            "ALTER TABLE fz_s1 DISABLE TRIGGER ALL",
            "TRUNCATE fz_s1 RESTART IDENTITY",
            "ALTER SEQUENCE fz_s1_sw_offset_seq RESTART WITH 1",
            "ALTER SEQUENCE fz_s1_sw_offset_seq AS int",
            "CREATE FUNCTION pg_temp.fz_t() RETURNS trigger LANGUAGE plpgsql AS "
            "$$BEGIN NEW.sw_partition := %s; NEW.sw_offset := %s; RETURN NEW; END$$;\n"
            "CREATE TRIGGER zz BEFORE INSERT ON fz_s1 FOR EACH ROW EXECUTE FUNCTION pg_temp.fz_t()"
            % (r.choice(["99", "-1", "2147483647", "NEW.sw_partition"]),
               r.choice(["NEW.sw_offset", "-5", "9223372036854775807", "NULL"])),
            "CREATE RULE \"_RETURN\" AS ON SELECT TO fz_plain DO INSTEAD SELECT * FROM fz_s1",
            "UPDATE streamwm.stream_def SET partitions = %s WHERE stream = 'fz_s1'::regclass"
            % r.choice(["1", "4096", "2"]),
            "DELETE FROM streamwm.partition_state WHERE stream = 'fz_s1'::regclass AND partition = 2",
            "UPDATE streamwm.partition_state SET processed_offset = %s WHERE stream = 'fz_s1'::regclass"
            % r.choice(["-1", "9223372036854775807", "NULL"]),
            "UPDATE streamwm.query_def SET hop = %s, size = %s WHERE name = 'fz_q1'"
            % (self.interval_arg(), self.interval_arg()),
            "UPDATE streamwm.query_def SET query = %s WHERE name = 'fz_q1'" % self.text_arg(QUERIES),
            "UPDATE streamwm.query_def SET result_table = 'fz_s1'::regclass WHERE name = 'fz_q1'",
            "UPDATE streamwm.stream_def SET watermark = %s WHERE stream = 'fz_s1'::regclass"
            % self.ts_arg(),
        ])
        use = r.choice([
            "SELECT streamwm.ingest('fz_s1', '[{\"k\": 1, \"v\": \"a\"}, {\"k\": 2}]')",
            "SELECT streamwm.ingest_lines('fz_s1', E'{\"k\": 1}\\n{}')",
            "INSERT INTO fz_s1 (k, f) VALUES (1, 2), (3, 4)",
            "INSERT INTO fz_s1 (k, sw_partition, sw_write_time) VALUES (1, 1, '2024-01-01 00:00:30+00')",
            "SELECT streamwm.ingest('fz_s2', '{\"k\": 1, \"big\": 1704067200}')",
        ])
        return "ddl", "%s;\n%s;\n%s;\nSELECT streamwm.process(now => %s);\n" \
            "SELECT count(*) FROM streamwm.streams; SELECT count(*) FROM streamwm.partitions;\n" \
            "SELECT count(*) FROM streamwm.queries" % (
                ddl, use, use, r.choice(["'2024-01-01 00:10:00+00'", "'infinity'", "NULL"]))

    def g_window_start(self):
        return "window_start", "SELECT streamwm.window_start(%s, %s)" % (self.ts_arg(),
                                                                          self.interval_arg())

    def g_drop_stream(self):
        return "drop_stream", "SELECT streamwm.drop_stream(%s, %s)" % (self.stream_arg(),
                                                                        self.bool_arg())

    def g_drop_query(self):
        return "drop_query", "SELECT streamwm.drop_query(%s, %s)" % (
            self.text_arg(["fz_q1", "fz_q2", "nosuch", "FZ_Q1", "\"fz_q1\""]), self.bool_arg())

    def g_query_columns(self):
        return "_query_columns", "SELECT * FROM streamwm_internal._query_columns(%s, %s)" % (
            self.stream_arg(), self.text_arg(QUERIES))

    def g_window_sql(self):
        return "_window_sql", "SELECT streamwm_internal._window_sql(%s, %s, %s, %s)" % (
            self.stream_arg(), self.text_arg(QUERIES), self.interval_arg(), self.interval_arg())

    def g_reads_stream(self):
        return "_reads_stream", "SELECT streamwm_internal._reads_stream(%s, %s)" % (
            self.text_arg(QUERIES), self.stream_arg())

    def g_check_expression(self):
        return "_check_expression", "SELECT streamwm_internal._check_expression(%s, %s, %s)" % (
            self.stream_arg(), self.text_arg(EXPRESSIONS), self.bool_arg())

    def g_check_query(self):
        return "_check_query", "SELECT streamwm_internal._check_query(%s)" % self.text_arg(
            ["fz_q1", "fz_q2", "nosuch", ""])


class RawJSON:
    """JSON text to be emitted as is (numbers JSON can't round-trip, escapes)."""

    def __init__(self, text):
        self.text = text


def dump_json(v):
    if isinstance(v, RawJSON):
        return v.text
    if isinstance(v, list):
        return "[" + ",".join(dump_json(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(dump_json(k) + ":" + dump_json(x) for k, x in v.items()) + "}"
    if isinstance(v, float) and v == 0 and str(v).startswith("-"):
        return "-0.0"
    return json.dumps(v, ensure_ascii=False)


# ---------------------------------------------------------------------
# Generic generation from a function's signature
# ---------------------------------------------------------------------

# the schema of each function (internal helpers live in streamwm_internal)
SCHEMA_OF = {}


def generic_call(gen, fname, argtypes, argnames):
    vals = []
    for t in argtypes:
        if t in ("text", "name", "character varying"):
            pool = {"query": QUERIES, "expr": EXPRESSIONS, "name": STREAMS + ["fz_q1"],
                    "what": ["hop"], "columns": COLUMN_LISTS}
            vals.append(gen.text_arg(pool.get(argnames[len(vals)] if len(vals) < len(argnames)
                                              else "", None) or HOSTILE_TEXT))
        elif t == "interval":
            vals.append(gen.interval_arg())
        elif t in ("timestamp with time zone", "timestamp without time zone"):
            vals.append(gen.ts_arg())
        elif t in ("integer", "smallint"):
            vals.append(gen.int_arg())
        elif t == "bigint":
            vals.append(gen.int_arg(BIGINTS))
        elif t == "boolean":
            vals.append(gen.bool_arg())
        elif t == "regclass":
            vals.append(gen.stream_arg())
        elif t in ("jsonb", "json"):
            vals.append(sql_literal(gen.json_document()) + "::" + t)
        elif t == "regrole":
            vals.append(gen.r.choice(["'postgres'::regrole", "0::regrole", "NULL"]))
        else:
            vals.append("NULL::" + t)
    schema = SCHEMA_OF.get(fname, "streamwm")
    return "SELECT * FROM %s.%s(%s)" % (schema, quote_ident(fname), ", ".join(vals))


def quote_ident(s):
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", s):
        return s
    return "\"" + s.replace("\"", "\"\"") + "\""


# ---------------------------------------------------------------------
# Talking to the server
# ---------------------------------------------------------------------

FIXTURE = r"""
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS streamwm;
CREATE TYPE fz_comp AS (a int, b text);
SELECT streamwm.create_stream('fz_s1',
  'k int, v text, n numeric, ts timestamptz, j jsonb, js json, arr int[], tarr text[],
   b bool, f float8, c fz_comp, d date, big bigint, by bytea, iv interval, p point,
   nm name, ov oidvector, mtx int[][]',
  partitions => 4, watermark_delay => '1 second', retention => '1 hour');
SELECT streamwm.create_stream('fz_s2', 'k int, v text, big bigint',
  partitions => 3, event_time => 'to_timestamp(big)', partition_key => 'k');
SELECT streamwm.create_stream('"流ストリーム"', '"名前" text, "😀" int',
  event_time => 'sw_write_time - interval ''1 second''', partition_key => '"名前"');
CREATE TABLE fz_plain (k int);
CREATE VIEW fz_view AS SELECT 1 AS k;
SELECT streamwm.create_query('fz_q1', 'SELECT k, count(*) AS n, sum(f) AS s FROM fz_s1 GROUP BY k',
  hop => '1 second', size => '5 seconds');
SELECT streamwm.create_query('fz_q2', 'SELECT array_agg(v ORDER BY v) AS r FROM fz_s1',
  hop => '10 seconds', size => '10 seconds', result_table => 'fz_r1', start_from => 'earliest');
SELECT streamwm.create_query('fz_q3', 'SELECT k, count(*) AS n FROM fz_s2 GROUP BY k',
  hop => '1 minute', size => '1 hour');
INSERT INTO fz_s1 (k, v, f, big, sw_write_time)
  SELECT g % 5, g::text, g, g, '2024-01-01'::timestamptz + g * interval '1 second'
  FROM generate_series(1, 20) g;
SELECT streamwm.process(now => '2024-01-01 00:01:00+00');
"""

CRASH_PATTERNS = [
    "server closed the connection unexpectedly",
    "terminating connection because of crash of another server process",
    "connection to server was lost",
    "no connection to the server",
]
LEAK_PATTERN = re.compile(r"WARNING:.*(leak|not closed|was not released|still referenced)", re.I)
LOG_PATTERNS = re.compile(
    r"(ERROR: AddressSanitizer|runtime error:|==\d+== (Invalid|Conditional jump|Use of uninitialised|"
    r"Syscall param|Mismatched free|Source and destination overlap|Argument .* of function)|"
    r"terminated by signal|TRAP:|was terminated by exception|exited with exit code [1-9]|"
    r"all server processes terminated)")


class Server:
    def __init__(self, args):
        self.psql = os.path.join(args.pg_bin, "psql") if args.pg_bin else "psql"
        self.db = args.dbname
        self.env = dict(os.environ, PGCLIENTENCODING="UTF8", PGAPPNAME="streamwm_fuzz")
        self.timeout = args.statement_timeout
        self.watch = None

    def run(self, sql, db=None, timeout=None, binary=False):
        """Run an SQL script (str or bytes) with psql; returns (rc, output)."""
        with tempfile.NamedTemporaryFile("wb", suffix=".sql", delete=False) as f:
            f.write(sql if isinstance(sql, bytes) else sql.encode("utf-8", "surrogateescape"))
            path = f.name
        try:
            p = subprocess.run([self.psql, "-X", "-q", "-d", db or self.db, "-f", path],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=self.env, timeout=timeout)
            return p.returncode, p.stdout.decode("utf-8", "replace"), path
        except subprocess.TimeoutExpired:
            return -1, "psql timed out", path

    def value(self, sql, db=None):
        p = subprocess.run([self.psql, "-X", "-q", "-A", "-t", "-d", db or self.db, "-c", sql],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        if p.returncode != 0:
            return None
        return p.stdout.decode().strip()

    def wait_up(self, limit=300):
        t0 = time.time()
        while time.time() - t0 < limit:
            if self.value("SELECT 1", db="postgres") == "1":
                return True
            time.sleep(1)
        return False

    # one session held open for the whole run: a crash of any backend
    # (crash-restart) terminates it, even when the postmaster stays
    def watchdog_open(self):
        self.watch = PQ("dbname=%s application_name=streamwm_fuzz_watchdog" % self.db)
        return self.watchdog_ask("SELECT pg_backend_pid() || ' ' || pg_postmaster_start_time()")

    def watchdog_ask(self, sql):
        if self.watch is None:
            return None
        return self.watch.value(sql)

    def watchdog_close(self):
        if self.watch is not None:
            self.watch.close()
            self.watch = None


class PQ:
    """A libpq connection through ctypes (no Python packages needed)."""

    lib = None

    def __init__(self, conninfo):
        if PQ.lib is None:
            PQ.lib = ctypes.CDLL(ctypes.util.find_library("pq") or "libpq.so.5")
            PQ.lib.PQconnectdb.restype = ctypes.c_void_p
            PQ.lib.PQconnectdb.argtypes = [ctypes.c_char_p]
            PQ.lib.PQexec.restype = ctypes.c_void_p
            PQ.lib.PQexec.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            PQ.lib.PQstatus.argtypes = [ctypes.c_void_p]
            PQ.lib.PQresultStatus.argtypes = [ctypes.c_void_p]
            PQ.lib.PQntuples.argtypes = [ctypes.c_void_p]
            PQ.lib.PQgetvalue.restype = ctypes.c_char_p
            PQ.lib.PQgetvalue.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
            PQ.lib.PQclear.argtypes = [ctypes.c_void_p]
            PQ.lib.PQfinish.argtypes = [ctypes.c_void_p]
            PQ.lib.PQerrorMessage.restype = ctypes.c_char_p
            PQ.lib.PQerrorMessage.argtypes = [ctypes.c_void_p]
        self.conn = PQ.lib.PQconnectdb(conninfo.encode())
        if PQ.lib.PQstatus(self.conn) != 0:
            self.error = PQ.lib.PQerrorMessage(self.conn).decode("utf-8", "replace")
            self.close()

    def execute(self, sql):
        """(ok, first value or error text); ok is None if the connection is gone."""
        if self.conn is None:
            return None, "no connection"
        res = PQ.lib.PQexec(self.conn, sql.encode("utf-8", "surrogateescape"))
        st = PQ.lib.PQresultStatus(res) if res else 7
        val = None
        if st == 2 and PQ.lib.PQntuples(res) > 0:           # PGRES_TUPLES_OK
            val = PQ.lib.PQgetvalue(res, 0, 0).decode("utf-8", "replace")
        if res:
            PQ.lib.PQclear(res)
        if st in (1, 2):                                     # COMMAND_OK, TUPLES_OK
            return True, val
        err = PQ.lib.PQerrorMessage(self.conn).decode("utf-8", "replace")
        if PQ.lib.PQstatus(self.conn) != 0:
            self.close()
            return None, err
        return False, err

    def value(self, sql):
        ok, val = self.execute(sql)
        return val if ok else None

    def close(self):
        if self.conn is not None:
            PQ.lib.PQfinish(self.conn)
            self.conn = None


class LogWatch:
    """New lines matching LOG_PATTERNS in the given files (or directories)."""

    def __init__(self, paths):
        self.paths = paths
        self.offsets = {}
        self.poll()              # skip what is already there

    def files(self):
        for p in self.paths:
            if os.path.isdir(p):
                for n in sorted(os.listdir(p)):
                    yield os.path.join(p, n)
            elif os.path.exists(p):
                yield p

    def poll(self):
        found = []
        for f in self.files():
            try:
                with open(f, "rb") as fh:
                    fh.seek(self.offsets.get(f, 0))
                    data = fh.read()
                    self.offsets[f] = fh.tell()
            except OSError:
                continue
            lines = data.decode("utf-8", "replace").splitlines()
            for i, line in enumerate(lines):
                if LOG_PATTERNS.search(line):
                    found.append("%s: %s" % (os.path.basename(f),
                                             "\n    ".join(lines[i:i + 12])))
        return found


def wrap(sql, timeout):
    return "BEGIN;\nSET LOCAL statement_timeout = '%s';\n%s;\nROLLBACK;\n" % (timeout, sql)


def batch_script(inputs, timeout):
    """The script of a batch, and the line range of each input in it."""
    parts = ["\\set VERBOSITY sqlstate\n\\set SHOW_CONTEXT never\n"
             "SET client_min_messages = warning;\n"]
    line = 4
    ranges = []
    for label, sql in inputs:
        text = wrap(sql, timeout)
        n = text.count("\n")
        ranges.append((line, line + n - 1))
        line += n
        parts.append(text)
    return "".join(parts), ranges


def input_of_line(ranges, lineno):
    for i, (a, b) in enumerate(ranges):
        if a <= lineno <= b:
            return i
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inputs", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="200 inputs, seed 7, small values")
    ap.add_argument("--dbname", default="streamwm_fuzz")
    ap.add_argument("--pg-bin", default=os.environ.get("PG_BIN", ""))
    ap.add_argument("--statement-timeout", default="10s")
    ap.add_argument("--watch-log", action="append", default=[],
                    help="server log, sanitizer or valgrind log file or directory")
    ap.add_argument("--findings", default="fuzz_findings.txt")
    ap.add_argument("--strict", action="store_true", help="internal errors (XX000) fail too")
    ap.add_argument("--big", action="store_true", help="also multi-megabyte values")
    ap.add_argument("--no-ddl", action="store_true",
                    help="no ALTER/DROP of the fixture's tables, triggers and catalog rows")
    ap.add_argument("--soak", type=float, default=0, help="seconds of committed fuzzed ingest")
    args = ap.parse_args()
    if args.smoke:
        args.inputs, args.seed, args.batch = 200, 7, 50

    srv = Server(args)
    if not srv.wait_up(60):
        print("fuzz: cannot connect to the server")
        return 1
    srv.value("DROP DATABASE IF EXISTS %s WITH (FORCE)" % args.dbname, db="postgres")
    srv.value("CREATE DATABASE %s" % args.dbname, db="postgres")
    rc, out, _ = srv.run("\\set ON_ERROR_STOP 1\n" + FIXTURE)
    if rc != 0:
        print("fuzz: fixture failed:\n" + out)
        return 1
    start = srv.watchdog_open()
    if start is None:
        print("fuzz: watchdog session failed")
        return 1
    postmaster_start = start.split(" ", 1)[1]
    logs = LogWatch(args.watch_log)

    if args.soak:
        return soak(args, srv, logs)

    rnd = random.Random(args.seed)
    gen = Gen(rnd, args.big)
    funcs = srv.value("SELECT string_agg(p.proname || '|' || coalesce(array_to_string("
                      "ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) t), ','), '')"
                      " || '|' || coalesce(array_to_string(p.proargnames, ','), '')"
                      " || '|' || p.pronamespace::regnamespace::text, E'\\n')"
                      " FROM pg_proc p WHERE p.pronamespace IN ('streamwm'::regnamespace,"
                      " 'streamwm_internal'::regnamespace)")
    signatures = {}
    for line in (funcs or "").splitlines():
        name, types, names, schema = line.split("|")
        SCHEMA_OF[name] = schema
        signatures[name] = ([t for t in types.split(",") if t], names.split(",") if names else [])

    specific = {
        "ingest": (gen.g_ingest, 20), "ingest_lines": (gen.g_ingest_lines, 14),
        "_stream_insert": (gen.g_insert, 6), "create_stream": (gen.g_create_stream, 8),
        "create_query": (gen.g_create_query, 10), "process": (gen.g_process, 5),
        "window_start": (gen.g_window_start, 3), "drop_stream": (gen.g_drop_stream, 2),
        "drop_query": (gen.g_drop_query, 2), "_query_columns": (gen.g_query_columns, 4),
        "_window_sql": (gen.g_window_sql, 4), "_reads_stream": (gen.g_reads_stream, 2),
        "_check_expression": (gen.g_check_expression, 4), "_check_query": (gen.g_check_query, 1),
    }
    if not args.no_ddl:
        specific["ddl"] = (gen.g_ddl, 8)
    choices = []
    for name, (fn, w) in specific.items():
        choices += [(name, fn)] * w
    for name, (types, names) in sorted(signatures.items()):
        # every function, also by its signature alone (helpers, trigger
        # functions called directly, functions added later)
        choices += [(name, lambda n=name, t=types, a=names: (n, generic_call(gen, n, t, a)))] * 2

    counts, succeeded, errors, internal, findings = {}, {}, {}, [], []
    first_round = sorted(signatures)
    crashed_batches = 0
    done = 0
    t0 = time.time()
    while done < args.inputs:
        n = min(args.batch, args.inputs - done)
        inputs = []
        for _ in range(n):
            while True:
                if first_round:
                    # every function once first, whatever the number of inputs
                    name = first_round.pop(0)
                    fn = dict(choices)[name]
                else:
                    name, fn = rnd.choice(choices)
                inp = fn()
                if len(inp[1]) <= (64 if args.big else 4) * 1024 * 1024:
                    break
            inputs.append(inp)
        script, ranges = batch_script(inputs, args.statement_timeout)
        rc, out, path = srv.run(script, timeout=3600)
        for label, _ in inputs:
            counts[label] = counts.get(label, 0) + 1
        crash = rc == 2 or rc == -1 or any(p in out for p in CRASH_PATTERNS)
        failed_inputs = set()
        for m in re.finditer(r"psql:[^:]*:(\d+): ERROR:  (\w{5})", out):
            errors[m.group(2)] = errors.get(m.group(2), 0) + 1
            failed_inputs.add(input_of_line(ranges, int(m.group(1))))
            if m.group(2).startswith("XX"):
                i = input_of_line(ranges, int(m.group(1)))
                internal.append((m.group(2), inputs[i] if i is not None else None))
        for i, (label, _) in enumerate(inputs):
            if i not in failed_inputs:
                succeeded[label] = succeeded.get(label, 0) + 1
        leaks = [l for l in out.splitlines() if LEAK_PATTERN.search(l)]
        for l in leaks:
            m = re.match(r"psql:[^:]*:(\d+):", l)
            i = input_of_line(ranges, int(m.group(1))) if m else None
            findings.append(("leak warning", l, inputs[i] if i is not None else None))
        alive = srv.watchdog_ask("SELECT pg_postmaster_start_time()")
        if alive is None or alive.strip() != postmaster_start:
            crash = True
        new_log = logs.poll()
        if crash or new_log:
            crashed_batches += 1 if crash else 0
            culprits = bisect(srv, inputs, args, logs) if (crash or new_log) else []
            for c in new_log:
                findings.append(("log", c, None))
            for why, inp in culprits:
                findings.append((why, "", inp))
            if not culprits:
                findings.append(("crash" if crash else "log report",
                                 "batch at input %d; not reproduced input by input" % done,
                                 None))
            if not srv.wait_up():
                print("fuzz: the server did not come back")
                break
            srv.watchdog_close()
            start = srv.watchdog_open()
            postmaster_start = start.split(" ", 1)[1] if start else postmaster_start
        else:
            os.unlink(path)
        done += n
        if not args.smoke and done % (args.batch * 20) == 0:
            print("fuzz: %d inputs, %.0f s, %d findings" % (done, time.time() - t0, len(findings)),
                  flush=True)

    srv.watchdog_close()
    elapsed = time.time() - t0
    print("fuzz: seed %d, %d inputs in %.1f s, %d batches crashed" % (args.seed, done, elapsed,
                                                                       crashed_batches))
    print("inputs per function (and how many ran without an error):")
    notes = {"_stream_insert": "  (also INSERTs through the trigger)",
             "ddl": "  (ALTER/DROP of the fixture, then ingest and process)"}
    for name in sorted(set(list(counts) + list(signatures))):
        print("  %-20s %6d %6d ok%s" % (name, counts.get(name, 0), succeeded.get(name, 0),
                                        notes.get(name, "")))
    missing = [n for n in signatures if counts.get(n, 0) == 0]
    print("errors by SQLSTATE: " + ", ".join("%s %d" % kv for kv in sorted(errors.items())))
    if internal:
        print("internal errors (XX...): %d" % len(internal))
        seen = set()
        for code, inp in internal:
            key = inp[1][:300] if inp else ""
            if key in seen:
                continue
            seen.add(key)
            print("  %s %s: %s" % (code, inp[0] if inp else "?", key.replace("\n", " ")))
    with open(args.findings, "w") as f:
        for why, what, inp in findings:
            f.write("== %s\n%s\n%s\n\n" % (why, what, (inp[0] + ": " + inp[1]) if inp else ""))
    for why, what, inp in findings:
        print("FINDING %s: %s %s" % (why, what[:2000],
                                     ("\n  input (%s): %s" % (inp[0], inp[1][:2000])) if inp else ""))
    failed = bool(findings) or bool(missing) or (args.strict and internal)
    if missing:
        print("functions never called: " + ", ".join(missing))
    print("fuzz: %s (%d findings, written to %s)" % ("FAILED" if failed else "ok", len(findings),
                                                    args.findings))
    return 1 if failed else 0


def bisect(srv, inputs, args, logs):
    """Re-run a failing batch's inputs one per connection; the ones that crash."""
    culprits = []
    for label, sql in inputs:
        if not srv.wait_up():
            break
        before = srv.value("SELECT pg_postmaster_start_time()")
        rc, out, path = srv.run("SET client_min_messages = warning;\n" + wrap(sql, args.statement_timeout),
                                timeout=3600)
        os.unlink(path)
        time.sleep(0.2)
        new_log = logs.poll()
        crashed = rc == 2 or any(p in out for p in CRASH_PATTERNS)
        if not crashed and srv.wait_up() and srv.value("SELECT pg_postmaster_start_time()") != before:
            crashed = True
        if crashed or new_log:
            culprits.append(("crash" if crashed else "log report: " + " | ".join(new_log)[:4000],
                             (label, sql)))
    return culprits


def soak(args, srv, logs):
    """Committed fuzzed ingests for args.soak seconds; memory samples of the
    worker and of the ingesting session."""
    rnd = random.Random(args.seed)
    gen = Gen(rnd, False)
    sess = PQ("dbname=%s application_name=streamwm_fuzz_soak" % srv.db)
    sess.execute("SET client_min_messages = error")
    sess.execute("SET statement_timeout = '%s'" % args.statement_timeout)
    sess_pid = sess.value("SELECT pg_backend_pid()")
    worker = srv.value("SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamwm worker'"
                       " AND datname = current_database()")
    t0 = time.time()
    samples = []
    sent = 0
    rounds = 0
    while time.time() - t0 < args.soak:
        buf = []
        for _ in range(50):
            # well-formed rows most of the time (so the worker has work),
            # hostile ones in between; each its own transaction
            if rnd.random() < 0.7:
                rows = [{"k": rnd.randint(0, 9), "v": rnd.choice(["a", "名前", ""]),
                         "f": rnd.random(), "big": rnd.randint(0, 10 ** 6),
                         "j": gen.json_value(), "tarr": ["x", "y"]} for _ in range(rnd.randint(1, 20))]
                doc = dump_json(rows)
            else:
                doc = gen.json_document()
            if rnd.random() < 0.5:
                buf.append("SELECT streamwm.ingest('fz_s1', %s);" % sql_literal(doc))
            else:
                buf.append("SELECT streamwm.ingest_lines('fz_s1', %s);" % sql_literal(
                    "\r\n".join(dump_json(gen.json_object()) for _ in range(rnd.randint(1, 10)))))
            sent += 1
        for stmt in buf:
            ok, _ = sess.execute(stmt)
            if ok is None:
                print("soak: the session died")
                return 1
        rounds += 1
        if rounds % 10 == 0:
            samples.append((time.time() - t0, rss(worker), rss(sess_pid),
                            srv.value("SELECT events FROM streamwm.streams WHERE stream = 'fz_s1'::regclass")))
            print("soak: t=%4.0fs inputs=%6d worker RssAnon=%s kB session RssAnon=%s kB events=%s"
                  % (samples[-1][0], sent, samples[-1][1], samples[-1][2], samples[-1][3]), flush=True)
    sess.close()
    new_log = logs.poll()
    alive = srv.watchdog_ask("SELECT pg_postmaster_start_time()")
    ok = alive is not None and not new_log
    for l in new_log:
        print("FINDING log: " + l)
    third = len(samples) // 3
    warm = samples[third:]
    half = len(warm) // 2
    for idx, what in ((1, "worker"), (2, "session")):
        a = max((s[idx] for s in warm[:half]), default=0)
        b = max((s[idx] for s in warm[half:]), default=0)
        flat = b <= a * 1.10 + 1024
        print("soak: %s RssAnon %d kB then %d kB: %s" % (what, a, b, "flat" if flat else "GROWS"))
        ok = ok and flat
    print("soak: %d fuzzed ingests in %.0f s: %s" % (sent, time.time() - t0, "ok" if ok else "FAILED"))
    return 0 if ok else 1


def rss(pid):
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except (OSError, TypeError):
        pass
    return -1


if __name__ == "__main__":
    sys.exit(main())

/*-------------------------------------------------------------------------
 * offer.c
 *	  One client of bench/e2e.sh: offers a fixed rate of rows to a table,
 *	  paced by the wall clock, in one COPY (one transaction) per tick.
 *
 * It reads COPY text lines on stdin (bench/nexmark/gen.c's bids), keeps
 * every M-th one starting at the K-th (two clients reading the same
 * generator output with -m 2 -k 0 and -m 2 -k 1 send disjoint halves of one
 * Nexmark sequence), drops each line's last column (gen's synthetic event
 * time: the stream's write time takes its place), and every TICK_MS sends
 * the rows due by then: rate * (now - start), minus those already sent, at
 * most one second's worth at once (a client that fell behind does not send
 * an ever larger batch).  It stops after SECONDS and prints
 *	   rows seconds batches late_ticks max_batch_ms
 * (late_ticks: ticks that began more than one TICK_MS after their time,
 * i.e. the server did not take the offered rate).  SIGTERM ends it at its
 * next tick (bench/e2e.sh cuts a step short so).
 *
 * Usage: offer -t TABLE -c COLUMNS -r ROWS_PER_S -T SECONDS [-i TICK_MS]
 *				[-k K -m M] [-S START_EPOCH_MS]   (libpq's PG* environment)
 *
 * Build: cc -O2 -o offer offer.c -I$(pg_config --includedir) -lpq
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <libpq-fe.h>

static volatile sig_atomic_t stop_now = 0;

static void
on_term(int sig)
{
	stop_now = 1;
}

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
sleep_until(int64_t t_us)
{
	int64_t		d = t_us - now_us();

	if (d > 0)
	{
		struct timespec ts = {d / 1000000, (d % 1000000) * 1000};

		nanosleep(&ts, NULL);
	}
}

int
main(int argc, char **argv)
{
	const char *table = "bids",
			   *columns = "auction, bidder, price";
	double		rate = 10000,
				seconds = 10;
	int			tick_ms = 100,
				k = 0,
				m = 1,
				opt;
	int64_t		start_ms = 0;
	PGconn	   *conn;
	PGresult   *res;
	char	   *sql,
			   *buf,
			   *line = NULL;
	size_t		line_cap = 0,
				buf_cap;
	int64_t		sent = 0,
				lineno = 0,
				batches = 0,
				late_ticks = 0,
				max_batch_us = 0,
				t0,
				tick;

	while ((opt = getopt(argc, argv, "t:c:r:T:i:k:m:S:")) != -1)
	{
		switch (opt)
		{
			case 't': table = optarg; break;
			case 'c': columns = optarg; break;
			case 'r': rate = atof(optarg); break;
			case 'T': seconds = atof(optarg); break;
			case 'i': tick_ms = atoi(optarg); break;
			case 'k': k = atoi(optarg); break;
			case 'm': m = atoi(optarg); break;
			case 'S': start_ms = atoll(optarg); break;
			default:
				fprintf(stderr, "usage: offer -t TABLE -c COLUMNS -r ROWS_PER_S -T SECONDS [-i TICK_MS] [-k K -m M] [-S START_EPOCH_MS]\n");
				return 2;
		}
	}
	conn = PQconnectdb("");
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "offer: %s", PQerrorMessage(conn));
		return 1;
	}
	sql = malloc(strlen(table) + strlen(columns) + 64);
	sprintf(sql, "COPY %s (%s) FROM STDIN", table, columns);
	buf_cap = (size_t) (rate + 1) * 64;
	buf = malloc(buf_cap);

	signal(SIGTERM, on_term);
	t0 = start_ms > 0 ? start_ms * 1000 : now_us();
	sleep_until(t0);
	for (tick = 1;; tick++)
	{
		int64_t		tick_at = t0 + tick * (int64_t) tick_ms * 1000,
					now,
					due,
					n,
					len = 0,
					b0;
		int			done;

		sleep_until(tick_at);
		now = now_us();
		if (now - tick_at > (int64_t) tick_ms * 1000)
			late_ticks++;
		done = (now - t0) >= (int64_t) (seconds * 1e6) || stop_now;
		if (done && !stop_now)
			now = t0 + (int64_t) (seconds * 1e6);
		due = (int64_t) (rate * (now - t0) / 1e6);
		n = due - sent;
		if (n > (int64_t) rate)
			n = (int64_t) rate;
		/* the next n lines of our share, without their last column */
		while (n > 0)
		{
			ssize_t		l = getline(&line, &line_cap, stdin);
			char	   *tab;

			if (l < 0)
			{
				fprintf(stderr, "offer: the generator ran out of rows\n");
				done = 1;
				break;
			}
			if (lineno++ % m != k)
				continue;
			tab = strrchr(line, '\t');
			if (tab)
				l = tab - line;
			else if (l > 0 && line[l - 1] == '\n')
				l--;
			memcpy(buf + len, line, l);
			len += l;
			buf[len++] = '\n';
			n--;
			sent++;
		}
		if (len > 0)
		{
			b0 = now_us();
			res = PQexec(conn, sql);
			if (PQresultStatus(res) != PGRES_COPY_IN)
			{
				fprintf(stderr, "offer: %s", PQerrorMessage(conn));
				return 1;
			}
			PQclear(res);
			if (PQputCopyData(conn, buf, (int) len) != 1 || PQputCopyEnd(conn, NULL) != 1)
			{
				fprintf(stderr, "offer: %s", PQerrorMessage(conn));
				return 1;
			}
			while ((res = PQgetResult(conn)) != NULL)
			{
				if (PQresultStatus(res) != PGRES_COMMAND_OK)
				{
					fprintf(stderr, "offer: %s", PQerrorMessage(conn));
					return 1;
				}
				PQclear(res);
			}
			batches++;
			if (now_us() - b0 > max_batch_us)
				max_batch_us = now_us() - b0;
		}
		if (done)
			break;
	}
	printf("%lld %.3f %lld %lld %.1f\n", (long long) sent,
		   (now_us() - t0) / 1e6, (long long) batches, (long long) late_ticks,
		   max_batch_us / 1000.0);
	PQfinish(conn);
	return 0;
}

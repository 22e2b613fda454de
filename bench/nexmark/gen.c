/*-------------------------------------------------------------------------
 * gen.c
 *	  A Nexmark event generator of our own: writes one table's rows (bids,
 *	  persons or auctions) as COPY text (tab-separated, one row a line) on
 *	  stdout, so that `gen ... | psql -c "COPY t FROM STDIN"` loads it at
 *	  full speed.
 *
 * It follows the Nexmark definition (the Beam/Flink NexmarkGenerator and
 * GeneratorConfig):
 *	 - event n (0, 1, 2, ...) is a person, an auction or a bid in the fixed
 *	   1:3:46 proportion: n % 50 == 0 a person, 1..3 an auction, 4..49 a bid;
 *	 - ids: person and auction ids count up from 1000 as those events occur;
 *	 - a bid goes with probability 1/2 (hot_auction_ratio 2) to the hot
 *	   auction, the newest auction rounded down to a multiple of 2, else to
 *	   a random one of the 100 auctions in flight (+10 ahead); it comes with
 *	   probability 3/4 (hot_bidders_ratio 4) from a hot bidder, the newest
 *	   person rounded down to a multiple of 4 (+1), else from a random one
 *	   of the 1000 active people (+10 ahead);
 *	 - prices: round(10^(6u) * 100) for u uniform in [0, 1) (cents);
 *	 - event time of event n: base + n / rate seconds (rate = events per
 *	   second of event time, all three kinds counted).
 * So at any moment about half of all bids are on one hot auction, which
 * moves on as new auctions are created (every 2 auctions, as in Nexmark).
 *
 * Bounded out-of-orderness (-d MS): event n is emitted at t_n + d_n, with
 * d_n uniform in [0, MS] ms; rows are written in that order, each keeping
 * its event time t_n.  Any row written after event m has t >= t_m - MS, so
 * a watermark_delay of MS makes no row late.
 *
 * Deterministic: every draw of event n comes from a generator seeded by
 * (seed, n), so the same arguments give the same bytes, and a bid is the
 * same bid whichever table or count is asked for.
 *
 * Columns (event_time last, as "YYYY-MM-DD HH:MM:SS.ffffff+00"):
 *	 bids      auction, bidder, price, event_time
 *	 persons   id, name, city, state, event_time
 *	 auctions  id, seller, category, initial_bid, reserve, expires, event_time
 *
 * Usage: gen [-t bids|persons|auctions] [-n ROWS] [-r EVENTS_PER_S]
 *			  [-d MAX_DELAY_MS] [-s SEED] [-b BASE_EPOCH_SECONDS]
 *	 defaults: bids, 1000000 rows, 10000 events/s, 0 ms, seed 42,
 *			   base 2024-01-01 00:00:00+00
 *
 * Build: cc -O2 -o gen gen.c -lm
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOTAL_PROPORTION	50
#define PERSON_PROPORTION	1
#define AUCTION_PROPORTION	3
#define FIRST_PERSON_ID		1000
#define FIRST_AUCTION_ID	1000
#define FIRST_CATEGORY_ID	10
#define NUM_CATEGORIES		5
#define HOT_AUCTION_RATIO	2
#define HOT_BIDDERS_RATIO	4
#define HOT_SELLERS_RATIO	4
#define IN_FLIGHT_AUCTIONS	100
#define ACTIVE_PEOPLE		1000
#define AUCTION_ID_LEAD		10
#define PERSON_ID_LEAD		10

enum kind { PERSON, AUCTION, BID };

/* one event waiting in the reorder heap */
typedef struct Pending
{
	int64_t		emit_us;		/* t + delay: when it is written */
	int64_t		n;				/* event number (ties: in order) */
} Pending;

static Pending *heap;
static size_t heap_len, heap_cap;

static char outbuf[1 << 20];
static size_t outlen;

static int64_t base_us;
static double rate;
static uint64_t seed = 42;
static enum kind want = BID;

static const char *first_names[] = {"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"};
static const char *last_names[] = {"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"};
static const char *cities[] = {"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"};
static const char *states[] = {"AZ", "CA", "ID", "OR", "WA", "WY"};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static void
flush_out(void)
{
	size_t		off = 0;

	while (off < outlen)
	{
		ssize_t		w = write(1, outbuf + off, outlen - off);

		if (w <= 0)
		{
			perror("gen: write");
			exit(1);
		}
		off += (size_t) w;
	}
	outlen = 0;
}

static inline void
put_str(const char *s)
{
	size_t		l = strlen(s);

	memcpy(outbuf + outlen, s, l);
	outlen += l;
}

static inline void
put_i64(int64_t v)
{
	char		tmp[24];
	int			i = 0;
	uint64_t	u;

	if (v < 0)
	{
		outbuf[outlen++] = '-';
		u = (uint64_t) (-(v + 1)) + 1;
	}
	else
		u = (uint64_t) v;
	do
	{
		tmp[i++] = (char) ('0' + u % 10);
		u /= 10;
	} while (u);
	while (i)
		outbuf[outlen++] = tmp[--i];
}

/* "YYYY-MM-DD HH:MM:SS" of the last second formatted, cached */
static int64_t cached_sec = INT64_MIN;
static char cached_ts[32];

static void
put_ts(int64_t us)
{
	int64_t		sec = us >= 0 ? us / 1000000 : -((-us + 999999) / 1000000);
	int64_t		frac = us - sec * 1000000;
	char	   *p;
	int			i;

	if (sec != cached_sec)
	{
		time_t		t = (time_t) sec;
		struct tm	tm;

		gmtime_r(&t, &tm);
		strftime(cached_ts, sizeof(cached_ts), "%Y-%m-%d %H:%M:%S", &tm);
		cached_sec = sec;
	}
	put_str(cached_ts);
	p = outbuf + outlen;
	p[0] = '.';
	for (i = 6; i >= 1; i--)
	{
		p[i] = (char) ('0' + frac % 10);
		frac /= 10;
	}
	memcpy(p + 7, "+00", 3);
	outlen += 10;
}

/* splitmix64: the per-event random stream */
static inline uint64_t
next_rand(uint64_t *s)
{
	uint64_t	z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static inline uint64_t
rand_below(uint64_t *s, uint64_t n)
{
	return n ? next_rand(s) % n : 0;
}

static inline double
rand_unit(uint64_t *s)
{
	return (next_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

static inline uint64_t
event_rng(int64_t n)
{
	uint64_t	s = seed ^ ((uint64_t) n * 0xD1B54A32D192ED03ULL);

	next_rand(&s);
	return s;
}

static inline enum kind
kind_of(int64_t n)
{
	int64_t		off = n % TOTAL_PROPORTION;

	return off < PERSON_PROPORTION ? PERSON :
		off < PERSON_PROPORTION + AUCTION_PROPORTION ? AUCTION : BID;
}

static inline int64_t
event_time_us(int64_t n)
{
	return base_us + (int64_t) ((double) n * 1e6 / rate);
}

/* Nexmark's lastBase0PersonId: the newest person at event n */
static inline int64_t
last_person(int64_t n)
{
	int64_t		epoch = n / TOTAL_PROPORTION,
				off = n % TOTAL_PROPORTION;

	if (off >= PERSON_PROPORTION)
		off = PERSON_PROPORTION - 1;
	return epoch * PERSON_PROPORTION + off;
}

/* Nexmark's lastBase0AuctionId: the newest auction at event n */
static inline int64_t
last_auction(int64_t n)
{
	int64_t		epoch = n / TOTAL_PROPORTION,
				off = n % TOTAL_PROPORTION;

	if (off < PERSON_PROPORTION)
	{
		epoch--;
		off = AUCTION_PROPORTION - 1;
	}
	else if (off >= PERSON_PROPORTION + AUCTION_PROPORTION)
		off = AUCTION_PROPORTION - 1;
	else
		off -= PERSON_PROPORTION;
	return epoch * AUCTION_PROPORTION + off;
}

static inline int64_t
some_person(int64_t n, uint64_t *r)
{
	int64_t		people = last_person(n) + 1;
	int64_t		active = people < ACTIVE_PEOPLE ? people : ACTIVE_PEOPLE;

	return people - active + (int64_t) rand_below(r, active + PERSON_ID_LEAD);
}

static inline int64_t
some_auction(int64_t n, uint64_t *r)
{
	int64_t		maxa = last_auction(n);
	int64_t		mina = maxa - IN_FLIGHT_AUCTIONS > 0 ? maxa - IN_FLIGHT_AUCTIONS : 0;

	return mina + (int64_t) rand_below(r, maxa - mina + 1 + AUCTION_ID_LEAD);
}

static inline int64_t
next_price(uint64_t *r)
{
	return (int64_t) llround(pow(10.0, rand_unit(r) * 6.0) * 100.0);
}

/* write the row of event n (of the wanted kind) */
static void
emit(int64_t n)
{
	uint64_t	r = event_rng(n);
	int64_t		t = event_time_us(n);

	next_rand(&r);				/* the first draw is the delay's */
	if (outlen > sizeof(outbuf) - 512)
		flush_out();
	switch (want)
	{
		case BID:
			{
				int64_t		auction,
							bidder;

				if (rand_below(&r, HOT_AUCTION_RATIO) > 0)
					auction = (last_auction(n) / HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO;
				else
					auction = some_auction(n, &r);
				if (rand_below(&r, HOT_BIDDERS_RATIO) > 0)
					bidder = (last_person(n) / HOT_BIDDERS_RATIO) * HOT_BIDDERS_RATIO + 1;
				else
					bidder = some_person(n, &r);
				put_i64(auction + FIRST_AUCTION_ID);
				outbuf[outlen++] = '\t';
				put_i64(bidder + FIRST_PERSON_ID);
				outbuf[outlen++] = '\t';
				put_i64(next_price(&r));
				break;
			}
		case PERSON:
			put_i64(last_person(n) + FIRST_PERSON_ID);
			outbuf[outlen++] = '\t';
			put_str(first_names[rand_below(&r, NELEM(first_names))]);
			outbuf[outlen++] = ' ';
			put_str(last_names[rand_below(&r, NELEM(last_names))]);
			outbuf[outlen++] = '\t';
			put_str(cities[rand_below(&r, NELEM(cities))]);
			outbuf[outlen++] = '\t';
			put_str(states[rand_below(&r, NELEM(states))]);
			break;
		case AUCTION:
			{
				int64_t		seller,
							initial = next_price(&r);

				if (rand_below(&r, HOT_SELLERS_RATIO) > 0)
					seller = (last_person(n) / HOT_SELLERS_RATIO) * HOT_SELLERS_RATIO;
				else
					seller = some_person(n, &r);
				put_i64(last_auction(n) + FIRST_AUCTION_ID);
				outbuf[outlen++] = '\t';
				put_i64(seller + FIRST_PERSON_ID);
				outbuf[outlen++] = '\t';
				put_i64(FIRST_CATEGORY_ID + (int64_t) rand_below(&r, NUM_CATEGORIES));
				outbuf[outlen++] = '\t';
				put_i64(initial);
				outbuf[outlen++] = '\t';
				put_i64(initial + next_price(&r));
				outbuf[outlen++] = '\t';
				/* open for 10 s .. 2 min of event time */
				put_ts(t + 10000000 + (int64_t) rand_below(&r, 110000001));
				break;
			}
	}
	outbuf[outlen++] = '\t';
	put_ts(t);
	outbuf[outlen++] = '\n';
}

static inline int
pending_before(const Pending *a, const Pending *b)
{
	return a->emit_us < b->emit_us || (a->emit_us == b->emit_us && a->n < b->n);
}

static void
heap_push(Pending p)
{
	size_t		i;

	if (heap_len == heap_cap)
	{
		heap_cap = heap_cap ? heap_cap * 2 : 4096;
		heap = realloc(heap, heap_cap * sizeof(Pending));
		if (!heap)
		{
			perror("gen: realloc");
			exit(1);
		}
	}
	i = heap_len++;
	while (i > 0)
	{
		size_t		parent = (i - 1) / 2;

		if (!pending_before(&p, &heap[parent]))
			break;
		heap[i] = heap[parent];
		i = parent;
	}
	heap[i] = p;
}

static Pending
heap_pop(void)
{
	Pending		top = heap[0],
				last = heap[--heap_len];
	size_t		i = 0;

	for (;;)
	{
		size_t		c = 2 * i + 1;

		if (c >= heap_len)
			break;
		if (c + 1 < heap_len && pending_before(&heap[c + 1], &heap[c]))
			c++;
		if (!pending_before(&heap[c], &last))
			break;
		heap[i] = heap[c];
		i = c;
	}
	if (heap_len > 0)
		heap[i] = last;
	return top;
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: gen [-t bids|persons|auctions] [-n ROWS] [-r EVENTS_PER_S] [-d MAX_DELAY_MS]\n"
			"           [-s SEED] [-b BASE_EPOCH_SECONDS]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	int64_t		rows = 1000000,
				max_delay_us = 0,
				written = 0,
				n;
	double		base_s = 1704067200;	/* 2024-01-01 00:00:00+00 */
	int			c;

	rate = 10000;
	while ((c = getopt(argc, argv, "t:n:r:d:s:b:")) != -1)
	{
		switch (c)
		{
			case 't':
				if (strncmp(optarg, "bid", 3) == 0)
					want = BID;
				else if (strncmp(optarg, "person", 6) == 0)
					want = PERSON;
				else if (strncmp(optarg, "auction", 7) == 0)
					want = AUCTION;
				else
					usage();
				break;
			case 'n':
				rows = strtoll(optarg, NULL, 10);
				break;
			case 'r':
				rate = strtod(optarg, NULL);
				break;
			case 'd':
				max_delay_us = (int64_t) (strtod(optarg, NULL) * 1000);
				break;
			case 's':
				seed = strtoull(optarg, NULL, 10);
				break;
			case 'b':
				base_s = strtod(optarg, NULL);
				break;
			default:
				usage();
		}
	}
	if (rows < 0 || rate <= 0 || max_delay_us < 0)
		usage();
	base_us = (int64_t) (base_s * 1e6);

	/*
	 * Walk the events in order; keep the wanted ones in a heap by emit time
	 * and write every one whose emit time is at or before the next event's
	 * time: nothing generated later can be emitted before it.
	 */
	for (n = 0; written < rows; n++)
	{
		int64_t		t = event_time_us(n);

		while (heap_len > 0 && heap[0].emit_us <= t && written < rows)
		{
			emit(heap_pop().n);
			written++;
		}
		if (written >= rows)
			break;
		if (kind_of(n) == want)
		{
			Pending		p;

			p.n = n;
			p.emit_us = t;
			if (max_delay_us > 0)
			{
				uint64_t	r = event_rng(n);

				p.emit_us += (int64_t) rand_below(&r, (uint64_t) max_delay_us + 1);
			}
			heap_push(p);
		}
	}
	flush_out();
	return 0;
}

/*-------------------------------------------------------------------------
 * streamwm.c
 *	  Module entry: _PG_init and the GUCs.
 *
 * Data flows ingest.c (rows into stream tables) -> process.c (one step:
 * read, watermark.c, close windows with query.c, retention), with state in
 * the catalog tables of catalog.c.  See DESIGN.md.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "catalog.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

int			sw_batch_size = 100000;

void
_PG_init(void)
{
	DefineCustomIntVariable("streamwm.batch_size",
							"Rows read from a stream per batch of a processing step.",
							"A step reads in batches of this many rows; a worker tick "
							"reads at most one batch per stream.",
							&sw_batch_size,
							100000, 1, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("streamwm");
}

/*-------------------------------------------------------------------------
 * ingest.h
 *	  Rows into stream tables: the insert trigger and the ingest functions.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_INGEST_H
#define STREAMWM_INGEST_H

#include "nodes/primnodes.h"
#include "utils/relcache.h"

extern Expr *sw_row_expression(Relation rel, const char *exprtext,
							   bool want_timestamptz);

#endif							/* STREAMWM_INGEST_H */

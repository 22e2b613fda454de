/*-------------------------------------------------------------------------
 * query_ddl.h
 *	  Keeping window queries whole under DDL of the relations they read.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_QUERY_DDL_H
#define STREAMWM_QUERY_DDL_H

#include "nodes/nodes.h"

extern void sw_query_ddl_start(Node *parsetree);

#endif							/* STREAMWM_QUERY_DDL_H */

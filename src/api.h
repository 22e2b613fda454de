/*-------------------------------------------------------------------------
 * api.h
 *	  What users see of an error raised inside a public API function
 *	  (api.c).
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_API_H
#define STREAMWM_API_H

#include "fmgr.h"

extern Datum sw_api_guard(PGFunction fn, FunctionCallInfo fcinfo);
extern char *sw_strip_internal_context(const char *context, bool implementation_frame);
extern void sw_source_error_context(void *arg);

#endif							/* STREAMWM_API_H */

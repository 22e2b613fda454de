/*-------------------------------------------------------------------------
 * version.h
 *	  The check that the database's streamwm is the version this library
 *	  was built for (version.c).
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_VERSION_H
#define STREAMWM_VERSION_H

/* the extension version this library's C code is written for (Makefile) */
#ifndef SW_LIBRARY_VERSION
#error "SW_LIBRARY_VERSION must be defined (the Makefile takes it from streamwm.control)"
#endif

extern bool sw_version_ok;

extern bool sw_extension_version_matches(char **installed);
extern void sw_require_extension_version_slow(void);
extern void sw_version_mismatch_error(const char *installed) pg_attribute_noreturn();

/*
 * Fail unless the extension in this database is this library's version.
 * Every C entry point that touches the catalog calls it first; once the
 * answer is cached it is one test of a variable (the insert trigger runs
 * it for every row).
 */
static inline void
sw_require_extension_version(void)
{
	if (likely(sw_version_ok))
		return;
	sw_require_extension_version_slow();
}

#endif							/* STREAMWM_VERSION_H */

/* Helpers shared by the fuzz targets (tests/fuzz/fuzz_*.c): the check of an error
 * message, and the scratch directory where a target writes its input for the parsers
 * that read files or directories.
 *
 * Several files in one input. A target that reads a directory (a feature store, an
 * import layout, an index) takes its files from one input: each file starts with a line
 *
 *     %%file NAME
 *
 * and runs to the newline before the next such line (that newline is the separator's,
 * not the file's), or to the end of the input. NAME is a relative path of components
 * made of [A-Za-z0-9._-] (not "." or ".."), at most 8 deep; parts with another name are
 * dropped, as are parts past the 32nd. Bytes before the first "%%file " line form the
 * file `first_name` (dropped when first_name is NULL). tests/interop/make_fuzz_corpus.py
 * writes the seeds in this form.
 *
 * With VTR_FUZZ_VERBOSE set in the environment, every message checked is printed: which
 * seeds pass which parser (`fuzz_X -runs=0 tests/fuzz/corpus/X`).
 *
 * Failures of the harness itself (a full /tmp) abort with a message: they are not
 * findings, but must not pass silently either.
 */
#ifndef VTR_FUZZ_UTIL_H
#define VTR_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless err holds what lib/error.h promises: one non-empty line of UTF-8
 * without control characters (below 0x20, 0x7f), here starting with prefix (NULL: any).
 * Names and text from the input may stand in it as they are, when they are such. */
void fuzz_check_message(const vtr_error *err, const char *prefix);

/* Aborts unless s (n bytes) is valid UTF-8 (jansson's check). */
void fuzz_check_utf8(const char *s, size_t n);

/* A malloc'ed NUL-terminated copy of data (a NUL inside stays and ends the string early). */
char *fuzz_strndup(const uint8_t *data, size_t size);

/* This process's scratch directory (made under $TMPDIR, else /dev/shm or /tmp, on first
 * use; removed at exit), emptied of whatever the previous input left. Call once per input, first.
 */
const char *fuzz_scratch(void);

/* "SCRATCH/name", malloc'ed. */
char *fuzz_path(const char *name);

/* Writes size bytes to SCRATCH/name, making its parent directories. */
void fuzz_write_file(const char *name, const void *data, size_t size);

/* Writes the files of a multi-file input (above) into the scratch directory; returns how
 * many it wrote. */
size_t fuzz_write_files(const uint8_t *data, size_t size, const char *first_name);

/* Removes SCRATCH/name, a file or a whole directory, if it exists. */
void fuzz_remove(const char *name);

/* Whether SCRATCH/name exists. */
bool fuzz_exists(const char *name);

#endif

/* Text streams read line by line, with line numbers: the one reader of vtr's line lists
 * (manifests, queries, texts, id and caption files).
 *
 * A line ends at "\n"; the "\n" and any '\r' before it are dropped ("\r\n" files read like
 * "\n" ones), as is a '\r' ending a last line that has no "\n". A last line without "\n"
 * is a line. A line holding a NUL byte is an error, reported with its number; reading may
 * go on past it. Lines may be of any length (the buffer grows). vtr_line_list keeps the
 * lines of a whole file.
 */
#ifndef VTR_LINES_H
#define VTR_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

typedef struct vtr_line_reader {
    FILE *fp;         /* not owned: the caller opens and closes it */
    const char *name; /* not owned: names the stream in messages */
    int64_t line;     /* the number of the last line read; 0 before the first. A caller may
                       * set it before the first read to go on counting over several streams */
    char *buf;        /* owned: the current line */
    size_t cap;
} vtr_line_reader;

/* Starts reading fp; name must outlive the reader. */
void vtr_line_reader_init(vtr_line_reader *r, FILE *fp, const char *name);

/* Reads the next line. On VTR_OK, *text is the line (NUL-terminated, without its end as
 * above), or NULL at the end of the stream; *len (may be NULL) its length. *text points into
 * r's buffer: the caller may change it in place, and it stays valid until the next call or
 * vtr_line_reader_free.
 * Errors: VTR_ERR_FORMAT "NAME:LINE: a NUL byte in the line" (the line is consumed; the next
 * call reads the one after it); VTR_ERR_IO "NAME: <strerror>" when reading fails;
 * VTR_ERR_NOMEM. After VTR_ERR_IO or VTR_ERR_NOMEM the next call may fail again. */
vtr_status vtr_line_next(vtr_line_reader *r, char **text, size_t *len, vtr_error *err);

/* Frees r's buffer (not its stream) and zeroes r; safe on a zeroed reader. */
void vtr_line_reader_free(vtr_line_reader *r);

/* Whether s holds nothing but spaces and tabs (or nothing). */
bool vtr_line_is_blank(const char *s);

/* Texts in order, each a malloc'ed copy: the lines of a file, query arguments. */
typedef struct vtr_line_list {
    char **v; /* owned, with the strings */
    size_t n, cap;
} vtr_line_list;

/* Appends a copy of text. VTR_ERR_NOMEM ("out of memory") only. */
vtr_status vtr_line_list_add(vtr_line_list *l, const char *text, vtr_error *err);

/* Appends the lines of path ("-": stdin), read as above; skip_blank leaves out the blank
 * ones (vtr_line_is_blank). VTR_ERR_IO "PATH: <strerror>" when it cannot be opened or read,
 * VTR_ERR_FORMAT "PATH:LINE: a NUL byte in the line", VTR_ERR_NOMEM; the lines before a
 * failure stay appended. */
vtr_status vtr_line_list_read(vtr_line_list *l, const char *path, bool skip_blank,
                              vtr_error *err);

/* Frees the strings and the array and zeroes l; safe on a zeroed value. */
void vtr_line_list_free(vtr_line_list *l);

#endif

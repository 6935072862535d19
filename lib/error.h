/* Errors as values.
 *
 * Every libvtr function that can fail returns a vtr_status and, when it is not VTR_OK,
 * fills the caller's vtr_error with one line of text naming the item and the cause.
 * The line is always UTF-8 without control characters: whatever a message quotes from
 * its input (a key, SQLite's or jansson's text, which quote the bytes they choke on),
 * vtr_fail and vtr_error_context write control characters (below 0x20, 0x7f) and bytes
 * that are not UTF-8 as \xNN.
 * Callers higher up add context with vtr_error_context() ("reading a.npy: ..."); only
 * programs print the final message. The library never prints and never exits.
 *
 * A vtr_error is a plain value on the caller's stack; it owns no memory. Passing NULL
 * for err is allowed: the status is still returned, the text is dropped.
 */
#ifndef VTR_ERROR_H
#define VTR_ERROR_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vtr_status {
    VTR_OK = 0,
    VTR_ERR_IO,          /* open/read/write/mmap failed; the message carries strerror */
    VTR_ERR_FORMAT,      /* malformed input: bad magic, truncated, inconsistent header */
    VTR_ERR_UNSUPPORTED, /* well-formed, but outside what vtr handles (Fortran order, ...) */
    VTR_ERR_INVALID,     /* bad argument, option or config value */
    VTR_ERR_NOMEM,       /* allocation failed */
    VTR_ERR_NOT_FOUND,   /* a named item, tensor or key does not exist */
    VTR_ERR_DB,          /* SQLite reported an error */
    VTR_ERR_CODEC,       /* FFmpeg could not demux or decode */
    VTR_ERR_DEVICE,      /* CUDA / cuBLAS / cuDNN reported an error */
} vtr_status;

#define VTR_ERROR_MSG_MAX 1024

typedef struct vtr_error {
    vtr_status status;
    char msg[VTR_ERROR_MSG_MAX];
} vtr_error;

/* Sets err to (status, printf-formatted text) and returns status, so that a failing
 * branch reads `return vtr_fail(err, VTR_ERR_FORMAT, "%s: bad magic", path);`. */
vtr_status vtr_fail(vtr_error *err, vtr_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Returns from the enclosing function when expr (a vtr_status) is not VTR_OK: for code that
 * is a sequence of calls each of which can fail (a model's ops on a GPU). */
#define VTR_TRY(expr)                                                                              \
    do {                                                                                           \
        vtr_status vtr_try_st_ = (expr);                                                           \
        if (vtr_try_st_ != VTR_OK)                                                                 \
            return vtr_try_st_;                                                                    \
    } while (0)

/* Like vtr_fail with VTR_ERR_IO, appending ": " and strerror(errno) (errno read on entry). */
vtr_status vtr_fail_errno(vtr_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes the message with "context: ". Keeps the status. Truncates safely. */
void vtr_error_context(vtr_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void vtr_error_clear(vtr_error *err);

/* Copies n bytes of untrusted text (a key, a dtype string read from a file) into buf for
 * a one-line message: printable ASCII as is, anything else as \xNN, cut with "..." when
 * it does not fit. Returns buf (always NUL-terminated; size >= 8). */
const char *vtr_printable(const char *s, size_t n, char *buf, size_t size);

/* Length of the well-formed UTF-8 character at s (n >= 1 bytes left), or 0 when the
 * bytes there are not one (a stray continuation byte, a cut or overlong sequence, a
 * surrogate, a code point above U+10FFFF). */
size_t vtr_utf8_len(const char *s, size_t n);

/* Whether the n bytes at s are well-formed UTF-8 (no overlongs, surrogates or code points
 * above U+10FFFF). */
bool vtr_utf8_valid(const char *s, size_t n);

/* Text from outside (a file name, a key) as a terminal line or a JSON string may carry it:
 * s itself when it is valid UTF-8 without control characters (a line break, an escape
 * sequence), else vtr_printable's escape of it into buf. The one filter between names
 * and what programs print: vtr_log_* applies it to every message, tables to their
 * names. */
const char *vtr_shown(const char *s, char *buf, size_t size);

/* A short stable name for a status ("format", "io", ...), for JSON events. */
const char *vtr_status_name(vtr_status status);

#ifdef __cplusplus
}
#endif

#endif

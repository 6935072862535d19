/* Logging and progress for programs (the library itself never prints).
 *
 * Human mode: messages on stderr prefixed with the program name; when stderr is a
 * terminal, a progress line "program: what: done/total, rate, ETA": redrawn in place when
 * the program runs alone, and, in a pipeline (stdin or stdout a pipe: other stages share
 * the terminal and would overwrite one line), printed as a whole line at the first step,
 * every VTR_PROGRESS_LINE_SECONDS and at the end; nothing when stderr is not a terminal.
 * JSON mode (--log-json): every message and progress update is one JSON object per line
 * on stderr: {"t": seconds since start, "event": "...", ...}.
 */
#ifndef VTR_LOG_H
#define VTR_LOG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* Call once at program start. */
void vtr_log_init(const char *program, bool json);

void vtr_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vtr_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Reports a failed item: "program: item: message" (or an "error" event naming the item
 * and the status). item may be NULL for a failure not tied to one item. Like every
 * message here, item and message are printed through vtr_shown: a name that is not
 * UTF-8 or holds a control character comes out escaped, never as raw bytes. */
void vtr_log_item_error(const char *item, const vtr_error *err);

/* Emits a JSON event in JSON mode (fields may be NULL; it is not stolen); nothing in
 * human mode. */
void vtr_log_event(const char *event, const json_t *fields);

/* Seconds on the monotonic clock (for intervals). */
double vtr_now_seconds(void);

/* Seconds since vtr_log_init (monotonic clock). */
double vtr_log_elapsed(void);

typedef struct vtr_progress {
    char what[64];
    int64_t total;     /* -1 when unknown */
    int64_t done;
    double start;      /* vtr_log_elapsed() at begin */
    double last_draw;
    bool drawn;
} vtr_progress;

#define VTR_PROGRESS_LINE_SECONDS 10.0

void vtr_progress_begin(vtr_progress *p, const char *what, int64_t total);
void vtr_progress_step(vtr_progress *p, int64_t n);
/* Clears the terminal line (in a pipeline: prints the final line, when one was printed)
 * and, in JSON mode, emits a final "progress" event. */
void vtr_progress_end(vtr_progress *p);

/* How a run that writes items (vtr_decode_items, vtr_audio_features_write, ...) tells its
 * program what became of them; the program logs and counts. */
typedef struct vtr_item_report {
    /* An item done with: written (err NULL), or failed, err saying why (it could not be
     * made, or the output refused it). */
    void (*item)(void *ctx, const char *key, const vtr_error *err);
    /* An error that is no item's outcome: an input that could not be read or taken (key
     * NULL, or the input item's key), or, where the run says so, the failure that stops
     * it. */
    void (*error)(void *ctx, const char *key, const vtr_error *err);
    void *ctx;
} vtr_item_report;

/* A program's account of the items a run writes. */
typedef struct vtr_item_log {
    vtr_progress progress; /* begun and ended by the program */
    size_t failed;         /* errors reported */
} vtr_item_log;

/* A report into l: each item steps the progress, and each error (an item's, or not)
 * is logged with vtr_log_item_error and counted in l->failed. l must outlive the run. */
vtr_item_report vtr_item_log_report(vtr_item_log *l);

#endif

#define _POSIX_C_SOURCE 200809L
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "json.h"

static struct {
    char program[64];
    bool json;
    bool tty;
    bool piped;      /* stdin or stdout is a pipe: progress as whole lines */
    double t0;
    bool line_dirty; /* a progress line is on screen */
} logger = {"vtr", false, false, false, 0, false};

double vtr_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void vtr_log_init(const char *program, bool json)
{
    const char *slash = strrchr(program, '/');
    snprintf(logger.program, sizeof logger.program, "%s", slash ? slash + 1 : program);
    logger.json = json;
    logger.tty = isatty(STDERR_FILENO);
    struct stat in, out;
    logger.piped = (fstat(STDIN_FILENO, &in) == 0 && S_ISFIFO(in.st_mode)) ||
                   (fstat(STDOUT_FILENO, &out) == 0 && S_ISFIFO(out.st_mode));
    logger.t0 = vtr_now_seconds();
}

double vtr_log_elapsed(void)
{
    return vtr_now_seconds() - logger.t0;
}

static void clear_progress_line(void)
{
    if (logger.line_dirty) {
        fputs("\r\033[K", stderr);
        logger.line_dirty = false;
    }
}

/* Writes {"t":..., "event": event, ...fields} as one line. */
static void emit_event(const char *event, const json_t *fields)
{
    json_t *obj = json_object();
    json_object_set_new(obj, "t", json_real(vtr_log_elapsed()));
    json_object_set_new(obj, "program", json_string(logger.program));
    json_object_set_new(obj, "event", json_string(event));
    if (fields)
        json_object_update(obj, (json_t *)fields);
    char *text = json_dumps(obj, VTR_JSON_FLAGS);
    if (text)
        fprintf(stderr, "%s\n", text);
    free(text);
    json_decref(obj);
}

/* Room for a message of VTR_ERROR_MSG_MAX bytes escaped by vtr_shown (4 bytes a byte). */
#define SHOWN_MAX (4 * VTR_ERROR_MSG_MAX)

static void log_message(const char *level, const char *fmt, va_list ap)
{
    char text[2048], shown[SHOWN_MAX];
    vsnprintf(text, sizeof text, fmt, ap);
    const char *msg = vtr_shown(text, shown, sizeof shown);
    if (logger.json) {
        json_t *f = json_pack("{s:s}", "message", msg);
        emit_event(level, f);
        json_decref(f);
        return;
    }
    clear_progress_line();
    if (strcmp(level, "warning") == 0)
        fprintf(stderr, "%s: warning: %s\n", logger.program, msg);
    else
        fprintf(stderr, "%s: %s\n", logger.program, msg);
}

void vtr_log_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_message("info", fmt, ap);
    va_end(ap);
}

void vtr_log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_message("warning", fmt, ap);
    va_end(ap);
}

void vtr_log_item_error(const char *item_text, const vtr_error *err)
{
    char item_shown[SHOWN_MAX], msg_shown[SHOWN_MAX];
    const char *item = item_text ? vtr_shown(item_text, item_shown, sizeof item_shown) : NULL;
    const char *msg = vtr_shown(err->msg, msg_shown, sizeof msg_shown);
    if (logger.json) {
        json_t *f = json_pack("{s:s, s:s}", "status", vtr_status_name(err->status), "message",
                              msg);
        if (item)
            json_object_set_new(f, "item", json_string(item));
        emit_event("error", f);
        json_decref(f);
        return;
    }
    clear_progress_line();
    /* messages from the library usually name the item already; don't say it twice */
    if (item && strncmp(msg, item, strlen(item)) != 0)
        fprintf(stderr, "%s: %s: %s\n", logger.program, item, msg);
    else
        fprintf(stderr, "%s: %s\n", logger.program, msg);
}

void vtr_log_event(const char *event, const json_t *fields)
{
    if (logger.json)
        emit_event(event, fields);
}

static void format_duration(double s, char *buf, size_t size)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

static void progress_event(const vtr_progress *p, double elapsed)
{
    json_t *f = json_pack("{s:s, s:I, s:f}", "what", p->what, "done", (json_int_t)p->done,
                          "elapsed", elapsed);
    if (p->total >= 0)
        json_object_set_new(f, "total", json_integer(p->total));
    emit_event("progress", f);
    json_decref(f);
}

static void draw(vtr_progress *p, double now)
{
    double elapsed = now - p->start;
    double rate = elapsed > 0 ? p->done / elapsed : 0;
    if (logger.json) {
        progress_event(p, elapsed);
    } else if (logger.tty) {
        char eta[32] = "";
        if (p->total > 0 && rate > 0 && p->done < p->total) {
            char d[24];
            format_duration((p->total - p->done) / rate, d, sizeof d);
            snprintf(eta, sizeof eta, ", ETA %s", d);
        }
        /* in place, or (in a pipeline) a line of its own */
        const char *head = logger.piped ? "" : "\r", *tail = logger.piped ? "\n" : "\033[K";
        if (p->total >= 0)
            fprintf(stderr, "%s%s: %s: %lld/%lld, %.1f/s%s%s", head, logger.program, p->what,
                    (long long)p->done, (long long)p->total, rate, eta, tail);
        else
            fprintf(stderr, "%s%s: %s: %lld, %.1f/s%s", head, logger.program, p->what,
                    (long long)p->done, rate, tail);
        logger.line_dirty = !logger.piped;
    }
    p->drawn = true;
    p->last_draw = now;
}

void vtr_progress_begin(vtr_progress *p, const char *what, int64_t total)
{
    memset(p, 0, sizeof *p);
    snprintf(p->what, sizeof p->what, "%s", what);
    p->total = total;
    p->start = vtr_log_elapsed();
    p->last_draw = p->start;
}

void vtr_progress_step(vtr_progress *p, int64_t n)
{
    p->done += n;
    if (!logger.json && !logger.tty)
        return;
    double now = vtr_log_elapsed();
    /* seconds between updates */
    double interval = logger.json ? 1.0 : logger.piped ? VTR_PROGRESS_LINE_SECONDS : 0.2;
    if (now - p->last_draw >= interval || (logger.piped && logger.tty && !p->drawn))
        draw(p, now);
}

void vtr_progress_end(vtr_progress *p)
{
    if (logger.json)
        progress_event(p, vtr_log_elapsed() - p->start);
    else if (logger.tty && logger.piped && p->drawn)
        draw(p, vtr_log_elapsed());
    else
        clear_progress_line();
}

static void log_item(void *ctx, const char *key, const vtr_error *err)
{
    vtr_item_log *l = ctx;
    if (err) {
        vtr_log_item_error(key, err);
        l->failed++;
    }
    vtr_progress_step(&l->progress, 1);
}

static void log_error(void *ctx, const char *key, const vtr_error *err)
{
    vtr_item_log *l = ctx;
    vtr_log_item_error(key, err);
    l->failed++;
}

vtr_item_report vtr_item_log_report(vtr_item_log *l)
{
    return (vtr_item_report){.item = log_item, .error = log_error, .ctx = l};
}

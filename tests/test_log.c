#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "lib/log.h"

/* Runs fn with stderr redirected to a file; returns what it wrote (malloc'ed). */
static char *capture_stderr(void (*fn)(void))
{
    const char *path = test_path("stderr.txt");
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, STDERR_FILENO);
    close(fd);
    fn();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    FILE *fp = fopen(path, "rb");
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static void human_messages(void)
{
    vtr_log_init("/usr/bin/vtr-test", false);
    vtr_error err;
    vtr_fail(&err, VTR_ERR_FORMAT, "a.mp4: no video stream");
    vtr_log_item_error("a.mp4", &err);
    vtr_fail(&err, VTR_ERR_IO, "permission denied");
    vtr_log_item_error("b.mp4", &err);
    vtr_log_warn("%d items skipped", 2);
    vtr_progress p;
    vtr_progress_begin(&p, "decode", 10);
    for (int i = 0; i < 10; i++)
        vtr_progress_step(&p, 1);
    vtr_progress_end(&p);
}

TEST(log_human_lines_name_program_and_item_once)
{
    char *out = capture_stderr(human_messages);
    CHECK_STR(out, "vtr-test: a.mp4: no video stream\n"
                   "vtr-test: b.mp4: permission denied\n"
                   "vtr-test: warning: 2 items skipped\n"); /* no progress: not a terminal */
    free(out);
}

static void json_messages(void)
{
    vtr_log_init("vtr-test", true);
    vtr_error err;
    vtr_fail(&err, VTR_ERR_CODEC, "c.mp4: invalid data");
    vtr_log_item_error("c.mp4", &err);
    vtr_progress p;
    vtr_progress_begin(&p, "features", 3);
    vtr_progress_step(&p, 3);
    vtr_progress_end(&p);
}

TEST(log_json_events_are_one_object_per_line)
{
    char *out = capture_stderr(json_messages);
    char *save = NULL;
    int lines = 0;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_error_t jerr;
        json_t *obj = json_loads(line, 0, &jerr);
        CHECK_MSG(json_is_object(obj), "not JSON: %s", line);
        CHECK_STR(json_string_value(json_object_get(obj, "program")), "vtr-test");
        const char *event = json_string_value(json_object_get(obj, "event"));
        if (lines == 0) {
            CHECK_STR(event, "error");
            CHECK_STR(json_string_value(json_object_get(obj, "item")), "c.mp4");
            CHECK_STR(json_string_value(json_object_get(obj, "status")), "codec");
        } else {
            CHECK_STR(event, "progress");
            CHECK_EQ_INT(json_integer_value(json_object_get(obj, "done")), 3);
            CHECK_EQ_INT(json_integer_value(json_object_get(obj, "total")), 3);
        }
        json_decref(obj);
        lines++;
    }
    CHECK_EQ_INT(lines, 2);
    free(out);
}

/* Names from outside (a file name that is not UTF-8, a key with a line break) come out
 * escaped, never as raw bytes: one line per message, valid JSON in JSON mode. UTF-8 text
 * stays as it is. */
static void hostile_names(void)
{
    vtr_error err;
    vtr_log_init("vtr-test", false);
    vtr_fail(&err, VTR_ERR_FORMAT, "/v/bad\xff.mp4: no video stream");
    vtr_log_item_error("bad\xff", &err);
    vtr_fail(&err, VTR_ERR_IO, "two\nlines: \x1b[2Jgone");
    vtr_log_item_error("caf\xc3\xa9", &err);
    vtr_log_info("index %s: done", "caf\xc3\xa9");
    vtr_log_init("vtr-test", true);
    vtr_fail(&err, VTR_ERR_FORMAT, "/v/bad\xff.mp4: no video stream");
    vtr_log_item_error("bad\xff", &err);
}

TEST(log_escapes_names_that_are_not_text)
{
    char *out = capture_stderr(hostile_names);
    char *json = strstr(out, "{");
    CHECK(json && json > out);
    json[-1] = '\0'; /* the human lines before, the JSON event after */
    CHECK_STR(out, "vtr-test: bad\\xff: /v/bad\\xff.mp4: no video stream\n"
                   "vtr-test: caf\xc3\xa9: two\\x0alines: \\x1b[2Jgone\n"
                   "vtr-test: index caf\xc3\xa9: done");
    json_error_t jerr;
    json_t *obj = json_loads(json, JSON_DISABLE_EOF_CHECK, &jerr);
    CHECK_MSG(json_is_object(obj), "not JSON: %s", json);
    CHECK_STR(json_string_value(json_object_get(obj, "item")), "bad\\xff");
    CHECK_STR(json_string_value(json_object_get(obj, "message")),
              "/v/bad\\xff.mp4: no video stream");
    json_decref(obj);
    free(out);
}

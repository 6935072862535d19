/* The line reader (lib/lines.h) and the manifest grammar (lib/manifest.h): line ends,
 * comments, tabs, NUL bytes, a last line without "\n", and input cut at every length. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/lines.h"
#include "lib/manifest.h"

/* A stream holding the n bytes of text (a temporary file, so that n may be 0). */
static FILE *stream_of(const char *text, size_t n)
{
    FILE *fp = tmpfile();
    CHECK(fp != NULL);
    CHECK_EQ_INT(fwrite(text, 1, n, fp), n);
    rewind(fp);
    return fp;
}

TEST(lines_ends_numbers_and_nul_bytes)
{
    static const char text[] = "one\r\n\ntwo \t\nthr\0ee\r\r\nfour\r";
    FILE *fp = stream_of(text, sizeof text - 1);
    vtr_line_reader r;
    vtr_line_reader_init(&r, fp, "in.txt");
    vtr_error err;
    char *line;
    size_t len;
    CHECK_OK(vtr_line_next(&r, &line, &len, &err));
    CHECK_STR(line, "one");
    CHECK_EQ_INT(len, 3);
    CHECK_OK(vtr_line_next(&r, &line, &len, &err));
    CHECK_STR(line, "");
    CHECK(vtr_line_is_blank(line));
    CHECK_OK(vtr_line_next(&r, &line, NULL, &err));
    CHECK_STR(line, "two \t"); /* blanks are kept */
    CHECK(vtr_line_is_blank(" \t") && !vtr_line_is_blank(" x "));
    CHECK_FAILS(vtr_line_next(&r, &line, &len, &err), VTR_ERR_FORMAT,
                "in.txt:4: a NUL byte in the line");
    CHECK(line == NULL);
    CHECK_OK(vtr_line_next(&r, &line, &len, &err)); /* reading goes on */
    CHECK_STR(line, "four");                        /* no "\n": still a line; its '\r' dropped */
    CHECK_EQ_INT(r.line, 5);
    CHECK_OK(vtr_line_next(&r, &line, &len, &err));
    CHECK(line == NULL);
    CHECK_EQ_INT(len, 0);
    CHECK_OK(vtr_line_next(&r, &line, &len, &err)); /* the end stays the end */
    CHECK(line == NULL);
    vtr_line_reader_free(&r);
    fclose(fp);

    /* a count that goes on over a second stream; a long line */
    size_t big = 100000;
    char *longline = malloc(big + 1);
    memset(longline, 'x', big);
    longline[big] = '\n';
    fp = stream_of(longline, big + 1);
    vtr_line_reader_init(&r, fp, "b");
    r.line = 7;
    CHECK_OK(vtr_line_next(&r, &line, &len, &err));
    CHECK_EQ_INT(len, big);
    CHECK_EQ_INT(r.line, 8);
    vtr_line_reader_free(&r);
    fclose(fp);
    free(longline);
}

TEST(lines_read_error_names_the_stream)
{
    FILE *fp = fopen(test_path("write_only"), "w");
    CHECK(fp != NULL);
    vtr_line_reader r;
    vtr_line_reader_init(&r, fp, "out.txt");
    vtr_error err;
    char *line;
    CHECK_FAILS(vtr_line_next(&r, &line, NULL, &err), VTR_ERR_IO, "out.txt: ");
    vtr_line_reader_free(&r);
    fclose(fp);
}

/* Reads every item of text; returns the status of the first failure (VTR_OK: none) and
 * writes "KEY|PATH;" per item ("-" for no key) into got. */
static vtr_status read_all(const char *text, size_t n, char *got, size_t size, vtr_error *err)
{
    FILE *fp = stream_of(text, n);
    vtr_line_reader r;
    vtr_line_reader_init(&r, fp, "list");
    const char *key, *path;
    vtr_status st;
    got[0] = '\0';
    while ((st = vtr_manifest_next(&r, &key, &path, err)) == VTR_OK && path) {
        size_t used = strlen(got);
        snprintf(got + used, size - used, "%s|%s;", key ? key : "-", path);
    }
    vtr_line_reader_free(&r);
    fclose(fp);
    return st;
}

TEST(manifest_grammar)
{
    char got[512];
    vtr_error err;
    static const char text[] = "# items\r\n"
                               "a.mp4\r\n"
                               "\n"
                               "clip\tdir/b c.mp4\n"
                               " #not a comment\n"
                               "k\tp\tq\n"
                               "last.mov";
    CHECK_OK(read_all(text, sizeof text - 1, got, sizeof got, &err));
    CHECK_STR(got, "-|a.mp4;clip|dir/b c.mp4;-| #not a comment;k|p\tq;-|last.mov;");

    CHECK_FAILS(read_all("a\n\tp\n", 5, got, sizeof got, &err), VTR_ERR_FORMAT,
                "list:2: empty key or path");
    CHECK_STR(got, "-|a;");
    CHECK_FAILS(read_all("# x\nk\t\r\n", 8, got, sizeof got, &err), VTR_ERR_FORMAT,
                "list:2: empty key or path");
    CHECK_FAILS(read_all("\t\n", 2, got, sizeof got, &err), VTR_ERR_FORMAT,
                "list:1: empty key or path");
    CHECK_FAILS(read_all("a\nb\0c\n", 6, got, sizeof got, &err), VTR_ERR_FORMAT,
                "list:2: a NUL byte in the line");
    CHECK_OK(read_all("", 0, got, sizeof got, &err));
    CHECK_STR(got, "");
}

/* A manifest cut at every length reads as the cut text with a "\n" added (a last line
 * needs none); the items before the cut line are those of the full text; the only failure
 * is a cut right after a KEY<TAB>. */
TEST(manifest_truncated_at_every_length)
{
    static const char text[] = "# c\r\nk1\tp1.mp4\r\n\nq.mov\nkey two\tpath two\n";
    size_t n = sizeof text - 1;
    char full[512], got[512], ended[512];
    vtr_error err;
    CHECK_OK(read_all(text, n, full, sizeof full, &err));
    CHECK_STR(full, "k1|p1.mp4;-|q.mov;key two|path two;");
    for (size_t cut = 0; cut <= n; cut++) {
        /* a copy of exactly cut bytes, and one with "\n" added */
        char *part = malloc(cut + 1);
        memcpy(part, text, cut);
        part[cut] = '\n';
        if (cut > 0 && text[cut - 1] == '\t') {
            CHECK_FAILS(read_all(part, cut, got, sizeof got, &err), VTR_ERR_FORMAT,
                        "empty key or path");
            CHECK_FAILS(read_all(part, cut + 1, ended, sizeof ended, &err), VTR_ERR_FORMAT,
                        "empty key or path");
        } else {
            CHECK_OK(read_all(part, cut, got, sizeof got, &err));
            CHECK_OK(read_all(part, cut + 1, ended, sizeof ended, &err));
        }
        CHECK_STR(got, ended);
        /* all items but the last read are the full text's */
        size_t head = strlen(got);
        if (head)
            for (head--; head > 0 && got[head - 1] != ';'; head--)
                ;
        CHECK_MSG(!strncmp(got, full, head), "cut %zu: %s", cut, got);
        free(part);
    }
}

TEST(line_list_reads_a_file_with_or_without_blank_lines)
{
    const char *path = test_path("lines.txt");
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL);
    fputs("first\r\n \t\n\nlast", fp);
    fclose(fp);
    vtr_error err;
    vtr_line_list all = {0}, kept = {0};
    CHECK_OK(vtr_line_list_read(&all, path, false, &err));
    CHECK_EQ_INT(all.n, 4);
    CHECK_STR(all.v[0], "first");
    CHECK_STR(all.v[1], " \t");
    CHECK_STR(all.v[2], "");
    CHECK_STR(all.v[3], "last");
    CHECK_OK(vtr_line_list_add(&kept, "arg", &err));
    CHECK_OK(vtr_line_list_read(&kept, path, true, &err));
    CHECK_EQ_INT(kept.n, 3);
    CHECK_STR(kept.v[0], "arg");
    CHECK_STR(kept.v[1], "first");
    CHECK_STR(kept.v[2], "last");
    vtr_line_list_free(&all);
    vtr_line_list_free(&kept);
    CHECK(all.v == NULL && all.n == 0);

    fp = fopen(path, "w");
    fwrite("ok\nn\0l\nafter\n", 1, 13, fp);
    fclose(fp);
    CHECK_FAILS(vtr_line_list_read(&all, path, false, &err), VTR_ERR_FORMAT,
                ":2: a NUL byte in the line");
    CHECK_EQ_INT(all.n, 1); /* the lines before it stay */
    vtr_line_list_free(&all);
    CHECK_FAILS(vtr_line_list_read(&all, test_path("missing.txt"), false, &err), VTR_ERR_IO,
                "missing.txt: ");
    CHECK_EQ_INT(all.n, 0);
}

/* The parts of vtr-index that need no model: which files of an archive are items
 * (index/archive_source.h) and the model record of an index (index/archive_index.h). The
 * runs themselves (decode, backbone, model, index, catalog) are tested end to end by
 * tests/t_index.sh. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/archive_index.h"
#include "index/archive_source.h"

static void touch(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    CHECK_MSG(fp != NULL, "%s", path);
    fputs(text, fp);
    fclose(fp);
}

/* "key,key,..." of a list */
static const char *keys_of(const vtr_archive_files *f)
{
    static char buf[1024];
    buf[0] = '\0';
    for (size_t i = 0; i < f->n; i++) {
        strcat(buf, f->files[i].key);
        strcat(buf, i + 1 < f->n ? "," : "");
    }
    return buf;
}

TEST(archive_media_names_by_extension)
{
    CHECK(vtr_archive_is_media_name("a.mp4"));
    CHECK(vtr_archive_is_media_name("A.MP4"));
    CHECK(vtr_archive_is_media_name("x.y.WebM"));
    CHECK(vtr_archive_is_media_name("photo.jpeg"));
    CHECK(vtr_archive_is_media_name("clip.m2ts"));
    CHECK(!vtr_archive_is_media_name("notes.txt"));
    CHECK(!vtr_archive_is_media_name("mp4"));
    CHECK(!vtr_archive_is_media_name(".mp4")); /* a hidden file named like an extension */
    CHECK(!vtr_archive_is_media_name("a.mp4.part"));
}

TEST(archive_directory_walk_is_recursive_sorted_and_skips_the_rest)
{
    char root[512];
    snprintf(root, sizeof root, "%s", test_path("walk"));
    CHECK_EQ_INT(test_run("mkdir -p '%s/b/deep' '%s/.git' '%s/a' '%s/outside'", root, root,
                          root, test_path("walk_outside")),
                 0);
    char p[700];
    const char *files[] = {"z.mp4", "b/deep/one.MKV", "a/two.png", "a/readme.txt",
                           ".git/x.mp4", ".hidden.mp4", "b/three.webm"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", root, files[i]);
        touch(p, "data");
    }
    /* a link to a file counts; a link to a directory (here: a cycle) is not followed */
    snprintf(p, sizeof p, "%s/link.mp4", root);
    CHECK_EQ_INT(symlink("z.mp4", p), 0);
    snprintf(p, sizeof p, "%s/b/loop", root);
    CHECK_EQ_INT(symlink("..", p), 0);
    snprintf(p, sizeof p, "%s/dangling.mp4", root);
    CHECK_EQ_INT(symlink("nowhere.mp4", p), 0);

    vtr_error err;
    vtr_archive_files f;
    CHECK_OK(vtr_archive_files_list(root, &f, &err));
    CHECK(f.is_dir);
    CHECK(f.root && f.root[0] == '/');
    CHECK_STR(keys_of(&f), "a/two.png,b/deep/one.MKV,b/three.webm,link.mp4,z.mp4");
    CHECK_EQ_INT(f.files[4].size, 4);
    CHECK(f.files[4].mtime_ns > 0);
    struct stat sb;
    CHECK_EQ_INT(stat(f.files[1].path, &sb), 0); /* the path opens */
    vtr_archive_files_free(&f);
    vtr_archive_files_free(&f); /* safe twice */

    CHECK_FAILS(vtr_archive_files_list(test_path("no_such_dir"), &f, &err), VTR_ERR_IO,
                "no_such_dir");
    CHECK_EQ_INT(f.n, 0);
}

TEST(archive_manifest_lists_paths_as_written)
{
    char dir[512], list[600], a[600];
    snprintf(dir, sizeof dir, "%s", test_path("man"));
    CHECK_EQ_INT(mkdir(dir, 0777), 0);
    snprintf(a, sizeof a, "%s/a.mov", dir);
    touch(a, "12345");
    snprintf(list, sizeof list, "%s/list.txt", dir);
    FILE *fp = fopen(list, "w");
    CHECK(fp != NULL);
    /* comments, blank lines, CRLF, a duplicate, a file of any extension, a missing one */
    fprintf(fp, "# archive\r\n%s\r\n\n%s/missing.mp4\n%s\n%s/list.txt\n", a, dir, a, dir);
    fclose(fp);
    vtr_error err;
    vtr_archive_files f;
    CHECK_OK(vtr_archive_files_list(list, &f, &err));
    CHECK(!f.is_dir);
    CHECK_EQ_INT(f.n, 3);
    CHECK_STR(f.files[0].key, a);
    CHECK_STR(f.files[0].path, a);
    CHECK_EQ_INT(f.files[0].size, 5);
    CHECK(strstr(f.files[1].key, "list.txt") != NULL);
    CHECK(strstr(f.files[2].key, "missing.mp4") != NULL);
    CHECK_EQ_INT(f.files[2].size, -1); /* kept: its decoding will say why it fails */
    CHECK_EQ_INT(f.files[2].mtime_ns, -1);
    vtr_archive_files_free(&f);
}

TEST(archive_manifest_keys_items_by_key_when_given)
{
    char dir[512], list[600], a[600], b[600];
    snprintf(dir, sizeof dir, "%s", test_path("keyed_manifest"));
    CHECK_EQ_INT(mkdir(dir, 0777), 0);
    snprintf(a, sizeof a, "%s/a.mov", dir);
    snprintf(b, sizeof b, "%s/b.mp4", dir);
    touch(a, "12345");
    touch(b, "12");
    snprintf(list, sizeof list, "%s/list.txt", dir);
    FILE *fp = fopen(list, "w");
    CHECK(fp != NULL);
    /* KEY<TAB>PATH and PATH lines; the same item twice counts once */
    fprintf(fp, "trip/first\t%s\r\n%s\ntrip/first\t%s\n", a, b, a);
    fclose(fp);
    vtr_error err;
    vtr_archive_files f;
    CHECK_OK(vtr_archive_files_list(list, &f, &err));
    CHECK_EQ_INT(f.n, 2);
    CHECK_STR(f.files[0].key, b); /* "/..." sorts before "trip/..." */
    CHECK_STR(f.files[0].path, b);
    CHECK_STR(f.files[1].key, "trip/first");
    CHECK_STR(f.files[1].path, a);
    CHECK_EQ_INT(f.files[1].size, 5);
    vtr_archive_files_free(&f);

    /* one key for two paths; an empty key; a NUL byte: errors naming the manifest */
    fp = fopen(list, "w");
    fprintf(fp, "k\t%s\nk\t%s\n", b, a);
    fclose(fp);
    char want[1300];
    snprintf(want, sizeof want, "list.txt: key 'k' names two paths: %s and %s", a, b);
    CHECK_FAILS(vtr_archive_files_list(list, &f, &err), VTR_ERR_FORMAT, want);
    CHECK_EQ_INT(f.n, 0);
    fp = fopen(list, "w");
    fprintf(fp, "# x\n\t%s\n", a);
    fclose(fp);
    CHECK_FAILS(vtr_archive_files_list(list, &f, &err), VTR_ERR_FORMAT,
                "list.txt:2: empty key or path");
    fp = fopen(list, "w");
    fwrite("a.mp4\n\0\n", 1, 8, fp);
    fclose(fp);
    CHECK_FAILS(vtr_archive_files_list(list, &f, &err), VTR_ERR_FORMAT,
                "list.txt:2: a NUL byte in the line");
    CHECK_EQ_INT(f.n, 0);
}

TEST(archive_model_record_parses_and_refuses_others)
{
    const char *text =
        "{\"backbone\":{\"arch\":\"resnet18\",\"sha256\":\"ab12\",\"weights\":\"/w.st\"},"
        "\"checkpoint\":\"/runs/x/best.safetensors\",\"format\":\"vtr-archive-index\","
        "\"frames\":8,\"model_id\":\"5d41\",\"preprocess\":{\"crop\":224,\"resize\":256}}";
    vtr_error err;
    vtr_archive_model m;
    CHECK_OK(vtr_archive_model_parse(text, &m, &err));
    CHECK_STR(m.model_id, "5d41");
    CHECK_STR(m.checkpoint, "/runs/x/best.safetensors");
    CHECK_STR(m.arch, "resnet18");
    CHECK_STR(m.weights, "/w.st");
    CHECK_STR(m.weights_sha256, "ab12");
    CHECK_EQ_INT(m.frames, 8);
    CHECK_EQ_INT(m.resize, 256);
    CHECK_EQ_INT(m.crop, 224);
    vtr_archive_model_free(&m);
    vtr_archive_model_free(&m);

    CHECK_FAILS(vtr_archive_model_parse("", &m, &err), VTR_ERR_FORMAT, "not JSON");
    CHECK(m.model_id == NULL);
    CHECK_FAILS(vtr_archive_model_parse("5d41402abc4b2a76b9719d911017c592", &m, &err),
                VTR_ERR_FORMAT, "not one vtr-index wrote");
    CHECK_FAILS(vtr_archive_model_parse("{\"format\":\"vtr-archive-index\",\"model_id\":\"x\"}",
                                        &m, &err),
                VTR_ERR_FORMAT, "checkpoint");
    char other[1024];
    snprintf(other, sizeof other, "%s", text);
    memcpy(strstr(other, "vtr-archive-index"), "vtr-archive-indey", 17);
    CHECK_FAILS(vtr_archive_model_parse(other, &m, &err), VTR_ERR_FORMAT, "another format");
}

TEST(archive_update_refuses_bad_options_before_any_work)
{
    vtr_error err;
    vtr_archive_options o;
    vtr_archive_options_defaults(&o);
    CHECK_EQ_INT(o.commit_items, 32);
    CHECK_EQ_INT(o.resize, -1);
    vtr_archive_stats s;
    CHECK_FAILS(vtr_archive_index_update(&o, &s, &err), VTR_ERR_INVALID, "source");
    o.source = test_path("nothing_here");
    o.index_dir = test_path("ix_never");
    o.checkpoint = test_path("no.safetensors");
    CHECK_FAILS(vtr_archive_index_update(&o, &s, &err), VTR_ERR_IO, "nothing_here");
    CHECK(access(o.index_dir, F_OK) != 0); /* nothing created */
    o.commit_items = 0;
    CHECK_FAILS(vtr_archive_index_update(&o, &s, &err), VTR_ERR_INVALID, "commit_items");
    CHECK_STR(vtr_archive_outcome_name(VTR_ARCHIVE_REMOVED), "removed");
}

/* Item inputs with their keys: keys from paths, directory listings (suffixes, order,
 * hidden files, subdirectories), errors. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "check.h"
#include "lib/keyed_files.h"

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    CHECK_MSG(f, "cannot create %s", path);
    fclose(f);
}

TEST(key_from_path_drops_directory_and_extension)
{
    static const char *const cases[][2] = {
        {"a/b/video7.mp4", "video7"}, {"clip.01.wav", "clip.01"}, {"noext", "noext"},
        {"dir.d/noext", "noext"},     {".wav", ".wav"},           {"d/.hidden.flac", ".hidden"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *k = vtr_key_from_path(cases[i][0]);
        CHECK(k);
        CHECK_MSG(!strcmp(k, cases[i][1]), "%s -> %s, expected %s", cases[i][0], k, cases[i][1]);
        free(k);
    }
}

TEST(keyed_files_lists_a_directory_by_key)
{
    vtr_error err;
    vtr_error_clear(&err);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", test_path("keyed"));
    CHECK(mkdir(dir, 0777) == 0);
    char p[600];
    static const char *const names[] = {"b.wav",       "a.FLAC",    "a-b.wav",
                                        ".hidden.wav", "notes.txt", "c.wav.tmp.12"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        touch(p);
    }
    snprintf(p, sizeof p, "%s/sub.wav", dir);
    CHECK(mkdir(p, 0777) == 0);

    vtr_keyed_files l = {0};
    CHECK_OK(vtr_keyed_files_add(&l, "given", "x/y.mp4", &err));
    static const char *const suffixes[] = {".wav", ".flac"};
    CHECK_OK(vtr_keyed_files_add_dir(&l, dir, suffixes, 2, &err));
    /* keys in byte order: "a" < "a-b" < "b" (by name, "a-b.wav" would come first) */
    static const char *const keys[] = {"given", "a", "a-b", "b"};
    CHECK_MSG(l.n == 4, "%zu entries", l.n);
    for (size_t i = 0; i < 4; i++)
        CHECK_MSG(!strcmp(l.v[i].key, keys[i]), "entry %zu: %s", i, l.v[i].key);
    CHECK(!strcmp(l.v[0].path, "x/y.mp4"));
    snprintf(p, sizeof p, "%s/a.FLAC", dir);
    CHECK(!strcmp(l.v[1].path, p));

    CHECK_FAILS(vtr_keyed_files_add_dir(&l, test_path("nowhere"), suffixes, 2, &err), VTR_ERR_IO,
                "nowhere: No such file");
    CHECK(l.n == 4);
    vtr_keyed_files_free(&l);
    CHECK(l.n == 0 && !l.v);
    vtr_keyed_files_free(&l);
}

/* The one check of a key that becomes a file name: nothing outside the directory. */
TEST(key_check_file_name_keeps_files_in_their_directory)
{
    vtr_error err;
    char longest[VTR_KEY_FILE_NAME_MAX + 2];
    memset(longest, 'k', sizeof longest - 1);
    longest[VTR_KEY_FILE_NAME_MAX] = '\0';
    static const char *const good[] = {"clip.01", "a b", "..x", ".hidden", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK_OK(vtr_key_check_file_name(good[i], "--out-dir", &err));
    CHECK_OK(vtr_key_check_file_name(longest, "--out-dir", &err));
    longest[VTR_KEY_FILE_NAME_MAX] = 'k';
    longest[VTR_KEY_FILE_NAME_MAX + 1] = '\0';
    CHECK_FAILS(vtr_key_check_file_name(longest, "--out-dir", &err), VTR_ERR_INVALID,
                "cannot name a file in --out-dir: it is too long");
    CHECK_FAILS(vtr_key_check_file_name("../../victim", "--audio-dir", &err), VTR_ERR_INVALID,
                "key '../../victim' cannot name a file in --audio-dir: it holds a '/'");
    CHECK_FAILS(vtr_key_check_file_name("..", "--audio-dir", &err), VTR_ERR_INVALID,
                "it names a directory");
    CHECK_FAILS(vtr_key_check_file_name(".", "--audio-dir", &err), VTR_ERR_INVALID,
                "it names a directory");
    CHECK_FAILS(vtr_key_check_file_name("", "--audio-dir", &err), VTR_ERR_INVALID,
                "it is empty");
    CHECK_FAILS(vtr_key_check_file_name("a/\xff", "--audio-dir", &err), VTR_ERR_INVALID,
                "key 'a/\\xff'"); /* escaped */
}

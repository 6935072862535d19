#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "lib/file.h"

TEST(atomic_write_replaces_a_file_whole)
{
    const char *path = test_path("atomic.txt");
    FILE *fp = fopen(path, "w");
    fputs("old", fp);
    fclose(fp);
    vtr_atomic_file f;
    vtr_error err;
    CHECK_OK(vtr_atomic_open(&f, path, &err));
    fputs("new contents", f.fp);
    vtr_atomic_abort(&f);
    char buf[32] = {0};
    fp = fopen(path, "r");
    CHECK(fread(buf, 1, sizeof buf - 1, fp) == 3 && !strcmp(buf, "old"));
    fclose(fp);
    CHECK_OK(vtr_atomic_open(&f, path, &err));
    fputs("new contents", f.fp);
    CHECK_OK(vtr_atomic_commit(&f, &err));
    memset(buf, 0, sizeof buf);
    fp = fopen(path, "r");
    CHECK(fread(buf, 1, sizeof buf - 1, fp) == 12 && !strcmp(buf, "new contents"));
    fclose(fp);
}

/* Output to a FIFO (like /dev/null, not a regular file) is written in place: renaming a
 * temporary file over it would replace it, and /dev/null with it when run as root. */
TEST(atomic_write_to_a_fifo_keeps_the_fifo)
{
    const char *path = test_path("out.fifo");
    CHECK(mkfifo(path, 0600) == 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "timeout 10 cat '%s'", path); /* no hang if it breaks */
    FILE *reader = popen(cmd, "r");
    vtr_atomic_file f;
    vtr_error err;
    CHECK_OK(vtr_atomic_open(&f, path, &err));
    fputs("through the pipe", f.fp);
    CHECK_OK(vtr_atomic_commit(&f, &err));
    char buf[64] = {0};
    CHECK(fread(buf, 1, sizeof buf - 1, reader) == 16 && !strcmp(buf, "through the pipe"));
    CHECK(pclose(reader) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISFIFO(st.st_mode));
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "lib/file.h"
#include "lib/hash.h"

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

TEST(make_dirs_creates_missing_parents)
{
    vtr_error err;
    struct stat sb;
    char path[1024];
    snprintf(path, sizeof path, "%s", test_path("made/a/b/c"));
    CHECK_OK(vtr_make_dirs(path, &err));
    CHECK(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode));
    CHECK_OK(vtr_make_dirs(path, &err)); /* existing: fine */
    snprintf(path, sizeof path, "%s/", test_path("made/trailing"));
    CHECK_OK(vtr_make_dirs(path, &err));
    CHECK(stat(test_path("made/trailing"), &sb) == 0 && S_ISDIR(sb.st_mode));
    FILE *fp = fopen(test_path("made/file"), "w");
    fclose(fp);
    snprintf(path, sizeof path, "%s", test_path("made/file/sub"));
    CHECK_FAILS(vtr_make_dirs(path, &err), VTR_ERR_IO, "made/file: Not a directory");
    CHECK_FAILS(vtr_make_dirs(test_path("made/file"), &err), VTR_ERR_IO,
                "made/file: Not a directory");
}

/* Inputs read as whole files refuse what is not a regular file: a FIFO would block the
 * open (or the read) until a writer comes, /dev/zero never ends. The alarm ends the run
 * instead of hanging it if the refusal breaks. */
TEST(whole_file_inputs_refuse_fifos_and_devices)
{
    vtr_error err;
    const char *fifo = test_path("in.fifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    alarm(20);
    int64_t size = -1;
    int fd;
    CHECK_FAILS(vtr_regular_file(fifo, &size, &err), VTR_ERR_IO,
                "in.fifo: not a regular file (a FIFO)");
    CHECK_FAILS(vtr_open_regular(fifo, &fd, &size, &err), VTR_ERR_IO,
                "not a regular file (a FIFO)");
    CHECK(fd == -1);
    vtr_mapped_file m;
    CHECK_FAILS(vtr_map_file(fifo, &m, &err), VTR_ERR_IO, "in.fifo: not a regular file (a FIFO)");
    CHECK(m.data == NULL);
    CHECK_FAILS(vtr_regular_file("/dev/zero", NULL, &err), VTR_ERR_IO,
                "/dev/zero: not a regular file (a character device)");
    char hex[VTR_SHA256_HEX_SIZE];
    CHECK_FAILS(vtr_file_sha256("/dev/zero", hex, &err), VTR_ERR_IO, "a character device");
    CHECK_FAILS(vtr_file_sha256(fifo, hex, &err), VTR_ERR_IO, "a FIFO");
    CHECK_FAILS(vtr_regular_file(test_tmpdir(), NULL, &err), VTR_ERR_IO, "is a directory");
    alarm(0);

    const char *path = test_path("in.bin");
    FILE *fp = fopen(path, "w");
    fputs("12345", fp);
    fclose(fp);
    CHECK_OK(vtr_regular_file(path, &size, &err));
    CHECK_EQ_INT(size, 5);
    CHECK_OK(vtr_open_regular(path, &fd, &size, &err));
    char buf[8];
    CHECK(size == 5 && read(fd, buf, sizeof buf) == 5); /* blocking again, reads the file */
    close(fd);
}

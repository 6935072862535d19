/* Sharded work (lib/shard.h): --shard parsed strictly with its messages, the shard from
 * the job's rank without it, contiguous shares and round-robin positions that cover every
 * item once, and the part names OUT.shard-I-of-N written and read back. */
#include <stdlib.h>

#include "check.h"
#include "lib/shard.h"

static const vtr_dist alone = {.rank = 0, .size = 1};

TEST(shard_option_parsed_strictly)
{
    vtr_error err;
    vtr_shard s;
    CHECK_OK(vtr_shard_choose("1/3", &alone, &s, &err));
    CHECK(s.index == 1 && s.count == 3 && !s.ranks);
    CHECK_OK(vtr_shard_choose("0/1", &alone, &s, &err));
    CHECK(s.index == 0 && s.count == 1);
    CHECK_FAILS(vtr_shard_choose("3/2", &alone, &s, &err), VTR_ERR_INVALID,
                "--shard 3/2: shard index out of range (0..1)");
    CHECK(s.index == 0 && s.count == 1);
    CHECK_FAILS(vtr_shard_choose("2/2", &alone, &s, &err), VTR_ERR_INVALID, "(0..1)");
    CHECK_FAILS(vtr_shard_choose("0/0", &alone, &s, &err), VTR_ERR_INVALID,
                "--shard 0/0: the shard count must be 1 to");
    CHECK_FAILS(vtr_shard_choose("0/100001", &alone, &s, &err), VTR_ERR_INVALID, "count");
    static const char *const bad[] = {"1", "", "/", "1/", "/2", "a/2", "1/b", "-1/2", "+1/2",
                                      " 1/2", "1/2 ", "1/2/3", "1.0/2", "99999999999999999999/2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_FAILS(vtr_shard_choose(bad[i], &alone, &s, &err), VTR_ERR_INVALID, "not I/N");
        CHECK(!strncmp(err.msg, "--shard ", 8));
    }
}

TEST(shard_from_the_job)
{
    vtr_error err;
    vtr_shard s;
    CHECK_OK(vtr_shard_choose(NULL, &alone, &s, &err));
    CHECK(s.index == 0 && s.count == 1 && !s.ranks);
    vtr_dist job = {.rank = 2, .size = 4};
    CHECK_OK(vtr_shard_choose(NULL, &job, &s, &err));
    CHECK(s.index == 2 && s.count == 4 && s.ranks);
    CHECK_FAILS(vtr_shard_choose("0/2", &job, &s, &err), VTR_ERR_INVALID,
                "--shard 0/2 under mpirun with 4 ranks: the ranks are the shards");
}

TEST(shares_cover_every_item_once)
{
    for (int count = 1; count <= 5; count++)
        for (int64_t n = 0; n <= 12; n++) {
            int64_t next = 0, taken = 0;
            for (int i = 0; i < count; i++) {
                vtr_shard s = {.index = i, .count = count};
                int64_t first, c;
                vtr_shard_range(&s, n, &first, &c);
                CHECK_EQ_INT(first, next); /* contiguous, in shard order */
                CHECK(c == n / count || c == n / count + 1);
                next += c;
                for (int64_t p = 0; p < n; p++)
                    taken += vtr_shard_takes(&s, p);
            }
            CHECK_EQ_INT(next, n);
            CHECK_EQ_INT(taken, n);
        }
    vtr_shard s = {.index = 1, .count = 3};
    CHECK(vtr_shard_takes(&s, 1) && vtr_shard_takes(&s, 4) && !vtr_shard_takes(&s, 3));
}

TEST(part_names)
{
    vtr_error err;
    char *out;
    vtr_shard s = {.index = 1, .count = 3}, back;
    CHECK_OK(vtr_shard_output(&s, "runs/ix/", &out, &err));
    CHECK_STR(out, "runs/ix.shard-1-of-3");
    size_t stem = 0;
    CHECK(vtr_shard_of_path(out, &back, &stem));
    CHECK(back.index == 1 && back.count == 3 && stem == strlen("runs/ix"));
    free(out);
    CHECK_OK(vtr_shard_output(&s, "-", &out, &err));
    CHECK(out == NULL); /* stdout: one process may write it */
    vtr_shard one = {.index = 0, .count = 1};
    CHECK_OK(vtr_shard_output(&one, "a.rec", &out, &err));
    CHECK_STR(out, "a.rec");
    free(out);
    vtr_shard rank = {.index = 0, .count = 2, .ranks = true};
    CHECK_FAILS(vtr_shard_output(&rank, NULL, &out, &err), VTR_ERR_INVALID,
                "stdout under mpirun with 2 ranks");
    CHECK(vtr_shard_of_path("x.shard-0-of-2/", &back, NULL) && back.index == 0);
    CHECK(vtr_shard_of_path("a.shard-1-of-2.shard-3-of-4", &back, &stem) && back.index == 3 &&
          stem == strlen("a.shard-1-of-2"));
    static const char *const not_parts[] = {"ix", "ix.shard-2-of-2", "ix.shard-1-of-2x",
                                            "ix.shard--1-of-2", "ix.shard-1-of-", "ix.shard-a-of-2",
                                            "ix.shard-1-of-2/x"};
    for (size_t i = 0; i < sizeof not_parts / sizeof *not_parts; i++)
        CHECK_MSG(!vtr_shard_of_path(not_parts[i], &back, NULL), "%s", not_parts[i]);
    char name[64];
    CHECK_STR(vtr_shard_program_name(&s, "vtr-index", name, sizeof name),
              "vtr-index (shard 1 of 3)");
    CHECK_STR(vtr_shard_program_name(&rank, "vtr-index", name, sizeof name),
              "vtr-index (rank 0 of 2)");
    CHECK_STR(vtr_shard_program_name(&one, "vtr-index", name, sizeof name), "vtr-index");
}

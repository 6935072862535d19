/* lib/dist.h: the job's collectives, and lib/sync_batchnorm.h over them. Alone (rank 0 of 1) in the unit-test run; under
 * mpirun (tests/t_train_mpi.sh runs `mpirun -np 3 build/tests/unit-tests dist_`) every
 * rank checks what it receives from the others. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/dist.h"
#include "lib/norm.h"
#include "lib/rng.h"
#include "lib/sync_batchnorm.h"

/* rank r's value i of the sum test: not exactly representable sums, so the order shows */
static float part(int r, int i)
{
    return 0.1f * (float)(r + 1) + 1e-3f * (float)i + (r % 2 ? 1e7f : 0.0f);
}

/* SyncBatchNorm: each rank holds its share of the rows of one (R,C) batch; forward and
 * backward give, on its rows, what vtr_batchnorm_forward / _backward give on the whole
 * batch in one process (to rounding), and the rank's weight and bias gradients summed over
 * the ranks are the whole batch's. */
static void check_sync_batchnorm(vtr_dist *d)
{
    enum { R = 23, C = 70 }; /* C over one column block */
    vtr_error err;
    float x[R * C], dy[R * C], w[C], bias[C];
    vtr_rng rng;
    vtr_rng_init(&rng, 5, 0);
    for (int i = 0; i < R * C; i++) {
        x[i] = 3.0f * vtr_rng_normal(&rng) + 1.5f;
        dy[i] = vtr_rng_normal(&rng);
    }
    for (int c = 0; c < C; c++) {
        w[c] = 1.0f + 0.1f * vtr_rng_normal(&rng);
        bias[c] = 0.1f * vtr_rng_normal(&rng);
    }
    /* one process, the whole batch */
    float y[R * C], mean[C], rstd[C], rm[C], rv[C], dx[R * C] = {0}, dw[C] = {0}, db[C] = {0};
    for (int c = 0; c < C; c++)
        rm[c] = 0.0f, rv[c] = 1.0f;
    vtr_batchnorm_forward(y, mean, rstd, rm, rv, x, w, bias, R, C, 0.1f, 1e-5f);
    vtr_batchnorm_backward(dx, dw, db, dy, x, w, mean, rstd, R, C);
    /* this rank's rows */
    int64_t first, n;
    vtr_dist_share(R, d->rank, d->size, &first, &n);
    size_t o = (size_t)first * C;
    float sy[R * C], smean[C], srstd[C], srm[C], srv[C], sdx[R * C] = {0}, sdw[C] = {0},
                                                         sdb[C] = {0};
    double scratch[2 * C];
    for (int c = 0; c < C; c++)
        srm[c] = 0.0f, srv[c] = 1.0f;
    CHECK_OK(vtr_sync_batchnorm_forward(d, VTR_DEVICE_CPU, sy, smean, srstd, srm, srv, x + o, w,
                                        bias, (int)n, C, R, 0.1f, 1e-5f, scratch, &err));
    CHECK_OK(vtr_sync_batchnorm_backward(d, VTR_DEVICE_CPU, sdx, sdw, sdb, dy + o, x + o, w, smean,
                                         srstd, (int)n, C, R, scratch, &err));
    CHECK_OK(vtr_dist_sum(d, sdw, C, &err));
    CHECK_OK(vtr_dist_sum(d, sdb, C, &err));
    for (int c = 0; c < C; c++) {
        CHECK_MSG(fabsf(smean[c] - mean[c]) <= 1e-6f && fabsf(srstd[c] - rstd[c]) <= 1e-6f &&
                      fabsf(srm[c] - rm[c]) <= 1e-6f && fabsf(srv[c] - rv[c]) <= 1e-5f,
                  "statistics of column %d", c);
        CHECK_MSG(fabsf(sdw[c] - dw[c]) <= 1e-4f && fabsf(sdb[c] - db[c]) <= 1e-4f,
                  "parameter gradients of column %d: %g %g, want %g %g", c, (double)sdw[c],
                  (double)sdb[c], (double)dw[c], (double)db[c]);
    }
    for (size_t i = 0; i < (size_t)n * C; i++)
        CHECK_MSG(fabsf(sy[i] - y[o + i]) <= 1e-5f && fabsf(sdx[i] - dx[o + i]) <= 1e-5f,
                  "element %zu of rank %d", i, d->rank);
}

TEST(dist_collectives)
{
    vtr_error err;
    vtr_dist d;
    int argc = 1;
    char *args[] = {"unit-tests", NULL}, **argv = args;
    CHECK_OK(vtr_dist_init(&d, &argc, &argv, &err));
    int N = d.size, r = d.rank;
    CHECK(N >= 1 && r >= 0 && r < N);

    /* shares: contiguous, in rank order, sizes differing by at most one */
    int64_t next = 0;
    for (int k = 0; k < 5; k++) {
        int64_t first, count;
        vtr_dist_share(11, k, 5, &first, &count);
        CHECK(first == next && (count == 2 || count == 3));
        next += count;
    }
    CHECK(next == 11);

    /* sums: exactly the rank-order sum, on every rank */
    enum { n = 1001 };
    float *x = malloc(sizeof(float) * n);
    CHECK(x);
    for (int i = 0; i < n; i++)
        x[i] = part(r, i);
    CHECK_OK(vtr_dist_sum(&d, x, n, &err));
    for (int i = 0; i < n; i++) {
        float want = part(0, i);
        for (int k = 1; k < N; k++)
            want += part(k, i);
        CHECK_MSG(x[i] == want, "element %d: %.9g, want %.9g", i, (double)x[i], (double)want);
    }
    free(x);
    double dsum[2] = {r + 0.5, 1.0};
    int64_t isum[1] = {(int64_t)1 << (40 + r % 3)};
    CHECK_OK(vtr_dist_sum_double(&d, dsum, 2, &err));
    CHECK_OK(vtr_dist_sum_int64(&d, isum, 1, &err));
    int64_t iwant = 0;
    for (int k = 0; k < N; k++)
        iwant += (int64_t)1 << (40 + k % 3);
    CHECK(dsum[0] == N * (N - 1) / 2.0 + 0.5 * N && dsum[1] == N && isum[0] == iwant);

    /* gathers of different sizes (rank k gives k + 1 bytes of k), also in place */
    size_t total = (size_t)N * (N + 1) / 2, mine = (size_t)r + 1, at = (size_t)r * (r + 1) / 2;
    unsigned char bytes[64], all[64 * 65 / 2];
    CHECK(N <= 64);
    memset(bytes, r, mine);
    CHECK_OK(vtr_dist_gather(&d, bytes, mine, all, &err));
    for (int k = 0, o = 0; k < N; o += k + 1, k++)
        for (int j = 0; j <= k; j++)
            CHECK(all[o + j] == k);
    memset(all, 0xff, total);
    memset(all + at, r, mine);
    CHECK_OK(vtr_dist_gather(&d, all + at, mine, all, &err));
    for (int k = 0, o = 0; k < N; o += k + 1, k++)
        for (int j = 0; j <= k; j++)
            CHECK(all[o + j] == k);

    /* broadcast from the last rank */
    int value = r == N - 1 ? 4242 : -1;
    CHECK_OK(vtr_dist_broadcast(&d, &value, sizeof value, N - 1, &err));
    CHECK(value == 4242);

    /* agreement: the last rank fails alone; every rank gets its status and message */
    vtr_status st = r == N - 1 ? vtr_fail(&err, VTR_ERR_IO, "cannot read shard.%d", r) : VTR_OK;
    st = vtr_dist_agree(&d, st, &err);
    char want[64];
    if (N > 1)
        snprintf(want, sizeof want, "rank %d: cannot read shard.%d", N - 1, N - 1);
    else
        snprintf(want, sizeof want, "cannot read shard.0");
    CHECK_MSG(st == VTR_ERR_IO && strcmp(err.msg, want) == 0, "got %d '%s'", (int)st, err.msg);
    CHECK(N == 1 || d.shared_failure); /* every rank's: the ranks can end together */
    CHECK(vtr_dist_agree(&d, VTR_OK, &err) == VTR_OK);
    CHECK(!d.shared_failure);
    /* a failure every rank meets alike is shared too, until the next collective */
    CHECK(vtr_dist_fail_alike(&d, VTR_ERR_INVALID) == VTR_ERR_INVALID && d.shared_failure);

    /* a flag of one rank stops them all */
    bool flag = r == N - 1;
    CHECK_OK(vtr_dist_any(&d, &flag, &err));
    CHECK(flag && !d.shared_failure);
    flag = false;
    CHECK_OK(vtr_dist_any(&d, &flag, &err));
    CHECK(!flag);

    /* the same bytes everywhere, or the first rank that differs named */
    CHECK_OK(vtr_dist_check_same(&d, "config", "abc", 3, &err));
    st = vtr_dist_check_same(&d, "config", r == N - 1 && N > 1 ? "abd" : "abc", 3, &err);
    if (N > 1) {
        snprintf(want, sizeof want, "rank %d has another config than rank 0", N - 1);
        CHECK_MSG(st == VTR_ERR_INVALID && strcmp(err.msg, want) == 0, "got '%s'", err.msg);
        CHECK(d.shared_failure); /* every rank compares every rank's bytes */
        st = vtr_dist_check_same(&d, "config", "abc", r == N - 1 ? 2 : 3, &err);
        CHECK(st == VTR_ERR_INVALID && d.shared_failure);
    } else {
        CHECK(st == VTR_OK);
    }
    check_sync_batchnorm(&d);
    vtr_dist_finalize(&d);
    CHECK(d.size == 1 && d.rank == 0);
}

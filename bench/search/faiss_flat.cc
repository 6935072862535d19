// FAISS's side of bench/search/faiss.sh: exact top-k by inner product with FAISS's
// IndexFlatIP over the same rows as vtr's exact search (the segments of the benchmark's
// embedding index, widened to float32: FAISS's flat index has no float16 storage).
//
//   faiss_flat DIR QUERIES.npy N K OUTDIR
//       Loads the index's rows into an IndexFlatIP (timed: "faiss_load_s"), then the first
//       N queries one at a time ("faiss_single_s T1 ...") and all queries at once, three
//       times ("faiss_batch_s T"); writes OUTDIR/faiss_single_rows.npy (N, K) and
//       OUTDIR/faiss_batch_rows.npy (Q, K), int64.
// Each search call is timed alone, as vtr's are (search_bench.c).
#include <faiss/IndexFlat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" { // vtr's headers, C
#include "index/embedding_index.h"
#include "lib/npy.h"
}

static double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static void die(const char *what, const vtr_error *err)
{
    std::fprintf(stderr, "faiss_flat: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    std::exit(1);
}

static void save(const char *dir, const char *name, int64_t rows, int64_t cols, int64_t *data)
{
    char path[4096];
    std::snprintf(path, sizeof path, "%s/%s", dir, name);
    vtr_tensor t = {};
    t.dtype = VTR_I64;
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.data = data;
    vtr_error err;
    if (vtr_npy_save(path, &t, 0, &err) != VTR_OK)
        die("saving results", &err);
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        std::fprintf(stderr, "usage: faiss_flat DIR QUERIES.npy N K OUTDIR\n");
        return 2;
    }
    int n_single = std::atoi(argv[3]);
    int64_t k = std::atoll(argv[4]);
    vtr_error err;
    vtr_embedding_index *ix;
    vtr_npy_file queries;
    if (vtr_embedding_index_open(argv[1], &ix, &err) != VTR_OK)
        die("opening the index", &err);
    if (vtr_npy_load(argv[2], &queries, &err) != VTR_OK)
        die("loading queries", &err);
    int64_t n = vtr_embedding_index_rows(ix), d = vtr_embedding_index_dim(ix);
    int64_t nq = queries.tensor.shape[0];
    const float *q = static_cast<const float *>(queries.tensor.data);
    if (queries.tensor.dtype != VTR_F32 || queries.tensor.ndim != 2 || queries.tensor.shape[1] != d)
        die("queries must be (Q, D) float32 with the index's D", nullptr);
    if (vtr_embedding_index_live_rows(ix) != n)
        die("the benchmark index has no tombstones", nullptr);

    // the rows, widened into the flat index's own storage (no second copy)
    double t0 = now();
    faiss::IndexFlatIP flat((faiss::Index::idx_t)d);
    flat.codes.resize((size_t)n * (size_t)d * sizeof(float));
    float *x = reinterpret_cast<float *>(flat.codes.data());
    for (int64_t r = 0; r < n; r++)
        if (vtr_embedding_index_row(ix, r, x + (size_t)r * (size_t)d, &err) != VTR_OK)
            die("reading rows", &err);
    flat.ntotal = n;
    std::printf("faiss_load_s %.3f\n", now() - t0);

    std::vector<float> dist((size_t)(nq * k));
    std::vector<faiss::Index::idx_t> labels((size_t)(nq * k));
    std::vector<int64_t> rows((size_t)(nq * k));
    if (n_single > nq)
        n_single = (int)nq;
    std::printf("faiss_single_s");
    for (int i = 0; i < n_single; i++) {
        double t1 = now();
        flat.search(1, q + (size_t)i * (size_t)d, k, dist.data() + i * k, labels.data() + i * k);
        std::printf(" %.5f", now() - t1);
    }
    std::printf("\n");
    for (int64_t i = 0; i < n_single * k; i++)
        rows[(size_t)i] = labels[(size_t)i];
    save(argv[5], "faiss_single_rows.npy", n_single, k, rows.data());
    for (int rep = 0; rep < 3; rep++) {
        double t1 = now();
        flat.search(nq, q, k, dist.data(), labels.data());
        std::printf("faiss_batch_s %.3f\n", now() - t1);
        std::fflush(stdout);
    }
    for (int64_t i = 0; i < nq * k; i++)
        rows[(size_t)i] = labels[(size_t)i];
    save(argv[5], "faiss_batch_rows.npy", nq, k, rows.data());
    vtr_npy_close(&queries);
    vtr_embedding_index_close(ix);
    return 0;
}

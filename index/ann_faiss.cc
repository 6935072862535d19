// FAISS behind a C interface (ann_faiss.h). The only C++ of vtr: every entry point catches
// what FAISS throws and turns it into a vtr_status.
#include "index/ann_faiss.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>

namespace {

const int hnsw_links = 32;            // M: links per node (2 M on level 0)
const int hnsw_ef_construction = 40;  // the candidate list while adding (FAISS's default)
const int pq_bits = 8;                // 256 centroids per sub-quantizer
const int64_t max_lists = 65536;
// Training sets below this many values (n x D) train on the calling thread alone: their
// k-means steps are too short for OpenMP's threads, which spin between them.
const double small_training = 1 << 24;

// Bytes of an IVF-PQ code: the largest divisor of D not above max(1, D / 32).
int64_t pq_subvectors(int64_t dim)
{
    int64_t m = std::max<int64_t>(1, dim / 32);
    while (dim % m != 0)
        m--;
    return m;
}

// Reads from a byte range (an mmap'ed file), as faiss::read_index wants it.
struct MemoryReader : faiss::IOReader {
    const unsigned char *p;
    size_t size, pos = 0;
    MemoryReader(const void *data, size_t n) : p(static_cast<const unsigned char *>(data)), size(n)
    {
        name = "memory";
    }
    size_t operator()(void *ptr, size_t item, size_t nitems) override
    {
        if (item == 0 || nitems == 0)
            return 0;
        size_t n = std::min(nitems, (size - pos) / item);
        std::memcpy(ptr, p + pos, n * item);
        pos += n * item;
        return n;
    }
};

// The clustering parameters: FAISS prints a warning to stderr when a k-means gets fewer
// than min_points_per_centroid rows per centroid (vtr_ann_train checks the real minimum,
// one row per centroid, itself); max_points (rows sampled per centroid) and the iterations
// bound the training time, which with FAISS's defaults (256 rows, 25 iterations) is
// minutes at D = 1024 on 2 cores, mostly the nearest-centroid search of each row.
void clustering(faiss::ClusteringParameters &cp, int max_points, int iterations)
{
    cp.min_points_per_centroid = 1;
    cp.max_points_per_centroid = max_points;
    cp.niter = iterations;
    cp.verbose = false;
}

} // namespace

struct vtr_ann {
    vtr_ann_kind kind;
    faiss::Index *index;       // owns its quantizer (own_fields)
    int64_t lists;             // IVF-PQ; 0 for HNSW
};

// Runs f, turning FAISS's and the allocator's exceptions into a status with context.
template <typename F>
static vtr_status guarded(vtr_error *err, vtr_status on_faiss, const char *what, F f)
{
    try {
        f();
        return VTR_OK;
    } catch (const std::bad_alloc &) {
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", what);
    } catch (const faiss::FaissException &e) {
        return vtr_fail(err, on_faiss, "%s: %s", what, e.msg.c_str());
    } catch (const std::exception &e) {
        return vtr_fail(err, on_faiss, "%s: %s", what, e.what());
    }
}

extern "C" {

int64_t vtr_ann_ivf_lists(int64_t n)
{
    int64_t lists = (int64_t)std::llround(std::sqrt((double)std::max<int64_t>(n, 0)));
    lists = std::min({lists, n / 39, max_lists});
    return std::max<int64_t>(lists, 1);
}

vtr_status vtr_ann_create(vtr_ann_kind kind, int64_t dim, int64_t lists, vtr_ann **out,
                          vtr_error *err)
{
    *out = nullptr;
    if (dim < 1 || dim > INT32_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "FAISS: dimension %lld",
                        (long long)dim);
    if (kind != VTR_ANN_HNSW && kind != VTR_ANN_IVFPQ)
        return vtr_fail(err, VTR_ERR_INVALID, "FAISS: unknown kind %d", (int)kind);
    if (kind == VTR_ANN_IVFPQ && (lists < 1 || lists > max_lists))
        return vtr_fail(err, VTR_ERR_INVALID, "FAISS: %lld lists is not in [1, %lld]",
                        (long long)lists, (long long)max_lists);
    vtr_ann *a = new (std::nothrow) vtr_ann{kind, nullptr, kind == VTR_ANN_IVFPQ ? lists : 0};
    if (!a)
        return vtr_fail(err, VTR_ERR_NOMEM, "FAISS: out of memory");
    vtr_status st = guarded(err, VTR_ERR_INVALID, "FAISS", [&] {
        if (kind == VTR_ANN_HNSW) {
            auto *h = new faiss::IndexHNSWSQ((int)dim, faiss::ScalarQuantizer::QT_8bit, hnsw_links);
            h->hnsw.efConstruction = hnsw_ef_construction;
            a->index = h;
        } else {
            auto *q = new faiss::IndexFlatL2((faiss::Index::idx_t)dim);
            faiss::IndexIVFPQ *ivf;
            try {
                ivf = new faiss::IndexIVFPQ(q, (size_t)dim, (size_t)lists,
                                            (size_t)pq_subvectors(dim), pq_bits);
            } catch (...) {
                delete q;
                throw;
            }
            ivf->own_fields = true;
            clustering(ivf->cp, 256, 10);   // the lists
            clustering(ivf->pq.cp, 64, 10); // the sub-quantizers' 256 centroids each
            a->index = ivf;
        }
    });
    if (st != VTR_OK) {
        delete a;
        return st;
    }
    *out = a;
    return VTR_OK;
}

vtr_status vtr_ann_train(vtr_ann *a, int64_t n, const float *x, vtr_error *err)
{
    int64_t need = a->kind == VTR_ANN_IVFPQ ? std::max<int64_t>(a->lists, 1 << pq_bits) : 1;
    if (n < need)
        return vtr_fail(err, VTR_ERR_INVALID, "%lld training rows; %s needs at least %lld", (long long)n,
                        a->kind == VTR_ANN_IVFPQ ? "IVF-PQ" : "HNSW", (long long)need);
    int threads = omp_get_max_threads();
    bool small = (double)n * (double)a->index->d < small_training;
    if (small)
        omp_set_num_threads(1);
    vtr_status st = guarded(err, VTR_ERR_INVALID, "FAISS training",
                            [&] { a->index->train((faiss::Index::idx_t)n, x); });
    if (small)
        omp_set_num_threads(threads);
    return st;
}

vtr_status vtr_ann_add(vtr_ann *a, int64_t n, const float *x, vtr_error *err)
{
    if (!a->index->is_trained)
        return vtr_fail(err, VTR_ERR_INVALID, "FAISS: adding rows before training");
    if (a->kind == VTR_ANN_HNSW && a->index->ntotal + n > INT32_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "FAISS: HNSW holds at most %d rows",
                        INT32_MAX);
    return guarded(err, VTR_ERR_INVALID, "FAISS add",
                   [&] { a->index->add((faiss::Index::idx_t)n, x); });
}

int64_t vtr_ann_size(const vtr_ann *a)
{
    return (int64_t)a->index->ntotal;
}

int64_t vtr_ann_dim(const vtr_ann *a)
{
    return (int64_t)a->index->d;
}

vtr_ann_kind vtr_ann_kind_of(const vtr_ann *a)
{
    return a->kind;
}

vtr_status vtr_ann_search(const vtr_ann *a, int64_t nq, const float *q, int64_t k, int effort,
                          int64_t *labels, vtr_error *err)
{
    if (k < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "FAISS: k = %lld", (long long)k);
    if (nq == 0)
        return VTR_OK;
    float *distances = new (std::nothrow) float[(size_t)(nq * k)];
    if (!distances)
        return vtr_fail(err, VTR_ERR_NOMEM, "FAISS: out of memory for %lld queries",
                        (long long)nq);
    static_assert(sizeof(faiss::Index::idx_t) == sizeof(int64_t), "FAISS labels are 64-bit");
    vtr_status st = guarded(err, VTR_ERR_INVALID, "FAISS search", [&] {
        auto *out = reinterpret_cast<faiss::Index::idx_t *>(labels);
        if (a->kind == VTR_ANN_HNSW) {
            faiss::SearchParametersHNSW p;
            p.efSearch = (int)std::max<int64_t>(effort > 0 ? effort : std::max<int64_t>(k, 64), k);
            a->index->search((faiss::Index::idx_t)nq, q, (faiss::Index::idx_t)k, distances, out, &p);
        } else {
            faiss::SearchParametersIVF p;
            p.nprobe = (size_t)std::min<int64_t>(
                effort > 0 ? effort : std::max<int64_t>(1, a->lists / 8), a->lists);
            a->index->search((faiss::Index::idx_t)nq, q, (faiss::Index::idx_t)k, distances, out, &p);
        }
    });
    delete[] distances;
    return st;
}

vtr_status vtr_ann_write(const vtr_ann *a, FILE *fp, vtr_error *err)
{
    vtr_status st = guarded(err, VTR_ERR_IO, "FAISS write_index", [&] {
        faiss::FileIOWriter w(fp);
        faiss::write_index(a->index, &w);
    });
    if (st == VTR_OK && ferror(fp))
        st = vtr_fail(err, VTR_ERR_IO, "FAISS write_index: a write failed");
    return st;
}

vtr_status vtr_ann_read(const void *data, size_t size, vtr_ann_kind kind, int64_t dim,
                        vtr_ann **out, vtr_error *err)
{
    *out = nullptr;
    faiss::Index *index = nullptr;
    MemoryReader r(data, size);
    vtr_status st = guarded(err, VTR_ERR_FORMAT, "FAISS read_index",
                            [&] { index = faiss::read_index(&r); });
    if (st != VTR_OK)
        return st;
    int64_t lists = 0;
    const char *why = nullptr;
    if (r.pos != size) {
        why = "trailing bytes after the FAISS index";
    } else if (index->d != dim) {
        why = "the FAISS index has another dimension";
    } else if (kind == VTR_ANN_HNSW) {
        auto *h = dynamic_cast<faiss::IndexHNSWSQ *>(index);
        if (!h)
            why = "the FAISS index is not HNSW-SQ";
        else if ((int64_t)h->hnsw.levels.size() != (int64_t)h->ntotal ||
                 !h->storage || h->storage->ntotal != h->ntotal)
            why = "the HNSW graph does not match its rows";
    } else if (kind == VTR_ANN_IVFPQ) {
        auto *ivf = dynamic_cast<faiss::IndexIVFPQ *>(index);
        if (!ivf)
            why = "the FAISS index is not IVF-PQ";
        else
            lists = (int64_t)ivf->nlist;
    } else {
        why = "unknown kind";
    }
    if (why) {
        delete index;
        return vtr_fail(err, VTR_ERR_FORMAT, "FAISS read_index: %s", why);
    }
    vtr_ann *a = new (std::nothrow) vtr_ann{kind, index, lists};
    if (!a) {
        delete index;
        return vtr_fail(err, VTR_ERR_NOMEM, "FAISS: out of memory");
    }
    *out = a;
    return VTR_OK;
}

void vtr_ann_free(vtr_ann *a)
{
    if (!a)
        return;
    delete a->index;
    delete a;
}

} // extern "C"

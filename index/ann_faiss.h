/* Approximate nearest neighbours through FAISS (Debian's libfaiss-dev, a static C++
 * library): the C interface of index/ann_faiss.cc, which holds all of vtr's C++. Used by
 * the approximate index (index/approx_index.h), which owns the file format, the mapping
 * of labels to index rows and the exact re-ranking; this layer only builds, searches and
 * (de)serializes a FAISS index.
 *
 * Vectors are float32, D values each, and are ranked by L2 distance: the embedding
 * index's rows are unit vectors, for which L2 order is inner-product order (||q - x||^2 =
 * ||q||^2 + 1 - 2 q.x). Labels are 0 .. size-1 in the order rows were added.
 *
 * Kinds:
 *   VTR_ANN_HNSW   HNSW graph (M = 32 links per node, efConstruction 40) over 8-bit scalar
 *                  quantized rows (D bytes per row): FAISS's IndexHNSWSQ.
 *   VTR_ANN_IVFPQ  inverted lists over `lists` k-means centroids, each row stored as a
 *                  product-quantizer code of the residual (D/32 bytes, 8 bits per
 *                  32-value sub-vector): FAISS's IndexIVFPQ.
 *
 * Errors: FAISS's exceptions become VTR_ERR_FORMAT (reading) or VTR_ERR_INVALID (other
 * calls) with FAISS's message ("FAISS read_index: ..."); std::bad_alloc becomes
 * VTR_ERR_NOMEM. Callers add which index and file. Nothing is printed:
 * the clustering is set up so that FAISS's warnings to stderr do not fire.
 *
 * Threads: search may run from several threads at once (its parameters travel with the
 * call); create, train, add, write and free from one thread. FAISS parallelizes training,
 * adding and batched searches itself with OpenMP.
 */
#ifndef VTR_ANN_FAISS_H
#define VTR_ANN_FAISS_H

#include <stdint.h>
#include <stdio.h>

#include "lib/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vtr_ann_kind {
    VTR_ANN_HNSW = 1,
    VTR_ANN_IVFPQ = 2,
} vtr_ann_kind;

typedef struct vtr_ann vtr_ann;

/* The number of inverted lists an IVF-PQ index over n rows gets: about sqrt(n), at least
 * 1, at most n / 39 (FAISS's k-means wants 39 training rows per centroid) and 65536. */
int64_t vtr_ann_ivf_lists(int64_t n);

/* An empty index of kind over D-dimensional vectors; lists: the inverted lists of IVF-PQ
 * (>= 1; ignored for HNSW). VTR_ERR_INVALID: an unknown kind, D < 1, lists < 1. */
vtr_status vtr_ann_create(vtr_ann_kind kind, int64_t dim, int64_t lists, vtr_ann **out,
                          vtr_error *err);

/* Trains a new index on n rows x (n, D): the scalar quantizer's ranges (HNSW), the
 * k-means centroids and the product quantizer's codebooks (IVF-PQ: n >= lists and n >=
 * 256 training rows, else VTR_ERR_INVALID). */
vtr_status vtr_ann_train(vtr_ann *a, int64_t n, const float *x, vtr_error *err);

/* Adds n rows x (n, D) after training; they get labels size .. size + n - 1. */
vtr_status vtr_ann_add(vtr_ann *a, int64_t n, const float *x, vtr_error *err);

/* Rows added so far. */
int64_t vtr_ann_size(const vtr_ann *a);
int64_t vtr_ann_dim(const vtr_ann *a);
vtr_ann_kind vtr_ann_kind_of(const vtr_ann *a);

/* The k nearest labels of each of nq queries q (nq, D): labels (nq, k), nearest first,
 * -1 past the rows found. effort: HNSW's efSearch (the candidate list of the graph walk,
 * raised to k when below), IVF-PQ's nprobe (lists scanned, at most the list count); <= 0
 * picks max(k, 64) and max(1, lists / 8). */
vtr_status vtr_ann_search(const vtr_ann *a, int64_t nq, const float *q, int64_t k, int effort,
                          int64_t *labels, vtr_error *err);

/* Writes a in FAISS's own serialization to fp (the caller owns fp and its position);
 * VTR_ERR_IO when a write fails. */
vtr_status vtr_ann_write(const vtr_ann *a, FILE *fp, vtr_error *err);

/* Reads an index of kind and dimension D from the size bytes at data (FAISS's
 * serialization, as vtr_ann_write wrote it). VTR_ERR_FORMAT when the bytes are not a
 * whole index of that kind and D (cut short, trailing bytes, another index type). */
vtr_status vtr_ann_read(const void *data, size_t size, vtr_ann_kind kind, int64_t dim,
                        vtr_ann **out, vtr_error *err);

/* Safe on NULL. */
void vtr_ann_free(vtr_ann *a);

#ifdef __cplusplus
}
#endif

#endif

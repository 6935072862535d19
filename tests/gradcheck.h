/* Test helpers for the nn ops: finite-difference gradient checks, random fills, and
 * comparisons with the PyTorch fixtures in tests/fixtures/nn/ (make_nn_fixtures.py).
 *
 * Failures go through test_fail (tests/check.h), naming the tensor and the element.
 */
#ifndef VTR_TESTS_GRADCHECK_H
#define VTR_TESTS_GRADCHECK_H

#include <stddef.h>

#include "lib/rng.h"

/* Central-difference step, error floor and pass threshold (see gradcheck). float32
 * rounding in the forward leaves up to ~1e-4 of absolute noise in a numeric derivative at
 * this step (more behind GPO's softmax at temperature 0.1), hence the floor: an element
 * whose gradient is wrong by more than ~3% of (its magnitude + 0.01) fails. */
#define GRADCHECK_EPS 1e-3
#define GRADCHECK_FLOOR 1e-2
#define GRADCHECK_TOL 3e-2

/* Parity threshold against PyTorch (REFERENCE.md: relative error under 1e-4). */
#define PARITY_TOL 1e-4

/* A scalar loss of the op under test, computed from the current inputs and parameters,
 * summed in double (e.g. gradcheck_dot of the op's output and a fixed upstream gradient). */
typedef double (*gradcheck_loss_fn)(void *ctx);

/* Compares analytic (n), the gradient of loss with respect to x (n), with central
 * differences: numeric = (loss(x_i + eps) - loss(x_i - eps)) / (2 eps), x_i restored
 * after. The error of an element is
 * |analytic - numeric| / (|analytic| + |numeric| + GRADCHECK_FLOOR);
 * the test fails if the largest exceeds GRADCHECK_TOL. Checks every element when
 * n <= max_checks, else max_checks elements spread evenly over x. Returns the largest
 * error. */
double gradcheck(const char *name, gradcheck_loss_fn loss, void *ctx, float *x,
                 const float *analytic, size_t n, size_t max_checks);

/* gradcheck of values (n) through values = scale * theta, the differences taken in theta:
 * a step of scale * GRADCHECK_EPS in values for the same float32 noise in the loss, against
 * scale * analytic. For ops whose loss over many rounded outputs is noisy next to small
 * gradients (a larger step, the same check). scale a power of two, so values are unchanged
 * after. Returns gradcheck's largest error. */
double gradcheck_scaled(const char *name, gradcheck_loss_fn loss, void *ctx, float *values,
                        const float *analytic, size_t n, size_t max_checks, float scale);

/* sum_i a[i] * b[i] in double */
double gradcheck_dot(const float *a, const float *b, size_t n);

/* Uniform in [lo, hi) from rng. */
void nn_fill_uniform(float *x, size_t n, float lo, float hi, vtr_rng *rng);

/* x (B,T,D) with every (b, d) column a shuffled grid, T <= 64: values distinct by at least
 * 0.15, so a finite-difference step never reorders a sort, max or k-max. */
void nn_fill_separated(float *x, int B, int T, int D, vtr_rng *rng);

/* max |x[i]| over n (0 when n = 0) */
double nn_max_abs(const float *x, size_t n);

/* malloc'd, zero-filled (test_fail when out of memory) */
float *nn_alloc_floats(size_t n);

/* Loads tests/fixtures/nn/<name>.npy (the directory can be overridden with the environment
 * variable VTR_NN_FIXTURES) into a malloc'd copy; the test fails unless the file exists,
 * is float32 (or int32 for nn_fixture_ints) and has n elements. */
float *nn_fixture_floats(const char *name, size_t n);
int *nn_fixture_ints(const char *name, size_t n);

/* The path of the fixture file <name> in that directory (a file other than .npy: a
 * safetensors fixture), in a static buffer that the next call overwrites. */
const char *nn_fixture_path(const char *name);

/* Relative error of got (n) against the fixture <name>: max|got - ref| / max(max|ref|, 1e-6)
 * over the whole tensor. Fails the test above PARITY_TOL; returns the error. With
 * VTR_TEST_VERBOSE set, prints it. */
double nn_parity_check(const char *name, const float *got, size_t n);

/* The same failing above tol (a tighter bar than PARITY_TOL). */
double nn_parity_check_at(const char *name, const float *got, size_t n, double tol);

/* The same against ref (n) in memory (a slice of a fixture, a tensor of a safetensors
 * fixture), relative to scale when scale > 0 (another tensor's, for one that is zero in
 * exact arithmetic), else to max|ref|, failing above tol; name labels the messages. */
double nn_parity_compare(const char *name, const float *got, const float *ref, size_t n,
                         double scale, double tol);

/* An op's result got (n) at another OpenMP thread count than ref's. Its own loops reduce in
 * a fixed order, so where BLAS keeps its own thread count the bytes must be the same; where
 * BLAS runs on OpenMP's threads (vtr_blas_threads_follow_openmp) its products may round
 * differently with the count: then within 1e-5 of max|ref|. Fails the test otherwise. */
void nn_check_across_threads(const char *name, const float *got, const float *ref, size_t n);

#endif

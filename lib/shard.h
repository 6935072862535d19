/* Sharded work: N processes (shards 0 .. N-1) split the items of one run, each takes a
 * fixed part of them and writes its own part of the output; vtr-merge joins the parts
 * into what one process would have written (docs/sharding.md).
 *
 * Which items shard I of N takes (the same on every run with the same input):
 *   - a list known before the work starts (a manifest's or a directory's files, a
 *     feature store's items, audio files), in the order the program visits it: the
 *     contiguous share I of vtr_dist_share, so that the parts, taken in shard order, hold
 *     the items in the order of a single run;
 *   - a stream (records, text lines), whose length nobody knows in advance: the items at
 *     positions p (0, 1, ... counted over the run's streamed items) with p % N == I.
 *
 * Where shard I of N writes: the program's output OUT (a file or a directory) becomes
 * OUT.shard-I-of-N, for every program and every kind of output; a run of one shard
 * writes OUT itself. stdout is refused when the shards are the ranks of one MPI job
 * (their items would interleave); a single process run with --shard may write it.
 *
 * The shard comes from --shard I/N or, without it, from the job (lib/dist.h): rank R of
 * an mpirun/srun job of N ranks is shard R of N; a process alone is shard 0 of 1.
 */
#ifndef VTR_SHARD_H
#define VTR_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dist.h"
#include "error.h"

/* The largest shard count --shard takes. */
#define VTR_SHARD_MAX 100000

typedef struct vtr_shard {
    int index, count; /* shard index of count: 0 <= index < count */
    bool ranks;       /* the shards are the ranks of an MPI job (not --shard) */
} vtr_shard;

/* The shard of this process: from option (the text of --shard, "I/N"; NULL when not
 * given), else from d's rank and size. VTR_ERR_INVALID, the message naming the option:
 * "--shard 1: not I/N (shard I of N shards, 0 <= I < N)", "--shard 3/2: shard index out of
 * range (0..1)", a count of 0 or above VTR_SHARD_MAX, and --shard in a job of several
 * ranks ("--shard 0/2 under mpirun with 2 ranks: the ranks are the shards; drop
 * --shard"). *out is shard 0 of 1 on failure. */
vtr_status vtr_shard_choose(const char *option, const vtr_dist *d, vtr_shard *out,
                            vtr_error *err);

/* The share of s of a list of n items: items [*first, *first + *count). */
void vtr_shard_range(const vtr_shard *s, int64_t n, int64_t *first, int64_t *count);

/* Whether s takes the streamed item at position (0, 1, ...). */
bool vtr_shard_takes(const vtr_shard *s, int64_t position);

/* Where s writes the output the user named path: *out (malloc'ed) is path itself for
 * one shard, else path (trailing '/' dropped) + ".shard-I-of-N". path NULL or "-" is
 * stdout: *out NULL, or VTR_ERR_INVALID ("stdout under mpirun with N ranks: ...") when
 * s->ranks and there are several shards. VTR_ERR_NOMEM. */
vtr_status vtr_shard_output(const vtr_shard *s, const char *path, char **out, vtr_error *err);

/* The shard of an output named by vtr_shard_output: the ".shard-I-of-N" at the end of
 * path (a trailing '/' ignored), with 0 <= I < N; *stem (may be NULL) gets the length of
 * the name before it (OUT). false (and *out, *stem untouched) when path does not end so. */
bool vtr_shard_of_path(const char *path, vtr_shard *out, size_t *stem);

/* A program's start of its share of the work: joins the job (vtr_dist_init into d),
 * chooses the shard (vtr_shard_choose into s) and names the output it writes
 * (vtr_shard_output of path into *out). Their errors; d is to be finalized in any case. */
vtr_status vtr_shard_start(const char *option, const char *path, vtr_dist *d, vtr_shard *s,
                           char **out, vtr_error *err);

/* The program's name for its messages: "PROGRAM (shard I of N)", or "PROGRAM (rank I
 * of N)" when the shards are ranks, so that every line of a shard names it; program
 * itself for one shard. Written into buf (size bytes); returns buf. */
const char *vtr_shard_program_name(const vtr_shard *s, const char *program, char *buf,
                                   size_t size);

#endif

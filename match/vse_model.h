/* VSE models (VSE++, VSE∞): a visual encoder and a caption encoder that map a set of
 * frame or region features and a caption into one embedding space, trained with the
 * hinge triplet loss over in-batch negatives (REFERENCE.md "VSE∞ model"; issue 5).
 *
 *   visual   x (B,T,F) -> fc: Linear(F -> E)
 *                         [+ mlp(x) when mlp_hidden M > 0: Linear(F -> M), BatchNorm1d(M)
 *                          over all B*T rows (padded rows included), ReLU, Linear(M -> E)]
 *            -> pooled over the real elements (img_pool) -> l2norm -> (B,E)
 *   text     ids (B,L) -> Embedding(V, W) -> BiGRU W -> E over the real tokens, the
 *            directions averaged -> pooled over the real tokens (txt_pool) -> l2norm -> (B,E)
 *   loss     S = img · capᵀ (B,B), caption b belongs to item b; hinge with margin in both
 *            directions (match/hinge_loss.h), all negatives or the hardest one per call;
 *            or ADOPT (match/adopt_loss.h): InfoNCE over the K hardest negatives, K from
 *            the batch (eq. 6), or every negative during a warm-up
 *
 * VSE∞ is GPO on both sides; VSE++ is mean pooling on both sides; any pooler goes on either
 * side (vtr_vse_pooler). Frame features (video: the reference Linear 2048 -> 1024) use
 * mlp_hidden 0; region features (image-text) use fc + MLP residual with M = E/2.
 *
 * Parameters live in one vtr_param_set (m->params) under the reference state_dict names,
 * in this order, so that a converted PyTorch checkpoint loads by name (lib/checkpoint.h):
 *     img_enc.fc.weight (E,F), img_enc.fc.bias (E)
 *     img_enc.mlp.layers.0.weight (M,F), .bias (M), img_enc.mlp.layers.1.weight (E,M),
 *       .bias (E), img_enc.mlp.bns.0.weight (M), .bias (M)          [only when M > 0]
 *     img_enc.gpool.gru.{weight_ih_l0 (3h,p), weight_hh_l0 (3h,h), bias_ih_l0 (3h),
 *       bias_hh_l0 (3h), the same _reverse}, img_enc.gpool.linear.weight (1,h)
 *                                        [only with GPO; p = gpo_pe, h = gpo_hidden]
 *     txt_enc.embed.weight (V,W)
 *     txt_enc.rnn.{weight_ih_l0 (3E,W), weight_hh_l0 (3E,E), bias_ih_l0 (3E), bias_hh_l0
 *       (3E), the same _reverse}
 *     img_enc.adpool.token.weight (1,E), img_enc.adpool.balance.weight (1,E)
 *                                        [only with ADPOOL, aggregate/adpool.h]
 *     txt_enc.gpool.* as img_enc.gpool.*                              [only with GPO]
 *     txt_enc.adpool.* as img_enc.adpool.*                            [only with ADPOOL]
 *   buffers (saved, not trained; only when M > 0):
 *     img_enc.mlp.bns.0.running_mean (M), .running_var (M) (F32), .num_batches_tracked (I64,
 *     0-dimensional)
 * Trainable entries come first in the set's data (lib/params.h), so an optimizer, a
 * gradient clipper or a checkpoint covers the whole model in one call.
 *
 * Memory: vtr_vse_model_init allocates everything a call needs once, for the largest batch
 * it will see (max_batch items, max_frames elements per set, max_words tokens per caption):
 * the parameter set and one activation arena. No call allocates after that.
 *
 * Threads: one model is used by one thread at a time (calls write the arena). The ops
 * inside use OpenMP and OpenBLAS threads (lib/nn.h: run with OMP_WAIT_POLICY=passive).
 * The text BiGRU runs its two directions at the same time on two OpenMP threads, each
 * with single-threaded BLAS (lib/blas_threads.h), when OpenMP offers 2 to 4 threads and
 * the BLAS thread count is adjustable (OpenBLAS); otherwise one after the other. That
 * changes the process-wide BLAS thread count for the BiGRU's duration (then restores it),
 * so no other thread may call BLAS during an encode or training call.
 * The same inputs, parameters and thread count give identical bytes.
 *
 * Size augmentation (REFERENCE.md; aggregate/gpo.h) is the caller's: it builds each
 * training batch from vtr_gpo_augment_set (frames kept) and vtr_gpo_augment_caption (tokens
 * masked, replaced, deleted), with one RNG stream per (epoch, item), before padding.
 * bench/train_step/train_step.c shows it. The model sees only the resulting padded batch.
 */
#ifndef VTR_VSE_MODEL_H
#define VTR_VSE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/device.h"
#include "lib/dist.h"
#include "lib/error.h"
#include "lib/nn.h"
#include "lib/params.h"
#include "lib/upload_stage.h"
#include "aggregate/set_prediction.h"
#include "match/hinge_loss.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How one side turns its (B,T,E) set of element embeddings into one (B,E) embedding. A new
 * pooler is a new value here plus a case in each switch of vse_model.c (its parameters,
 * workspace, forward, backward, FLOPs): the encoders and the training step do not change. */
typedef enum vtr_vse_pooler {
    VTR_VSE_POOL_MEAN, /* mean over the real elements (VSE++); no parameters */
    VTR_VSE_POOL_GPO,  /* GPO (VSE∞), aggregate/gpo.h; parameters <side>.gpool.* */
    VTR_VSE_POOL_ADPOOL, /* ADPOOL (VSE+2AD), aggregate/adpool.h; parameters <side>.adpool.* */
} vtr_vse_pooler;

/* Set embeddings (paper 002, REFERENCE.md "Other seeds"): with K > 0 each side turns its
 * element embeddings into a set of K unit vectors instead of one vector, and S is their
 * smooth-Chamfer similarity (match/set_similarity.h):
 *
 *   visual   x (B,T,F) -> fc [+ mlp] (B,T,E) -> set prediction module (aggregate/
 *            set_prediction.h; local features the element embeddings, global feature their
 *            pooled embedding (img_pool) before l2norm) -> (B,K,E) unit rows
 *   text     the BiGRU states (B,L,E) and their pooled embedding (txt_pool) likewise
 *   loss     the hinge (margin, negatives, reduction) on S = smooth-Chamfer(img, cap),
 *            + div_weight (L_div(img slots) + L_div(cap slots)) + mmd_weight L_mmd(img, cap)
 *
 * The set modules' parameters are img_enc.spm.* and txt_enc.spm.* (set_prediction.h's
 * names; C = D = E) after the rest; their learning rate is lr x lr_scale (the paper's
 * appendix: 0.1 on COCO). Against the paper: the text side's local features are the BiGRU
 * states (its code attends over the word embeddings), its global feature the pooled states
 * (the paper: the last hidden state); the visual global feature is the pooled element
 * embeddings (the paper: max or average pooled), GPO for VSE∞'s encoders. */
typedef struct vtr_vse_set_config {
    int K;           /* 0: one vector per item (VSE++, VSE∞, ADOPT); > 0: sets of K (4) */
    int T;           /* iterations of the aggregation block (4) */
    int Dh;          /* attention size (2048; 1024 on convolutional feature maps) */
    int H;           /* MLP hidden size (4 E) */
    float dropout;   /* in the set modules, training only (0.1) */
    float alpha;     /* smooth-Chamfer scale (16) */
    float div_weight, mmd_weight; /* regularisers (0.01, 0.01) */
    float lr_scale;  /* the set modules' learning rate factor, > 0 (1) */
} vtr_vse_set_config;

/* The training objective over S. */
typedef enum vtr_vse_loss {
    VTR_VSE_LOSS_HINGE, /* hinge triplet loss (VSE++, VSE∞), match/hinge_loss.h */
    VTR_VSE_LOSS_ADOPT, /* ADOPT (VSE+2AD), match/adopt_loss.h */
} vtr_vse_loss;

typedef struct vtr_vse_pool_config {
    vtr_vse_pooler kind;
    int gpo_pe;     /* GPO: positional-encoding size, even, >= 2 (reference 32) */
    int gpo_hidden; /* GPO: its BiGRU's hidden size, >= 1 (reference 32) */
} vtr_vse_pool_config;

typedef struct vtr_vse_config {
    int feature_dim;              /* F: visual feature size (2048) */
    int embed_size;               /* E: joint embedding size and text GRU hidden (1024) */
    int mlp_hidden;               /* M: hidden size of the visual MLP residual (512 = E/2 for
                                     region features); 0: fc only (frame features) */
    int vocab_size;               /* V: rows of the word embedding, ids 0 .. V-1 */
    int word_dim;                 /* W: word embedding size (300) */
    vtr_vse_pool_config img_pool; /* visual side pooler */
    vtr_vse_pool_config txt_pool; /* text side pooler */
    vtr_vse_loss loss;            /* the objective (hinge) */
    float margin;                 /* hinge margin (0.2) */
    vtr_reduction reduction;      /* loss over the batch: VTR_REDUCE_SUM for VSE++ / VSE∞,
                                     VTR_REDUCE_MEAN for ADOPT (the paper's 1/|B|) */
    float adopt_temperature;      /* ADOPT: tau (0.05), > 0 */
    int adopt_fixed_k;            /* ADOPT: 0: K from the batch (eq. 6); > 0: this many
                                     hardest negatives (at most B-1), an ablation */
    bool adopt_positive_in_denominator; /* ADOPT: the positive's term in the denominator
                                           (InfoNCE, true; match/adopt_loss.h) */
    vtr_vse_set_config set;       /* set embeddings (K > 0; hinge loss only) */
} vtr_vse_config;

/* Vectors per item or caption: K for set embeddings, else 1. Encoders write that many
 * (E) rows per input. */
int vtr_vse_vectors(const vtr_vse_config *cfg);

/* The paper's set settings (K 4, T 4, Dh 2048, H 4 E, dropout 0.1, alpha 16, regularisers
 * 0.01, lr_scale 1) for embed_size E. */
vtr_vse_set_config vtr_vse_set_config_default(int embed_size);

/* VSE∞ with the reference's sizes: F 2048, E 1024, M 512 (the region-feature branch; set
 * mlp_hidden = 0 for video frame features), W 300, GPO (32, 32) on both sides, hinge loss
 * with margin 0.2, summed; ADOPT's settings at the paper's (tau 0.05, K from the batch,
 * positive in the denominator) for a switch of loss; vocab_size as given. */
vtr_vse_config vtr_vse_config_infinity(int vocab_size);

/* Fails with VTR_ERR_INVALID naming the first field out of the ranges above. */
vtr_status vtr_vse_config_check(const vtr_vse_config *cfg, vtr_error *err);

/* "mean", "gpo" and "adpool" (config values); parse also accepts "avg". Unknown names fail
 * with VTR_ERR_INVALID "unknown pooler 'x' (expected mean, gpo or adpool)". */
const char *vtr_vse_pooler_name(vtr_vse_pooler kind);
vtr_status vtr_vse_pooler_parse(const char *name, vtr_vse_pooler *out, vtr_error *err);

/* One side's pooler with its parameters (pointers into the model's set; NULL for a
 * pooler without parameters) and its arena buffers. Internal to vse_model.c. */
typedef struct vtr_vse_pool {
    vtr_vse_pool_config cfg;
    float *params, *grads; /* GPO: vtr_gpo_param_count floats (aggregate/gpo.h layout);
                              ADPOOL: vtr_adpool_param_count (aggregate/adpool.h) */
    float *weights;        /* GPO: (max_batch, max_len) pooling coefficients; ADPOOL: the
                              rank weights theta (B,T) then the balance weights (B,2) of the
                              last call on B sets of padded length T */
    void *workspace;       /* GPO, ADPOOL: its workspace for (max_batch, max_len, E) */
} vtr_vse_pool;

/* A model: configuration, parameters, and the activation arena. Callers read cfg and
 * params (the optimizer, the clipper and checkpoints take &m->params), and, after
 * vtr_vse_train_step on B pairs, that step's img_emb (B,E), cap_emb (B,E) and sim (B,B)
 * (for logging or batch statistics). The other fields are the module's own. */
typedef struct vtr_vse_model {
    vtr_vse_config cfg;
    vtr_param_set params;
    int max_batch, max_frames, max_words;
    vtr_device device;        /* where the arena and the pointers below live, and the ops run */
    /* VTR_DEVICE_CUDA: the set's values (n_data floats) and gradients (n_trainable) on the
     * GPU, one allocation at dev_data; the pointers below point there. NULL on the CPU,
     * where they point into params. */
    float *dev_data, *dev_grad;

    /* parameters and gradients, resolved once (NULL where absent) */
    float *fc_w, *fc_b, *mlp0_w, *mlp0_b, *mlp1_w, *mlp1_b, *bn_w, *bn_b;
    float *fc_dw, *fc_db, *mlp0_dw, *mlp0_db, *mlp1_dw, *mlp1_db, *bn_dw, *bn_db;
    float *bn_running_mean, *bn_running_var;
    int64_t *bn_batches_tracked;
    float *embed_w, *embed_dw, *rnn, *drnn;
    vtr_vse_pool img_pool, txt_pool;

    /* activations: one allocation (arena), carved at init; shapes for the largest batch,
     * R = max_batch * max_frames visual rows, Q = max_batch * max_words tokens */
    void *arena;
    float *img_rows;          /* (R,F) real rows of the input, packed (mlp_hidden 0; the CPU) */
    float *fc_rows;           /* (R,E) fc of the packed rows; their gradient in backward */
    float *mlp_a0;            /* (R,M) Linear 0 output (BatchNorm input) */
    float *mlp_a1;            /* (R,M) ReLU(BatchNorm(a0)) */
    float *bn_mean, *bn_rstd; /* (M) batch statistics */
    double *bn_sums;          /* (2 M) SyncBatchNorm's column sums (data parallel) */
    float *img_feat;          /* (R,E) element embeddings, the pooler's input */
    float *img_pooled;        /* (B,E) */
    float *img_emb;           /* (B,E) l2-normalized */
    float *img_norm;          /* (B) */
    float *word_emb;          /* (Q,W) */
    float *word_rev;          /* (Q,W) each caption's word embeddings in reverse order */
    void *rnn_workspace[2];   /* the workspaces of the text GRU's two directions */
    float *rnn_rev;           /* (Q,E) the reverse direction's output (reverse order); in
                                 backward, its output gradient */
    float *cap_feat;          /* (Q,E) BiGRU output, averaged */
    float *cap_pooled;        /* (B,E) */
    float *cap_emb;           /* (B,E) l2-normalized */
    float *cap_norm;          /* (B) */
    float *sim;               /* (B,B) S */
    float *loss;              /* (1) the last step's loss */
    int *adopt_k;             /* (1) ADOPT's K of the last step, just after loss */
    /* VTR_DEVICE_CUDA: a call's inputs on their way to the GPU (NULL on the CPU, where the
     * ops read the caller's buffers): VTR_VSE_STAGE_SLOTS slots of lib/upload_stage.h,
     * each holding the sets' and the captions' lengths (B each), the ids (Q) and, at
     * stage_frames bytes in, the frames: (R,F) padded with an MLP, else the real rows
     * packed. Slots 0 and 1 are vtr_vse_stage_batch's, the last one each call's own. */
    vtr_cuda_stage *stage;
    size_t stage_ids, stage_frames;
    /* set embeddings (K > 0; else NULL): per side (0 visual, 1 text) the module's
     * parameters (a flat block of the set), its sets and slots (B,K,E), workspace, and
     * their gradients */
    vtr_set_prediction_config spm;
    float *spm_w[2], *spm_dw[2];
    float *set[2], *slots_n[2], *dset[2], *dslots_n[2];
    void *spm_workspace[2];
    void *sim_scratch;        /* smooth-Chamfer's and MMD's scratch */
    float *set_loss;          /* (4) the step's hinge, L_div of each side and L_mmd */
    float set_terms[3];       /* the last step's hinge, L_div and L_mmd (unweighted) */
    int negatives;            /* negatives per query of the last training step: B-1 (all),
                                 1 (hardest), or ADOPT's K */
    /* backward: the gradients of the buffers above, (B,B), (B,E), (R,E), (Q,E), (Q,W);
     * dmlp two (R,M) buffers the MLP's backward alternates between; dword_rev the reverse
     * direction's input gradient (reverse order); scratch shared by the poolers' and the
     * forward GRU direction's backward, rnn_scratch the reverse direction's (which runs
     * beside the forward's) */
    float *dsim;
    float *dimg_emb, *dcap_emb, *dimg_pooled, *dcap_pooled;
    float *dimg_feat;
    float *dmlp[2];
    float *dcap_feat;
    float *dword_emb, *dword_rev;
    void *scratch, *rnn_scratch;
} vtr_vse_model;

/* Adds the parameter entries of a model of cfg (names, shapes; not finalized, nothing
 * allocated) to ps: what vtr_vse_model_init builds, for checking a checkpoint's tensors
 * against a config before anything is allocated. Fails as vtr_param_set_add does. */
vtr_status vtr_vse_model_add_params(vtr_param_set *ps, const vtr_vse_config *cfg, vtr_error *err);

/* Builds the model for cfg (checked) and batches of at most max_batch items, max_frames
 * set elements and max_words tokens (all >= 1): the parameter set, finalized with every
 * value zero (call vtr_vse_init_params or load a checkpoint), and the arena. Fails with
 * VTR_ERR_INVALID (config or sizes), VTR_ERR_NOMEM; on failure m is zeroed. Release with
 * vtr_vse_model_free. */
vtr_status vtr_vse_model_init(vtr_vse_model *m, const vtr_vse_config *cfg, int max_batch,
                              int max_frames, int max_words, vtr_error *err);

/* vtr_vse_model_init on a device: VTR_DEVICE_CPU is vtr_vse_model_init; VTR_DEVICE_CUDA
 * keeps the arena and a copy of the parameters and their gradients on the GPU (the current
 * one: vtr_cuda_init), where every op of a call runs; m->params stays on the host, for
 * initialization, checkpoints and the host optimizer, and the two copies meet only in
 * vtr_vse_params_to_device and vtr_vse_params_to_host. Every configuration runs on the
 * GPU, data-parallel steps too (lib/dist_device.h). No GPU, or too little memory for the batch:
 * VTR_ERR_DEVICE saying so. */
vtr_status vtr_vse_model_init_on(vtr_vse_model *m, const vtr_vse_config *cfg, vtr_device device,
                                 int max_batch, int max_frames, int max_words, vtr_error *err);

/* On VTR_DEVICE_CUDA: params.data -> the GPU's values (after vtr_vse_init_params, loading
 * a checkpoint, or a host optimizer step), and the GPU's values -> params.data (before
 * saving), with grads also its gradients -> params.grad (to read them). Nothing to do on
 * the CPU. Fail with VTR_ERR_DEVICE (CUDA's message, which may come from an op queued
 * earlier). */
vtr_status vtr_vse_params_to_device(vtr_vse_model *m, vtr_error *err);
vtr_status vtr_vse_params_to_host(vtr_vse_model *m, bool grads, vtr_error *err);

/* Zeroes the gradients where the steps accumulate them (the GPU's on VTR_DEVICE_CUDA,
 * else params.grad). */
vtr_status vtr_vse_zero_grad(vtr_vse_model *m, vtr_error *err);

/* Frees the parameters and the arena; leaves m zeroed. Safe on a zeroed or freed model. */
void vtr_vse_model_free(vtr_vse_model *m);

/* The reference initialization, drawn from lib/rng.h streams of seed (tensor i of the set,
 * in the order above, from stream i): fc Xavier-uniform, bias 0; the word embedding
 * uniform(-0.1, 0.1); PyTorch's defaults elsewhere: other Linear weights kaiming-uniform
 * (a = sqrt 5), i.e. uniform(±1/sqrt(fan_in)), their biases uniform(±1/sqrt(fan_in)); GRU
 * tensors uniform(±1/sqrt(hidden)); BatchNorm weight 1, bias 0, running mean 0, running
 * var 1, num_batches_tracked 0. Gradients are zeroed. The same seed gives the same bytes. */
void vtr_vse_init_params(vtr_vse_model *m, uint64_t seed);

/* Visual embeddings: frames (B,T,F) with lengths (B) -> out (B,E), l2-normalized; with
 * set embeddings out (B,K,E), unit rows (the set modules in evaluation mode).
 * 1 <= B <= max_batch, 1 <= T <= max_frames, 1 <= lengths[b] <= T. Padded rows must be
 * zero, as the reference pads: with mlp_hidden > 0 they enter BatchNorm's statistics in
 * training mode. train: BatchNorm uses the batch statistics and updates running_mean,
 * running_var and num_batches_tracked (PyTorch's train(); B*T >= 2); otherwise the running
 * statistics (eval()). Without an MLP the mode changes nothing. Fails with VTR_ERR_INVALID
 * naming the bad size or item. Inputs and out are host memory on either device. */
vtr_status vtr_vse_encode_images(vtr_vse_model *m, float *out, const float *frames,
                                 const int *lengths, int B, int T, bool train, vtr_error *err);

/* Caption embeddings: ids (B,L) with lengths (B) -> out (B,E), l2-normalized; with set
 * embeddings out (B,K,E).
 * 1 <= B <= max_batch, 1 <= L <= max_words, 1 <= lengths[b] <= L, real ids in 0 .. V-1
 * (padded ids are not read). Fails with VTR_ERR_INVALID naming the bad size, item or token.
 * Inputs and out are host memory on either device. */
vtr_status vtr_vse_encode_captions(vtr_vse_model *m, float *out, const int *ids, const int *lengths,
                                   int B, int L, vtr_error *err);

/* A training batch: item b and caption b are a positive pair. */
typedef struct vtr_vse_batch {
    int B;                      /* pairs, 2 .. max_batch */
    int T;                      /* padded set length, 1 .. max_frames */
    const float *frames;        /* (B,T,F), padded rows zero */
    const int *frame_lengths;   /* (B) */
    int L;                      /* padded caption length, 1 .. max_words */
    const int *ids;             /* (B,L) */
    const int *caption_lengths; /* (B) */
    uint64_t seed;              /* set embeddings' dropout: streams (seed, 8 step + site) */
    int64_t step;
    /* Data parallel (lib/dist.h): NULL, or the job whose ranks each hold a share of one
     * global batch of B_global pairs: this batch is its pairs first .. first+B-1, padded to
     * the global batch's T and L. The loss is the global batch's (every rank gathers the
     * embeddings of all ranks, computes it whole, and takes its rows' gradients), dropout
     * draws what one process would for these pairs, and BatchNorm's statistics are the
     * global batch's (lib/sync_batchnorm.h). The parameter gradients accumulated are this
     * rank's share: summed over the ranks (vtr_dist_sum_on) they are one process's. On a GPU
     * the exchanges go through host memory (lib/dist_device.h). */
    vtr_dist *dist;
    int first, B_global;
    /* 0, or k + 1 when vtr_vse_stage_batch has copied this batch's inputs into slot k: the
     * step then reads them there (the GPU only) */
    int staged;
} vtr_vse_batch;

/* This rank's part of the global batch `global` for data-parallel training on dist
 * (lib/dist.h; dist->size > 1): its pairs first .. first+B-1 by vtr_dist_share, with
 * global's T and L (the padding every rank shares), and dist, first and B_global set. The
 * pointers point into global's buffers (nothing is copied); global->B is the global batch
 * size. */
vtr_vse_batch vtr_vse_batch_share(const vtr_vse_model *m, const vtr_vse_batch *global,
                                  vtr_dist *dist);

/* The GPU's stage slots (vtr_vse_model.stage): two for batches staged ahead, one for the
 * calls that bring their own inputs. */
#define VTR_VSE_STAGE_SLOTS 3

/* Starts copying a training batch's inputs (lengths, ids, frames) to the GPU while the
 * model computes something else: on the GPU, writes them into slot (0 or 1) of the stage,
 * queues their copy on the stage's stream and sets batch->staged = slot + 1; on the CPU it
 * does nothing. It may run on another thread than the model's other calls, at the same
 * time, but not while a step reads the same slot; it waits only for the slot's previous
 * copy. The step that takes the batch waits on the GPU (not on the host) for the copy.
 * VTR_ERR_INVALID for a batch the step would refuse (before anything is copied) or a slot
 * outside 0..1; VTR_ERR_DEVICE. */
vtr_status vtr_vse_stage_batch(vtr_vse_model *m, int slot, vtr_vse_batch *batch, vtr_error *err);

/* One training step's forward and backward (with batch->dist, this rank's part of it):
 * both encoders in training mode, S, the loss
 * (cfg.loss) with the given negatives (VTR_HINGE_ALL_NEGATIVES for the VSE∞ first-epoch
 * warm-up, VTR_HINGE_HARDEST_NEGATIVE after; with ADOPT, ALL is InfoNCE over every
 * negative, K = B-1, and HARDEST over the K hardest, K by eq. 6 or adopt_fixed_k; the K
 * used is left in m->negatives), and the backward pass, which ACCUMULATES into
 * the gradients (m->params.grad; on the GPU, m->dev_grad: zero them first with
 * vtr_vse_zero_grad; lib/nn.h). *loss gets the loss (on the GPU, the call's one wait).
 * BatchNorm's running statistics and num_batches_tracked advance as in PyTorch.
 * The caller then clips (vtr_clip_grad_norm) and steps the optimizer. The input buffers
 * (host memory on either device) are not kept after the call; a staged batch's inputs are
 * read from its slot (vtr_vse_stage_batch), the others' copied through the model's own. Fails with
 * VTR_ERR_INVALID as the encoders do (before anything is changed); data parallel, with lib/dist.h's
 * errors; on the GPU, VTR_ERR_DEVICE. After the call, img_emb, cap_emb (or the sets) and
 * sim hold the global batch's (on the model's device). */
vtr_status vtr_vse_train_step(vtr_vse_model *m, const vtr_vse_batch *batch,
                              vtr_hinge_negatives negatives, float *loss, vtr_error *err);

/* The matrix-product FLOPs (2 per multiply-add) of vtr_vse_train_step on this batch as
 * it performs them: every CBLAS call of the forward and the backward. All of them run over
 * real (unpadded) rows, except with an MLP (fc and the MLP over all B*T rows, as
 * BatchNorm's statistics need) and GPO's scorer. Elementwise work, sorts and reductions
 * are not counted. For benchmarks: FLOPs / time against the machine's sgemm peak. */
double vtr_vse_train_step_flops(const vtr_vse_model *m, const vtr_vse_batch *batch);

#ifdef __cplusplus
}
#endif

#endif

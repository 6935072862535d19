/* HGR and HGR∞ matching models (REFERENCE.md "HGR (hierarchical graph reasoning) and
 * HGR∞"; the reference's RoleGraphMatchModel of t2vretrieval/models/mlmatch.py):
 *
 *   video   frames x (B,T,F), T <= 20 (vtr_hgr_sample_frames picks them) ->
 *           level k = Dropout(Linear_k(x)) (B,T,E), k = 0 (event), 1 (action), 2 (entity);
 *           global = pooled level 0 over the real frames (attention pooling for HGR, GPO for
 *           HGR∞) (B,E); levels 1 and 2 are the per-frame verb- and noun-level embeddings
 *   text    ids (B,L) -> Embedding(V, W) -> Dropout -> BiGRU W -> E, directions averaged,
 *           h (B,L,E), 0 at padded words (match/caption_bigru.h);
 *           root = pooled h over the real words (attention pooling / GPO);
 *           verb n = max of h over span n * role_embedding[role] (aggregate/span_pool.h),
 *           noun n likewise; one attention-GCN layer (lib/graph_attention.h, F = E/2) over
 *           the nodes [root, NV verbs, NN nouns] with the caption's edges gives
 *           sent (B,E), verbs (B,NV,E), nouns (B,NN,E)
 *   scores  global = cosine(video global, sent) (B,B); verb and noun levels by
 *           match/phrase_attention.h over the first n_verbs / n_nouns phrases (n = the
 *           count of non-empty spans, as the reference's sequence_mask of it); fused =
 *           their mean (match/hgr_score.h)
 *   loss    hinge on the fused score, margin, hardest negative (the reference; all
 *           negatives when the caller asks), both directions, averaged over the batch
 *           (match/hinge_loss.h, VTR_REDUCE_MEAN). The reference trains with Adam
 *           (lr 1e-4) without gradient clipping.
 *
 * Cosines: the global level l2-normalizes both sides (lib/norm.h, x / (|x| + 1e-8)) and
 * takes dot products; the reference divides by sqrt(|x|^2 + 1e-18): the two differ by a
 * relative 1e-8 / |x|.
 *
 * Parameters live in one vtr_param_set (m->params) under the reference's checkpoint names
 * (`<submodule>.<state_dict name>`), in this order:
 *     video_encoder.level_embeds.{0,1,2}.weight (E,F), .bias (E)
 *     video_encoder.ft_attn.weight (1,E), .bias (1)             [HGR]
 *     video_encoder.gpool.gru.* , video_encoder.gpool.linear.weight   [HGR∞; aggregate/gpo.h]
 *     text_encoder.embedding.we.weight (V,W)
 *     text_encoder.rnn.{weight_ih_l0 (3E,W), weight_hh_l0 (3E,E), bias_ih_l0, bias_hh_l0
 *       (3E), the same _reverse}
 *     text_encoder.ft_attn.weight (1,E), .bias (1)              [HGR]
 *     text_encoder.gpool.*                                     [HGR∞]
 *     text_encoder.role_embedding.weight (R,E)
 *     text_encoder.gcn.layers.0.<vtr_attn_gcn_param_name> (lib/graph_attention.h, F = E/2)
 * All are trainable; an optimizer or a checkpoint covers the model in one call.
 *
 * Dropout (training mode only): the three video levels (p video_dropout), the word
 * embeddings (p text_dropout) and the GCN's context (p gcn_dropout), each drawn from
 * (seed, stream) by lib/activation.h's dropout, stream = 8 * step + site (sites 0-2 the
 * levels, 3 the words, 4 the GCN). The encoders and the block scorer use no dropout.
 *
 * Memory: vtr_hgr_model_init allocates the parameters and one activation arena for the
 * largest batch (max_batch videos and captions, max_frames, max_words); no call allocates
 * after that. Threads: one model is used by one thread at a time; the ops use OpenMP and
 * OpenBLAS (lib/nn.h; the BiGRU changes BLAS's thread count for its duration,
 * caption_bigru.h). The same inputs, parameters, seeds and thread count give identical
 * bytes.
 */
#ifndef VTR_HGR_MODEL_H
#define VTR_HGR_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/device.h"
#include "lib/dist.h"
#include "lib/error.h"
#include "lib/nn.h"
#include "lib/params.h"
#include "lib/upload_stage.h"
#include "match/caption_bigru.h"
#include "match/hinge_loss.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_HGR_MAX_FRAMES 20 /* frames per video in the reference */
#define VTR_HGR_MAX_WORDS 30  /* words per caption in the reference */
#define VTR_HGR_NUM_ROLES 16
#define VTR_HGR_NUM_VERBS 4
#define VTR_HGR_NUM_NOUNS 6

/* The global level's pooling, frame side and word side (root node) alike. */
typedef enum vtr_hgr_global_pool {
    VTR_HGR_POOL_ATTENTION, /* HGR: softmax(Linear(E -> 1)) over the real elements */
    VTR_HGR_POOL_GPO,       /* HGR∞: GPO (aggregate/gpo.h) */
} vtr_hgr_global_pool;

typedef struct vtr_hgr_config {
    int feature_dim; /* F (2048) */
    int embed_size;  /* E (1024), also the BiGRU's hidden size; even (the GCN's F = E/2) */
    int vocab_size;  /* V */
    int word_dim;    /* W (300) */
    int num_roles;   /* R (16) */
    int num_verbs;   /* NV (4) */
    int num_nouns;   /* NN (6) */
    vtr_hgr_global_pool global_pool;
    int gpo_pe, gpo_hidden; /* GPO sizes (32, 32), HGR∞ only */
    float video_dropout;    /* 0.2, in [0, 1) */
    float text_dropout;     /* 0.2 */
    float gcn_dropout;      /* 0.5 */
    float margin;           /* 0.2 */
    float sigma;            /* phrase attention's softmax scale (4) */
} vtr_hgr_config;

/* The released hyper-parameters (prepare_mlmatch_configs.py) for the given pooling: F 2048,
 * E 1024, W 300, 16 roles, 4 verbs, 6 nouns, dropouts 0.2 / 0.2 / 0.5, margin 0.2, sigma 4,
 * GPO (32, 32). */
vtr_hgr_config vtr_hgr_config_default(int vocab_size, vtr_hgr_global_pool pool);

/* Fails with VTR_ERR_INVALID naming the first field out of range. */
vtr_status vtr_hgr_config_check(const vtr_hgr_config *cfg, vtr_error *err);

/* The reference's frame selection for a video of n >= 1 frames: all of them when n <=
 * max_frames, else the max_frames frames round(linspace(0, n-1, max_frames)) (numpy's
 * linspace and round-half-to-even). Writes the indices to index (max_frames) and returns how
 * many. */
int vtr_hgr_sample_frames(int *index, int n, int max_frames);

/* A batch of captions with their role graphs (text/role_graph gives the arrays). */
typedef struct vtr_hgr_captions {
    int B, L;                  /* captions, padded length */
    const int *ids;            /* (B,L) word ids, real ones in 0 .. V-1 */
    const int *lengths;        /* (B) 1 .. L */
    const uint8_t *verb_masks; /* (B,NV,L) nonzero = word in the verb's span */
    const uint8_t *noun_masks; /* (B,NN,L) */
    const int *node_roles;     /* (B,NV+NN) role ids 0 .. R-1 of the verb then noun nodes */
    const float *rel_edges;    /* (B,N,N), N = 1+NV+NN: nonzero = edge from node i to j */
} vtr_hgr_captions;

/* A training batch: video b and caption b are a positive pair (captions.B == B). */
typedef struct vtr_hgr_batch {
    int B, T;                 /* pairs (2 .. max_batch), padded frames (1 .. max_frames) */
    const float *frames;      /* (B,T,F) */
    const int *frame_lengths; /* (B) */
    vtr_hgr_captions captions;
    /* Data parallel (lib/dist.h), as match/vse_model.h's vtr_vse_batch: NULL, or this batch
     * is pairs first .. first+B-1 of a global batch of B_global pairs spread over dist's
     * ranks, padded to its T and L; frame_lengths_global (B_global) are the global batch's.
     * The fused score and the loss are the global batch's (every rank gathers the others'
     * encodings); dropout draws what one process would for these pairs; the gradients are
     * this rank's share, to be summed over the ranks. */
    vtr_dist *dist;
    int first, B_global;
    const int *frame_lengths_global;
} vtr_hgr_batch;

/* One side's global pooler: parameters (pointers into the set) and arena buffers. */
typedef struct vtr_hgr_pool {
    float *params, *grads; /* attention: weight (E) then bias (1); GPO: its flat block */
    float *weights;        /* (max_batch, max_len) pooling coefficients */
    void *workspace;       /* GPO's workspace */
} vtr_hgr_pool;

/* A model. Callers read cfg, params and, after a training step on B pairs, the scores
 * (B,B) of that step: s_global, s_verb, s_noun, s_fused (row = video, column = caption; on
 * the model's device). The rest is the module's own. */
typedef struct vtr_hgr_model {
    vtr_hgr_config cfg;
    vtr_param_set params;
    int max_batch, max_frames, max_words;
    vtr_device device; /* where the arena and the pointers below live, and the ops run */
    /* VTR_DEVICE_CUDA: the set's values and gradients on the GPU, one allocation at
     * dev_data (the pointers below point there); a call's inputs pass through the stage's
     * one slot (lib/upload_stage.h); host_scratch is vtr_hgr_init_params's QR. NULL on the
     * CPU, where the pointers point into params and the ops read the caller's buffers. */
    float *dev_data, *dev_grad;
    vtr_cuda_stage *stage;
    double *host_scratch;

    float *level_w[3], *level_b[3], *level_dw[3], *level_db[3];
    float *embed_w, *embed_dw, *rnn, *drnn, *role_w, *drole_w, *gcn, *dgcn;
    vtr_hgr_pool vid_pool, txt_pool;

    /* activations (arena), for the largest batch: R = max_batch * max_frames frame rows,
     * Q = max_batch * max_words word rows, N = 1 + NV + NN nodes */
    void *arena;
    float *vid_rows;     /* (R,F) real frames, packed */
    float *rows[2];      /* (R,E) packed level rows (forward), their gradients (backward) */
    float *vid_level[3]; /* (B,T,E) the levels after dropout, 0 at padded frames */
    float *vid_glob, *vid_glob_n, *vid_glob_norm; /* (B,E), (B,E), (B) */
    float *word_emb;                              /* (Q,W) after dropout */
    vtr_caption_bigru bigru;        /* the BiGRU's buffers; its scratch[0] is `scratch` */
    float *cap_feat;                /* (Q,E) */
    int *verb_roles, *noun_roles;   /* (B,NV), (B,NN) */
    int *verb_argmax, *noun_argmax; /* (B,NV,E), (B,NN,E) */
    float *nodes, *gcn_out;         /* (B,N,E) the GCN's input and output */
    void *gcn_workspace;
    float *sent, *sent_n, *sent_norm;            /* (B,E), (B,E), (B) */
    float *verbs, *nouns;                        /* (B,NV,E), (B,NN,E) */
    int *n_verbs, *n_nouns;                      /* (B) */
    int *global_counts; /* GPU, data parallel: the global batch's frame lengths, n_verbs, n_nouns */
    float *s_global, *s_verb, *s_noun, *s_fused; /* (B,B) */
    float *loss;                                 /* (1) the last step's */
    void *pa_workspace[2];                       /* phrase attention: verb level, noun level */
    /* backward */
    float *ds_fused, *ds_global, *ds_verb, *ds_noun;
    float *dvid_glob_n, *dvid_glob, *dsent_n, *dsent;
    float *dvid_level[3];
    float *dverbs, *dnouns, *dgcn_out, *dnodes, *dcap_feat, *dword[2];
    void *scratch; /* backward scratch shared by the ops */
} vtr_hgr_model;

/* Adds the parameter entries of a model of cfg (not finalized, nothing allocated) to ps,
 * as vtr_vse_model_add_params does for VSE. */
vtr_status vtr_hgr_model_add_params(vtr_param_set *ps, const vtr_hgr_config *cfg, vtr_error *err);

/* Builds the model for cfg (checked) and at most max_batch videos / captions of max_frames
 * frames and max_words words (all >= 1): the parameter set, every value zero (call
 * vtr_hgr_init_params or load a checkpoint), and the arena. Fails with VTR_ERR_INVALID or
 * VTR_ERR_NOMEM; on failure m is zeroed. Release with vtr_hgr_model_free. */
vtr_status vtr_hgr_model_init(vtr_hgr_model *m, const vtr_hgr_config *cfg, int max_batch,
                              int max_frames, int max_words, vtr_error *err);

/* The same on a device, as vtr_vse_model_init_on (match/vse_model.h): on VTR_DEVICE_CUDA
 * (the current GPU, lib/device.h vtr_cuda_init) the arena, a copy of the parameters and
 * their gradients live in GPU memory and every op runs there (match/model_ops.h). params
 * stays the host's copy: vtr_hgr_params_to_device after changing it (init, a checkpoint),
 * vtr_hgr_params_to_host before reading it. Data-parallel steps run there too (lib/dist_device.h).
 * Fails as vtr_hgr_model_init, and with VTR_ERR_DEVICE without a GPU (one line saying what
 * to do) or when GPU memory runs out. */
vtr_status vtr_hgr_model_init_on(vtr_hgr_model *m, const vtr_hgr_config *cfg, vtr_device device,
                                 int max_batch, int max_frames, int max_words, vtr_error *err);
vtr_status vtr_hgr_params_to_device(vtr_hgr_model *m, vtr_error *err);
vtr_status vtr_hgr_params_to_host(vtr_hgr_model *m, bool grads, vtr_error *err);
/* Zeroes the gradients on the model's device. */
vtr_status vtr_hgr_zero_grad(vtr_hgr_model *m, vtr_error *err);

/* Frees the parameters and the arena; leaves m zeroed. Safe on a zeroed or freed model. */
void vtr_hgr_model_free(vtr_hgr_model *m);

/* Initialization from lib/rng.h streams of seed (tensor i from stream i): the text BiGRU's
 * weights orthogonal and its biases 0, as the reference's SentEncoder.init_weights
 * (nn.init.orthogonal_ of each whole (3E, in) weight: orthonormal columns; QR in the
 * arena's scratch, match/model_params.h), Linear weights and biases and GPO's GRU (HGR∞)
 * uniform(±1/sqrt(fan_in)) (PyTorch's default), word embedding uniform(±0.1) (the
 * reference loads GloVe: the caller overwrites it), role embedding normal(0,1)
 * (nn.Embedding's default), LayerNorm weight 1 and bias 0. Gradients zeroed. */
void vtr_hgr_init_params(vtr_hgr_model *m, uint64_t seed);

/* This rank's part of the global batch `global` for data-parallel training on dist
 * (lib/dist.h; dist->size > 1), as vtr_vse_batch_share: its pairs by vtr_dist_share, with
 * global's T and L, and dist, first, B_global and frame_lengths_global set; the pointers
 * point into global's buffers. */
vtr_hgr_batch vtr_hgr_batch_share(const vtr_hgr_model *m, const vtr_hgr_batch *global,
                                  vtr_dist *dist);

/* One training step's forward and backward: encoders in training mode (dropout from
 * (seed, 8 * step + site)), the three level scores, the fused score, the loss (*loss; the
 * hinge over the hardest or over all negatives) and the backward pass, which ACCUMULATES
 * into m->params.grad (zero it first). The caller then steps the optimizer. Fails with
 * VTR_ERR_INVALID (sizes, lengths, ids, roles, negatives) before anything changes. */
vtr_status vtr_hgr_train_step(vtr_hgr_model *m, const vtr_hgr_batch *batch,
                              vtr_hinge_negatives negatives, uint64_t seed, uint64_t step,
                              float *loss, vtr_error *err);

/* The floating-point operations of the matrix products of one vtr_hgr_train_step on batch
 * (2 per multiply-add; for a FLOP floor): the three level Linears over the real frames
 * (forward and weight gradient; the frames take no gradient), the BiGRU over the real words
 * (input and hidden products, their weight and input gradients; no hidden products at a
 * sequence's first step, whose state is 0), GPO's BiGRU and scorer (HGR∞; attention
 * pooling is dot products, not counted), the GCN's query and context Linears over the nodes
 * with an edge and its key Linear over the nodes an edge points to (forward, both
 * gradients; lib/graph_attention.h) and its per-caption N x N attention products, the
 * global cosines (B,B) with both gradients, and each phrase level's frame-phrase product
 * (valid phrases, B*T) with its two gradients plus the backward's per-video (len, len) x
 * (len, E) product. Element-wise work, norms, softmaxes, span max and the phrase
 * attention's Gram matrix (loops, not BLAS) are not counted. */
double vtr_hgr_train_step_flops(const vtr_hgr_model *m, const vtr_hgr_batch *batch);

/* Inference encoding of B <= max_batch videos (T <= max_frames): global (B,E)
 * l2-normalized, verb and noun (B,T,E) the per-frame level embeddings (0 at padded
 * frames). Fails with VTR_ERR_INVALID on bad sizes or lengths. */
vtr_status vtr_hgr_encode_videos(vtr_hgr_model *m, float *global, float *verb, float *noun,
                                 const float *frames, const int *lengths, int B, int T,
                                 vtr_error *err);

/* Inference encoding of c->B <= max_batch captions: sent (B,E) l2-normalized, verbs
 * (B,NV,E), nouns (B,NN,E), n_verbs and n_nouns (B) the phrase counts the scores use. */
vtr_status vtr_hgr_encode_captions(vtr_hgr_model *m, float *sent, float *verbs, float *nouns,
                                   int *n_verbs, int *n_nouns, const vtr_hgr_captions *c,
                                   vtr_error *err);

/* Scores of Bv encoded videos x Bc encoded captions (each <= max_batch; T <= max_frames),
 * the outputs of the two encoders above: fused (Bv,Bc) and, when levels is not NULL, the
 * three levels (3,Bv,Bc) (global, verb, noun). The training step's code. Evaluation
 * calls it per block. Fails with VTR_ERR_INVALID on bad sizes. */
vtr_status vtr_hgr_score_block(vtr_hgr_model *m, float *fused, float *levels, const float *global,
                               const float *verb, const float *noun, const int *frame_lengths,
                               int Bv, int T, const float *sent, const float *verbs,
                               const float *nouns, const int *n_verbs, const int *n_nouns, int Bc,
                               vtr_error *err);

/* Many videos and captions, as the encoders above give them (host memory). */
typedef struct vtr_hgr_encoded_videos {
    const float *global;      /* (n,E) */
    const float *verb, *noun; /* (n,T,E) each */
    const int *lengths;       /* (n) */
    int n, T;
} vtr_hgr_encoded_videos;

typedef struct vtr_hgr_encoded_captions {
    const float *sent;            /* (n,E) */
    const float *verbs, *nouns;   /* (n,NV,E), (n,NN,E) */
    const int *n_verbs, *n_nouns; /* (n) */
    int n;
} vtr_hgr_encoded_captions;

/* The scores of every video of v x every caption of c (an evaluation's whole matrix, or a
 * rank's rows of it), vtr_hgr_score_block's over blocks of max_batch a side: out[0] the
 * fused score, out[1 + k] level k (global, verb, noun), each (v->n, c->n) with row a at
 * out[.] + a * ld; an out that is NULL is not written. On the CPU the same bytes as the
 * blocks. On the GPU the videos' encodings are copied there once, in chunks of at most
 * chunk_bytes (0: 1 GiB; at least one block), and each block of captions once per chunk:
 * at MSR-VTT's test sizes (2,990 x 59,800, blocks of 128) about 0.5 GB and 2.7 GB in all,
 * where a copy of both per block would be about 300 GB. Fails with VTR_ERR_INVALID on bad
 * sizes, lengths or phrase counts (naming the video or caption), VTR_ERR_DEVICE when the
 * GPU's chunk cannot be had. */
vtr_status vtr_hgr_score_all(vtr_hgr_model *m, const vtr_hgr_encoded_videos *v,
                             const vtr_hgr_encoded_captions *c, float *const out[4], size_t ld,
                             size_t chunk_bytes, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif

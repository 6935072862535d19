/* vtr-train's config schema and its checked, typed form (train_config.h). */
#include "train_config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const vtr_config_field vtr_train_schema[] = {
    {"data.catalog", VTR_CONFIG_STRING, "''",
     "SQLite catalog of the dataset (to train and evaluate)"},
    {"data.dataset", VTR_CONFIG_STRING, "''",
     "dataset name in the catalog (to train and evaluate)"},
    {"data.features", VTR_CONFIG_STRING, "''", "feature store directory (to train and evaluate)"},
    {"data.train_split", VTR_CONFIG_STRING, "train", "split trained on"},
    {"data.val_split", VTR_CONFIG_STRING, "val", "split validated on after every epoch"},
    {"data.vocab", VTR_CONFIG_STRING, "''",
     "reference vocabulary JSON; '' builds one from the training captions"},
    {"data.vocab_threshold", VTR_CONFIG_INT, "4",
     "building the vocabulary: keep words seen at least this often"},
    {"data.tokenizer", VTR_CONFIG_STRING, "words",
     "words (lowercase + NLTK word_tokenize) or whitespace (pre-tokenized)"},
    {"data.max_frames", VTR_CONFIG_INT, "0",
     "> 0: keep round(linspace(0, n-1, N)) of longer sets; 0: every row (HGR: 1 .. 20)"},
    {"data.catalog_vocab", VTR_CONFIG_STRING, "hgr",
     "model.kind hgr: the catalog's vocabulary of the dataset (vtr-import hgr stores 'hgr'); "
     "'' builds one from the training captions with data.vocab_threshold"},

    {"model.kind", VTR_CONFIG_STRING, "vse",
     "vse (VSE++ / VSE∞ / ADOPT) or hgr (HGR / HGR∞: hierarchical graph reasoning)"},
    {"model.feature_dim", VTR_CONFIG_INT, "2048", "visual feature size (the store's dim)"},
    {"model.embed_size", VTR_CONFIG_INT, "1024", "joint embedding size (and text GRU hidden)"},
    {"model.mlp_hidden", VTR_CONFIG_INT, "512",
     "hidden size of the visual MLP residual; 0: fc only (frame features)"},
    {"model.word_dim", VTR_CONFIG_INT, "300", "word embedding size"},
    {"model.img_pool", VTR_CONFIG_STRING, "gpo", "visual pooler: gpo, mean or adpool"},
    {"model.txt_pool", VTR_CONFIG_STRING, "gpo", "caption pooler: gpo, mean or adpool"},
    {"model.gpo_pe", VTR_CONFIG_INT, "32", "GPO positional-encoding size"},
    {"model.gpo_hidden", VTR_CONFIG_INT, "32", "GPO BiGRU hidden size"},
    {"model.set_size", VTR_CONFIG_INT, "0",
     "vse: K > 0 embeds every item and caption as a set of K vectors (set embeddings, paper "
     "002: slot attention over the element embeddings, smooth-Chamfer similarity); 0: one "
     "vector"},
    {"model.set_iterations", VTR_CONFIG_INT, "4", "set embeddings: aggregation iterations T"},
    {"model.set_attention_dim", VTR_CONFIG_INT, "2048",
     "set embeddings: attention size D_h (the paper: 2048 on region features, 1024 on "
     "convolutional maps)"},
    {"model.set_mlp_hidden", VTR_CONFIG_INT, "0",
     "set embeddings: the aggregation block's MLP hidden size; 0: 4 x embed_size"},
    {"model.set_dropout", VTR_CONFIG_FLOAT, "0.1", "set embeddings: dropout in the set modules"},
    {"model.global_pool", VTR_CONFIG_STRING, "attention",
     "hgr: the global level's pooling, attention (HGR) or gpo (HGR∞)"},
    {"model.num_roles", VTR_CONFIG_INT, "16", "hgr: semantic roles (role embedding rows)"},
    {"model.num_verbs", VTR_CONFIG_INT, "4", "hgr: verb nodes per caption"},
    {"model.num_nouns", VTR_CONFIG_INT, "6", "hgr: noun nodes per caption"},
    {"model.max_words", VTR_CONFIG_INT, "30", "hgr: words kept per caption"},
    {"model.video_dropout", VTR_CONFIG_FLOAT, "0.2", "hgr: dropout of the three video levels"},
    {"model.text_dropout", VTR_CONFIG_FLOAT, "0.2", "hgr: dropout of the word embeddings"},
    {"model.gcn_dropout", VTR_CONFIG_FLOAT, "0.5", "hgr: dropout of the graph reasoning"},
    {"model.sigma", VTR_CONFIG_FLOAT, "4.0", "hgr: phrase attention's softmax scale"},
    {"model.word_vectors", VTR_CONFIG_STRING, "''",
     "GloVe text file (e.g. glove.840B.300d.txt) whose vectors start the word embedding "
     "rows of the vocabulary's words, model.word_dim wide; '' or words it lacks: "
     "uniform(-0.1, 0.1)"},

    {"loss.type", VTR_CONFIG_STRING, "hinge",
     "hinge (triplet, VSE++ / VSE∞) or adopt (InfoNCE over the K hardest negatives, VSE+2AD)"},
    {"loss.margin", VTR_CONFIG_FLOAT, "0.2", "hinge margin"},
    {"loss.reduction", VTR_CONFIG_STRING, "sum",
     "sum or mean over the batch (ADOPT's paper: mean)"},
    {"loss.warmup_epochs", VTR_CONFIG_INT, "1",
     "first epochs over all negatives (hinge: VSE0; adopt: K = B-1)"},
    {"loss.negatives", VTR_CONFIG_STRING, "hardest",
     "negatives after the warm-up: hardest (hinge: max violation; adopt: the K hardest) "
     "or all"},
    {"loss.adopt_temperature", VTR_CONFIG_FLOAT, "0.05", "ADOPT: InfoNCE temperature tau"},
    {"loss.set_alpha", VTR_CONFIG_FLOAT, "16.0", "set embeddings: smooth-Chamfer's scale alpha"},
    {"loss.diversity_weight", VTR_CONFIG_FLOAT, "0.01",
     "set embeddings: weight of the diversity regulariser"},
    {"loss.mmd_weight", VTR_CONFIG_FLOAT, "0.01", "set embeddings: weight of the MMD regulariser"},
    {"loss.adopt_fixed_k", VTR_CONFIG_INT, "0",
     "ADOPT: 0: K from the batch's alignment and uniformity (eq. 6); N > 0: the N hardest"},
    {"loss.adopt_positive_in_denominator", VTR_CONFIG_BOOL, "true",
     "ADOPT, a choice: the positive's term in the denominator (InfoNCE as cited, and the "
     "released code); false: eq. 6 read literally (negatives only)"},

    {"train.epochs", VTR_CONFIG_INT, "25", "epochs"},
    {"train.set_lr_scale", VTR_CONFIG_FLOAT, "1.0",
     "set embeddings: the set modules' learning rate over train.lr (the paper's appendix: "
     "0.1 on COCO, 0.01 / 0.05 on Flickr30K)"},
    {"train.batch_size", VTR_CONFIG_INT, "128", "pairs per batch"},
    {"train.drop_last", VTR_CONFIG_BOOL, "true", "drop an epoch's last incomplete batch"},
    {"train.optimizer", VTR_CONFIG_STRING, "adamw", "adamw or adam"},
    {"train.weight_decay", VTR_CONFIG_FLOAT, "0.01", "weight decay"},
    {"train.grad_clip", VTR_CONFIG_FLOAT, "2.0", "gradient norm clipping; 0: none"},
    VTR_LR_SCHEDULE_FIELDS("train", "5e-4"),
    {"train.size_augment", VTR_CONFIG_BOOL, "true", "GPO size augmentation of sets and captions"},
    {"train.frame_drop", VTR_CONFIG_FLOAT, "0.2", "size augmentation: set element drop rate"},
    {"train.caption_hit", VTR_CONFIG_FLOAT, "0.2", "size augmentation: caption token hit rate"},
    {"train.seed", VTR_CONFIG_INT, "0", "seed of init, data order and augmentation"},
    {"train.init", VTR_CONFIG_STRING, "''",
     "checkpoint whose parameters start the run (a vtr-train checkpoint, or a reference "
     "model converted by pipeline/convert_checkpoint.py) with the run's vocabulary"},
    {"train.precision", VTR_CONFIG_STRING, "float32",
     "the products of a step: float32, or bfloat16 (mixed precision: bfloat16 products, "
     "float32 weights, gradients and sums; CPUs with AVX512-BF16 or AMX, and GPUs), or tf32 "
     "(a GPU's tensor cores, train.device cuda)"},
    {"train.device", VTR_CONFIG_STRING, "cpu",
     "where a step runs: cpu, cuda (GPU 0) or cuda:N; on a GPU every model (VSE, VSE∞, "
     "VSE+2AD, set embeddings, HGR, HGR∞), any train.precision, one process"},
    {"train.checkpoint_every", VTR_CONFIG_INT, "500",
     "save last.safetensors every N steps as well as after every epoch; 0: epochs only"},

    {"val.batch_size", VTR_CONFIG_INT, "128", "items or captions per encoding batch"},
    {"val.fold_items", VTR_CONFIG_INT, "0", "validation folds of N items (COCO 1K); 0: none"},
    {"val.max_items", VTR_CONFIG_INT, "0",
     "validate on the split's first N items (and their captions); 0: all"},
};
const size_t vtr_train_schema_count = sizeof vtr_train_schema / sizeof vtr_train_schema[0];

vtr_status vtr_train_config_new(vtr_config **out, vtr_error *err)
{
    return vtr_config_new(vtr_train_schema, vtr_train_schema_count, out, err);
}

vtr_status vtr_train_config_from_string(const char *name, const char *text, vtr_config **out,
                                        vtr_error *err)
{
    vtr_config *cfg = NULL;
    vtr_status st = vtr_train_config_new(&cfg, err);
    if (st == VTR_OK)
        st = vtr_config_load_string(cfg, name, text, strlen(text), err);
    if (st != VTR_OK) {
        vtr_config_free(cfg);
        cfg = NULL;
    }
    *out = cfg;
    return st;
}

/* An INT key within [min, max] as an int. */
static vtr_status int_in(const vtr_config *cfg, const char *key, int64_t min, int64_t max,
                         int *out, vtr_error *err)
{
    int64_t v = vtr_config_int(cfg, key);
    if (v < min || v > max) {
        if (max == INT32_MAX)
            return vtr_config_fail(cfg, key, err, "must be >= %lld, got %lld", (long long)min,
                                   (long long)v);
        return vtr_config_fail(cfg, key, err, "must be in [%lld, %lld], got %lld",
                               (long long)min, (long long)max, (long long)v);
    }
    *out = (int)v;
    return VTR_OK;
}

static vtr_status probability(const vtr_config *cfg, const char *key, float *out,
                              vtr_error *err)
{
    double v = vtr_config_float(cfg, key);
    if (!(v >= 0.0 && v < 1.0))
        return vtr_config_fail(cfg, key, err, "must be in [0, 1), got %g", v);
    *out = (float)v;
    return VTR_OK;
}

/* A FLOAT key within [min, max] as a float. */
static vtr_status float_in(const vtr_config *cfg, const char *key, double min, double max,
                           float *out, vtr_error *err)
{
    double v = vtr_config_float(cfg, key);
    if (!(v >= min && v <= max))
        return vtr_config_fail(cfg, key, err, "must be in [%g, %g], got %g", min, max, v);
    *out = (float)v;
    return VTR_OK;
}

static vtr_status pooler(const vtr_config *cfg, const char *key, vtr_vse_pooler *out,
                         vtr_error *err)
{
    const char *name = vtr_config_string(cfg, key);
    if (vtr_vse_pooler_parse(name, out, NULL) != VTR_OK)
        return vtr_config_fail(cfg, key, err,
                               "unknown pooler '%s' (expected gpo, mean or adpool)", name);
    return VTR_OK;
}

/* The set embedding keys (model.set_*, loss.set_alpha and the regularisers' weights,
 * train.set_lr_scale) into m->set; K = 0 leaves the rest unread. */
static vtr_status set_config(const vtr_config *cfg, vtr_vse_config *m, vtr_error *err)
{
    vtr_vse_set_config *s = &m->set;
    vtr_status st;
    *s = (vtr_vse_set_config){.K = 0};
    if ((st = int_in(cfg, "model.set_size", 0, 64, &s->K, err)) || s->K == 0)
        return st;
    if ((st = int_in(cfg, "model.set_iterations", 1, 128, &s->T, err)) ||
        (st = int_in(cfg, "model.set_attention_dim", 1, 1 << 16, &s->Dh, err)) ||
        (st = int_in(cfg, "model.set_mlp_hidden", 0, 1 << 18, &s->H, err)) ||
        (st = probability(cfg, "model.set_dropout", &s->dropout, err)) ||
        (st = float_in(cfg, "loss.set_alpha", 1e-3, 1e3, &s->alpha, err)) ||
        (st = float_in(cfg, "loss.diversity_weight", 0.0, 1e3, &s->div_weight, err)) ||
        (st = float_in(cfg, "loss.mmd_weight", 0.0, 1e3, &s->mmd_weight, err)) ||
        (st = float_in(cfg, "train.set_lr_scale", 1e-6, 1e3, &s->lr_scale, err)))
        return st;
    if (s->H == 0)
        s->H = 4 * m->embed_size;
    if (strcmp(vtr_config_string(cfg, "loss.type"), "hinge") != 0)
        return vtr_config_fail(cfg, "loss.type", err,
                               "set embeddings (model.set_size %d) train with the hinge loss",
                               s->K);
    return VTR_OK;
}

static vtr_status non_empty(const vtr_config *cfg, const char *key, const char **out,
                            vtr_error *err)
{
    *out = vtr_config_string(cfg, key);
    if (!**out)
        return vtr_config_fail(cfg, key, err, "must not be empty");
    return VTR_OK;
}

/* model.kind and, for hgr, its keys and what HGR's training fixes. */
static vtr_status hgr_options(const vtr_config *cfg, vtr_train_options *o, vtr_error *err)
{
    const char *kind = vtr_config_string(cfg, "model.kind");
    const char *pool = vtr_config_string(cfg, "model.global_pool");
    vtr_status st;
    o->catalog_vocab = vtr_config_string(cfg, "data.catalog_vocab");
    if (strcmp(kind, "vse") == 0) {
        o->kind = VTR_MODEL_VSE;
        return VTR_OK;
    }
    if (strcmp(kind, "hgr") != 0)
        return vtr_config_fail(cfg, "model.kind", err, "unknown model '%s' (expected vse or hgr)",
                               kind);
    o->kind = VTR_MODEL_HGR;
    if (o->model.set.K > 0)
        return vtr_config_fail(cfg, "model.set_size", err,
                               "set embeddings are built on the vse model (model.kind vse)");
    vtr_hgr_config *h = &o->hgr;
    if (strcmp(pool, "attention") == 0)
        *h = vtr_hgr_config_default(1, VTR_HGR_POOL_ATTENTION);
    else if (strcmp(pool, "gpo") == 0)
        *h = vtr_hgr_config_default(1, VTR_HGR_POOL_GPO);
    else
        return vtr_config_fail(cfg, "model.global_pool", err,
                               "unknown pooling '%s' (expected attention or gpo)", pool);
    h->feature_dim = o->model.feature_dim;
    h->embed_size = o->model.embed_size;
    h->word_dim = o->model.word_dim;
    h->gpo_pe = o->model.img_pool.gpo_pe;
    h->gpo_hidden = o->model.img_pool.gpo_hidden;
    h->margin = o->model.margin;
    double sigma = vtr_config_float(cfg, "model.sigma");
    if ((st = int_in(cfg, "model.num_roles", 1, 1 << 16, &h->num_roles, err)) ||
        (st = int_in(cfg, "model.num_verbs", 1, 1 << 16, &h->num_verbs, err)) ||
        (st = int_in(cfg, "model.num_nouns", 1, 1 << 16, &h->num_nouns, err)) ||
        (st = int_in(cfg, "model.max_words", 1, 1 << 16, &o->hgr_max_words, err)) ||
        (st = probability(cfg, "model.video_dropout", &h->video_dropout, err)) ||
        (st = probability(cfg, "model.text_dropout", &h->text_dropout, err)) ||
        (st = probability(cfg, "model.gcn_dropout", &h->gcn_dropout, err)))
        return st;
    if (!(sigma > 0.0 && sigma <= 1e4))
        return vtr_config_fail(cfg, "model.sigma", err, "must be in (0, 1e4], got %g", sigma);
    h->sigma = (float)sigma;
    if (h->embed_size % 2)
        return vtr_config_fail(cfg, "model.embed_size", err, "must be even for hgr, got %d",
                               h->embed_size);
    if (o->max_frames < 1 || o->max_frames > VTR_HGR_MAX_FRAMES)
        return vtr_config_fail(cfg, "data.max_frames", err,
                               "must be in [1, %d] for hgr (the reference samples 20), got %d",
                               VTR_HGR_MAX_FRAMES, o->max_frames);
    if (o->vocab[0])
        return vtr_config_fail(cfg, "data.vocab", err, "must be '' for hgr: the vocabulary is "
                               "the catalog's (data.catalog_vocab) or built from the training "
                               "captions (data.catalog_vocab '')");
    if (o->tokenizer != VTR_TOKENIZE_WHITESPACE)
        return vtr_config_fail(cfg, "data.tokenizer", err, "must be whitespace for hgr (the "
                               "role graphs index the caption's whitespace words)");
    if (o->model.loss != VTR_VSE_LOSS_HINGE || o->model.reduction != VTR_REDUCE_MEAN)
        return vtr_config_fail(cfg, o->model.loss != VTR_VSE_LOSS_HINGE ? "loss.type" :
                               "loss.reduction", err, "hgr trains with the hinge loss averaged "
                               "over the batch: set loss.type hinge, loss.reduction mean");
    if (o->size_augment)
        return vtr_config_fail(cfg, "train.size_augment", err, "must be false for hgr (the "
                               "role graphs index the caption's words)");
    if ((st = vtr_hgr_config_check(h, err)) != VTR_OK)
        vtr_error_context(err, "model");
    return st;
}

vtr_status vtr_train_options_check_data(const vtr_train_options *o, vtr_error *err)
{
    const char *keys[] = {"data.catalog", "data.dataset", "data.features"};
    const char *values[] = {o->catalog, o->dataset, o->features};
    char names[256] = "";
    int missing = 0;
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        if (!values[i][0] && n < sizeof names)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s'%s'", missing++ ? ", " : "",
                                  keys[i]);
    if (missing == 1)
        return vtr_fail(err, VTR_ERR_INVALID, "required key %s is not set", names);
    if (missing)
        return vtr_fail(err, VTR_ERR_INVALID, "required keys not set: %s", names);
    return VTR_OK;
}

vtr_status vtr_train_options_from_config(const vtr_config *cfg, vtr_train_options *out,
                                         vtr_error *err)
{
    vtr_train_options o;
    vtr_status st;
    memset(&o, 0, sizeof o);
    if ((st = vtr_config_check_required(cfg, err)) != VTR_OK)
        return st;
    /* every key must be in the config's schema with its type (a config of another schema
     * is a programming error, reported rather than read as zeros) */
    for (size_t i = 0; i < vtr_train_schema_count; i++)
        if ((st = vtr_config_expect(cfg, vtr_train_schema[i].key, vtr_train_schema[i].type,
                                    err)) != VTR_OK)
            return st;

    o.catalog = vtr_config_string(cfg, "data.catalog");
    o.dataset = vtr_config_string(cfg, "data.dataset");
    o.features = vtr_config_string(cfg, "data.features");
    if ((st = non_empty(cfg, "data.train_split", &o.train_split, err)) ||
        (st = non_empty(cfg, "data.val_split", &o.val_split, err)))
        return st;
    o.vocab = vtr_config_string(cfg, "data.vocab");
    o.vocab_threshold = vtr_config_int(cfg, "data.vocab_threshold");
    if (o.vocab_threshold < 1)
        return vtr_config_fail(cfg, "data.vocab_threshold", err, "must be >= 1, got %lld",
                               (long long)o.vocab_threshold);
    if (vtr_tokenizer_mode_parse(vtr_config_string(cfg, "data.tokenizer"), &o.tokenizer) != 0)
        return vtr_config_fail(cfg, "data.tokenizer", err,
                               "unknown tokenizer '%s' (expected words or whitespace)",
                               vtr_config_string(cfg, "data.tokenizer"));
    if ((st = int_in(cfg, "data.max_frames", 0, 1 << 20, &o.max_frames, err)))
        return st;
    o.word_vectors = vtr_config_string(cfg, "model.word_vectors");
    o.init = vtr_config_string(cfg, "train.init");
    if (o.word_vectors[0] && o.init[0])
        return vtr_config_fail(cfg, "model.word_vectors", err,
                               "train.init sets every parameter, the word embedding too: "
                               "give one of the two");

    vtr_vse_config *m = &o.model;
    m->vocab_size = 0; /* set from the vocabulary */
    if ((st = int_in(cfg, "model.feature_dim", 1, INT32_MAX, &m->feature_dim, err)) ||
        (st = int_in(cfg, "model.embed_size", 1, INT32_MAX, &m->embed_size, err)) ||
        (st = int_in(cfg, "model.mlp_hidden", 0, INT32_MAX, &m->mlp_hidden, err)) ||
        (st = int_in(cfg, "model.word_dim", 1, INT32_MAX, &m->word_dim, err)) ||
        (st = pooler(cfg, "model.img_pool", &m->img_pool.kind, err)) ||
        (st = pooler(cfg, "model.txt_pool", &m->txt_pool.kind, err)) ||
        (st = int_in(cfg, "model.gpo_pe", 2, 4096, &m->img_pool.gpo_pe, err)) ||
        (st = int_in(cfg, "model.gpo_hidden", 1, 4096, &m->img_pool.gpo_hidden, err)))
        return st;
    if (m->img_pool.gpo_pe % 2)
        return vtr_config_fail(cfg, "model.gpo_pe", err, "must be even, got %d",
                               m->img_pool.gpo_pe);
    m->txt_pool.gpo_pe = m->img_pool.gpo_pe;
    m->txt_pool.gpo_hidden = m->img_pool.gpo_hidden;
    if ((st = set_config(cfg, m, err)))
        return st;

    const char *type = vtr_config_string(cfg, "loss.type");
    if (strcmp(type, "hinge") == 0)
        m->loss = VTR_VSE_LOSS_HINGE;
    else if (strcmp(type, "adopt") == 0)
        m->loss = VTR_VSE_LOSS_ADOPT;
    else
        return vtr_config_fail(cfg, "loss.type", err,
                               "unknown loss '%s' (expected hinge or adopt)", type);
    double tau = vtr_config_float(cfg, "loss.adopt_temperature");
    if (!(tau >= 1e-4 && tau <= 100.0))
        return vtr_config_fail(cfg, "loss.adopt_temperature", err,
                               "must be in [1e-4, 100], got %g", tau);
    m->adopt_temperature = (float)tau;
    if ((st = int_in(cfg, "loss.adopt_fixed_k", 0, 1 << 20, &m->adopt_fixed_k, err)))
        return st;
    m->adopt_positive_in_denominator =
        vtr_config_bool(cfg, "loss.adopt_positive_in_denominator");
    double margin = vtr_config_float(cfg, "loss.margin");
    if (!(margin >= 0.0 && margin <= 2.0)) /* cosines differ by at most 2 */
        return vtr_config_fail(cfg, "loss.margin", err, "must be in [0, 2], got %g", margin);
    m->margin = (float)margin;
    const char *red = vtr_config_string(cfg, "loss.reduction");
    if (strcmp(red, "sum") == 0)
        m->reduction = VTR_REDUCE_SUM;
    else if (strcmp(red, "mean") == 0)
        m->reduction = VTR_REDUCE_MEAN;
    else
        return vtr_config_fail(cfg, "loss.reduction", err,
                               "unknown reduction '%s' (expected sum or mean)", red);
    if ((st = int_in(cfg, "loss.warmup_epochs", 0, INT32_MAX, &o.warmup_epochs, err)))
        return st;
    const char *neg = vtr_config_string(cfg, "loss.negatives");
    if (strcmp(neg, "hardest") == 0)
        o.negatives = VTR_HINGE_HARDEST_NEGATIVE;
    else if (strcmp(neg, "all") == 0)
        o.negatives = VTR_HINGE_ALL_NEGATIVES;
    else
        return vtr_config_fail(cfg, "loss.negatives", err,
                               "unknown negatives '%s' (expected hardest or all)", neg);

    if ((st = int_in(cfg, "train.epochs", 1, INT32_MAX, &o.epochs, err)) ||
        (st = int_in(cfg, "train.batch_size", 2, 1 << 20, &o.batch_size, err)))
        return st;
    o.drop_last = vtr_config_bool(cfg, "train.drop_last");
    vtr_optim_kind kind;
    if (vtr_optim_kind_parse(vtr_config_string(cfg, "train.optimizer"), &kind, NULL) != VTR_OK)
        return vtr_config_fail(cfg, "train.optimizer", err,
                               "unknown optimizer '%s' (expected adamw or adam)",
                               vtr_config_string(cfg, "train.optimizer"));
    o.optim = vtr_optim_defaults(kind);
    o.optim.weight_decay = vtr_config_float(cfg, "train.weight_decay");
    if (!(o.optim.weight_decay >= 0.0))
        return vtr_config_fail(cfg, "train.weight_decay", err, "must be >= 0, got %g",
                               o.optim.weight_decay);
    o.grad_clip = vtr_config_float(cfg, "train.grad_clip");
    if (!(o.grad_clip >= 0.0))
        return vtr_config_fail(cfg, "train.grad_clip", err, "must be >= 0, got %g",
                               o.grad_clip);
    if ((st = vtr_lr_schedule_from_config(cfg, "train", &o.lr, err)))
        return st;
    o.size_augment = vtr_config_bool(cfg, "train.size_augment");
    if ((st = probability(cfg, "train.frame_drop", &o.frame_drop, err)) ||
        (st = probability(cfg, "train.caption_hit", &o.caption_hit, err)))
        return st;
    o.seed = vtr_config_int(cfg, "train.seed");
    if (o.seed < 0)
        return vtr_config_fail(cfg, "train.seed", err, "must be >= 0, got %lld",
                               (long long)o.seed);
    if (!vtr_precision_parse(vtr_config_string(cfg, "train.precision"), &o.precision))
        return vtr_config_fail(cfg, "train.precision", err,
                               "unknown precision '%s' (expected float32, bfloat16 or tf32)",
                               vtr_config_string(cfg, "train.precision"));
    vtr_error device_err;
    if (vtr_device_parse(vtr_config_string(cfg, "train.device"), &o.device, &o.device_index,
                         &device_err))
        return vtr_config_fail(cfg, "train.device", err, "%s", device_err.msg);
    o.checkpoint_every = vtr_config_int(cfg, "train.checkpoint_every");
    if (o.checkpoint_every < 0)
        return vtr_config_fail(cfg, "train.checkpoint_every", err, "must be >= 0, got %lld",
                               (long long)o.checkpoint_every);

    if ((st = int_in(cfg, "val.batch_size", 1, 1 << 20, &o.val_batch_size, err)) ||
        (st = int_in(cfg, "val.fold_items", 0, INT32_MAX, &o.val_fold_items, err)) ||
        (st = int_in(cfg, "val.max_items", 0, INT32_MAX, &o.val_max_items, err)))
        return st;

    if ((st = hgr_options(cfg, &o, err)))
        return st;
    m->vocab_size = 1; /* a placeholder so that the rest of the model config is checked */
    if (o.kind == VTR_MODEL_VSE && (st = vtr_vse_config_check(m, err)) != VTR_OK) {
        vtr_error_context(err, "model");
        return st;
    }
    m->vocab_size = 0;
    *out = o;
    return VTR_OK;
}

vtr_vse_config vtr_train_model_config(const vtr_train_options *opt, const vtr_vocab *vocab)
{
    vtr_vse_config c = opt->model;
    c.vocab_size = vtr_vocab_size(vocab);
    return c;
}

vtr_hgr_config vtr_train_hgr_config(const vtr_train_options *opt, const vtr_vocab *vocab)
{
    vtr_hgr_config c = opt->hgr;
    c.vocab_size = vtr_vocab_size(vocab);
    return c;
}

bool vtr_train_explain_data_path(const char *path, const char *how, vtr_error *err)
{
    if (!err || !path || !*path || path[0] == '/' || access(path, F_OK) == 0)
        return false;
    char msg[VTR_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err->msg);
    vtr_fail(err, err->status, "%s; %s is relative to the directory vtr-train ran in (%s)", msg,
             path, how);
    return true;
}

/* torch.save files (lib/pth.h, lib/zip.h, lib/tensor_file.h): real files written by
 * PyTorch (tests/fixtures/make_backbone_fixtures.py pth-samples; skipped without torch),
 * cut at every length, and hand-made pickles that must be refused: code (os.system),
 * opcodes outside the subset, views outside their storage or not contiguous. Loading a
 * backbone from .pth and inferring the architecture: tests/test_backbone.c. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "lib/file.h"
#include "lib/pth.h"
#include "lib/tensor_file.h"
#include "lib/zip.h"

#define PYTHON "/usr/bin/python3"
#define SCRIPT "tests/fixtures/make_backbone_fixtures.py"

/* DIR/sample.pth and DIR/transposed.pth from the fixture script, once per run. */
static const char *samples(void)
{
    static int state;
    const char *dir = test_path("pth");
    char make[1024];
    snprintf(make, sizeof make, PYTHON " " SCRIPT " pth-samples '%s'", dir);
    test_fixture(&state, SCRIPT, "torch", make);
    return dir;
}

/* ---- a writer of stored zip archives, for hand-made pickles ------------------------ */

typedef struct part {
    const char *name;
    const void *data;
    size_t size;
} part;

static void put_le(unsigned char *p, uint32_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A zip archive of the parts, stored, as torch.save lays it out (without its alignment
 * padding and zip64 records). Returns a malloc'ed buffer of *len bytes. */
static unsigned char *make_zip(const part *parts, size_t n, size_t *len)
{
    size_t cap = 22;
    for (size_t i = 0; i < n; i++)
        cap += 30 + 46 + 2 * strlen(parts[i].name) + parts[i].size;
    unsigned char *b = calloc(1, cap), *p = b;
    uint32_t *offsets = calloc(n + 1, sizeof *offsets);
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(parts[i].name);
        offsets[i] = (uint32_t)(p - b);
        put_le(p, 0x04034b50u, 4);
        put_le(p + 18, (uint32_t)parts[i].size, 4);
        put_le(p + 22, (uint32_t)parts[i].size, 4);
        put_le(p + 26, (uint32_t)nl, 2);
        memcpy(p + 30, parts[i].name, nl);
        if (parts[i].size)
            memcpy(p + 30 + nl, parts[i].data, parts[i].size);
        p += 30 + nl + parts[i].size;
    }
    unsigned char *cd = p;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(parts[i].name);
        put_le(p, 0x02014b50u, 4);
        put_le(p + 20, (uint32_t)parts[i].size, 4);
        put_le(p + 24, (uint32_t)parts[i].size, 4);
        put_le(p + 28, (uint32_t)nl, 2);
        put_le(p + 42, offsets[i], 4);
        memcpy(p + 46, parts[i].name, nl);
        p += 46 + nl;
    }
    put_le(p, 0x06054b50u, 4);
    put_le(p + 8, (uint32_t)n, 2);
    put_le(p + 10, (uint32_t)n, 2);
    put_le(p + 12, (uint32_t)(p - cd), 4);
    put_le(p + 16, (uint32_t)(cd - b), 4);
    p += 22;
    *len = (size_t)(p - b);
    free(offsets);
    return b;
}

static const float six[6] = {0, 1, 2, 3, 4, 5};

/* Parses a torch.save archive of `pickle` (len bytes; a C string when len is 0) and the
 * 24-byte storage data/0 (six floats). The archive, which out points into, lives until
 * the next call. */
static vtr_status parse_pickle(const char *pickle, size_t len, vtr_safetensors *out,
                               vtr_error *err)
{
    static unsigned char *zip;
    part parts[3] = {{"archive/data.pkl", pickle, len ? len : strlen(pickle)},
                     {"archive/data/0", six, sizeof six},
                     {"archive/version", "3\n", 2}};
    size_t zlen;
    free(zip);
    zip = make_zip(parts, 3, &zlen);
    return vtr_pth_parse(zip, zlen, out, err);
}

/* The pickle of {'w': a float32 tensor over storage '0' of `numel` elements}, with the
 * given storage offset, size and stride (SIZE and STRIDE: the BININT1 opcodes of a
 * tuple's items, e.g. "K\2K\3"); with `twice`, the same tensor under 'w' again. */
static char *tensor_pickle(int numel, int offset, const char *size, const char *stride,
                           int twice, size_t *len)
{
    char item[256], *p = malloc(600);
    int n = snprintf(item, sizeof item,
             "\x8c\1w" "ctorch._utils\n_rebuild_tensor_v2\n"
             "((\x8c\7storage" "ctorch\nFloatStorage\n" "\x8c\1" "0\x8c\3" "cpuK%c"
             "tQK%c(%st(%st\x89" "ccollections\nOrderedDict\n)RtR",
             numel, offset, size, stride);
    /* item holds NUL bytes (a 0 offset): copied by length */
    memcpy(p, "\x80\x02}(", 4);
    for (int k = 0; k <= twice; k++)
        memcpy(p + 4 + k * n, item, (size_t)n);
    memcpy(p + 4 + (twice + 1) * n, "u.", 2);
    *len = 4 + (size_t)(twice + 1) * (size_t)n + 2;
    return p;
}

static vtr_status parse_tensor(int numel, int offset, const char *size, const char *stride,
                               vtr_safetensors *out, vtr_error *err)
{
    size_t len;
    char *p = tensor_pickle(numel, offset, size, stride, 0, &len);
    vtr_status st = parse_pickle(p, len, out, err);
    free(p);
    return st;
}

/* ---- tests ------------------------------------------------------------------------- */

TEST(pth_reads_what_torch_saves)
{
    vtr_error err;
    vtr_safetensors st;
    char path[4096];
    snprintf(path, sizeof path, "%s/sample.pth", samples());
    CHECK_OK(vtr_tensor_file_open(path, &st, &err));
    CHECK_EQ_INT(st.count, 10);
    CHECK(st.metadata == NULL);
    static const struct {
        const char *name;
        vtr_dtype dtype;
        int ndim;
        int64_t shape[2];
        double first; /* element i is first + i */
    } want[] = {
        {"f32", VTR_F32, 2, {2, 3}, 0},   {"f16", VTR_F16, 1, {4}, 0},
        {"bf16", VTR_BF16, 2, {1, 4}, 0}, {"u8", VTR_U8, 1, {5}, 0},
        {"i32", VTR_I32, 1, {3}, 0},      {"i64", VTR_I64, 0, {0}, 7},
        {"empty", VTR_F32, 2, {0, 3}, 0}, {"base", VTR_F32, 1, {16}, 10},
        {"view", VTR_F32, 2, {2, 3}, 14}, {"param", VTR_F32, 1, {2}, 0},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const vtr_tensor *t = vtr_safetensors_find(&st, want[k].name);
        CHECK_MSG(t, "no tensor '%s'", want[k].name);
        CHECK_EQ_INT(t->dtype, want[k].dtype);
        CHECK_EQ_INT(t->ndim, want[k].ndim);
        for (int d = 0; d < t->ndim; d++)
            CHECK_EQ_INT(t->shape[d], want[k].shape[d]);
        const unsigned char *b = t->data;
        for (int64_t i = 0; i < vtr_tensor_numel(t); i++) {
            double v = 0;
            float f;
            uint16_t h;
            int32_t i32;
            int64_t i64;
            switch (t->dtype) {
            case VTR_F32: memcpy(&f, b + 4 * i, 4); v = f; break;
            case VTR_F16: memcpy(&h, b + 2 * i, 2); v = vtr_half_to_float(h); break;
            case VTR_BF16: memcpy(&h, b + 2 * i, 2); v = vtr_bf16_to_float(h); break;
            case VTR_U8: v = b[i]; break;
            case VTR_I32: memcpy(&i32, b + 4 * i, 4); v = i32; break;
            default: memcpy(&i64, b + 8 * i, 8); v = (double)i64; break;
            }
            CHECK_MSG(v == want[k].first + (double)i, "%s[%lld] = %g", want[k].name,
                      (long long)i, v);
        }
    }
    /* a view shares its storage with base: offset 4 */
    CHECK((const float *)vtr_safetensors_find(&st, "view")->data ==
          (const float *)vtr_safetensors_find(&st, "base")->data + 4);
    vtr_safetensors_close(&st);

    snprintf(path, sizeof path, "%s/transposed.pth", samples());
    CHECK_FAILS(vtr_tensor_file_open(path, &st, &err), VTR_ERR_UNSUPPORTED,
                "transposed.pth: tensor 't' is not contiguous: size (2, 3), stride (1, 2)");
}

/* The file cut at every length, and its data.pkl cut at every length in an archive that
 * is otherwise whole: one-line errors, never a crash (ASan sees reads past a cut: each
 * cut is a copy of exactly that many bytes). */
TEST(pth_truncated_at_every_length)
{
    vtr_error err;
    char path[4096];
    snprintf(path, sizeof path, "%s/sample.pth", samples());
    vtr_mapped_file map;
    CHECK_OK(vtr_map_file(path, &map, &err));
    vtr_safetensors st;
    for (size_t cut = 0; cut < map.size; cut++) {
        unsigned char *b = malloc(cut ? cut : 1);
        memcpy(b, map.data, cut);
        CHECK_FAILS(vtr_pth_parse(b, cut, &st, &err), VTR_ERR_FORMAT, "not a zip archive");
        CHECK(st.count == 0 && !st.entries);
        free(b);
    }
    vtr_zip zip;
    CHECK_OK(vtr_zip_parse(map.data, map.size, &zip, &err));
    part *parts = calloc(zip.count, sizeof *parts);
    size_t pkl = zip.count;
    for (size_t i = 0; i < zip.count; i++) {
        parts[i] = (part){zip.entries[i].name, zip.entries[i].data, zip.entries[i].size};
        if (!strcmp(zip.entries[i].name, "sample/data.pkl"))
            pkl = i;
    }
    CHECK(pkl < zip.count);
    size_t whole = parts[pkl].size;
    const void *pickle = parts[pkl].data;
    for (size_t cut = 0; cut <= whole; cut++) {
        unsigned char *b = malloc(cut ? cut : 1);
        memcpy(b, pickle, cut);
        parts[pkl].data = b;
        parts[pkl].size = cut;
        size_t len;
        unsigned char *z = make_zip(parts, zip.count, &len);
        if (cut < whole) {
            CHECK_FAILS(vtr_pth_parse(z, len, &st, &err), VTR_ERR_FORMAT, "truncated pickle");
        } else {
            CHECK_OK(vtr_pth_parse(z, len, &st, &err));
            CHECK_EQ_INT(st.count, 10);
            vtr_safetensors_close(&st);
        }
        free(z);
        free(b);
    }
    free(parts);
    vtr_zip_close(&zip);
    vtr_unmap_file(&map);
}

TEST(pth_reads_a_tensor_view_of_its_storage)
{
    vtr_error err;
    vtr_safetensors st;
    CHECK_OK(parse_tensor(6, 0, "K\2K\3", "K\3K\1", &st, &err));
    CHECK_EQ_INT(st.count, 1);
    const vtr_tensor *w = vtr_safetensors_find(&st, "w");
    CHECK(w && w->dtype == VTR_F32 && w->ndim == 2 && w->shape[0] == 2 && w->shape[1] == 3);
    CHECK(!memcmp(w->data, six, sizeof six));
    vtr_safetensors_close(&st);
    /* a dimension of size 1 may have any stride; offset 2 leaves room for 4 */
    CHECK_OK(parse_tensor(6, 2, "K\4K\1", "K\1K\x63", &st, &err));
    CHECK(!memcmp(st.entries[0].tensor.data, six + 2, 4 * sizeof(float)));
    vtr_safetensors_close(&st);
    /* a name twice */
    size_t len;
    char *p = tensor_pickle(6, 0, "K\6", "K\1", 1, &len);
    CHECK_FAILS(parse_pickle(p, len, &st, &err), VTR_ERR_FORMAT, "two tensors named 'w'");
    free(p);
}

TEST(pth_refuses_views_outside_or_across_their_storage)
{
    vtr_error err;
    vtr_safetensors st;
    CHECK_FAILS(parse_tensor(6, 0, "K\2K\3", "K\1K\2", &st, &err), VTR_ERR_UNSUPPORTED,
                "tensor 'w' is not contiguous: size (2, 3), stride (1, 2)");
    CHECK(st.count == 0 && !st.entries);
    CHECK_FAILS(parse_tensor(6, 1, "K\2K\3", "K\3K\1", &st, &err), VTR_ERR_FORMAT,
                "tensor 'w' (offset 1, size (2, 3)) runs past the end of its storage '0' of 6 "
                "elements");
    CHECK_FAILS(parse_tensor(7, 0, "K\7", "K\1", &st, &err), VTR_ERR_FORMAT,
                "storage '0' of 7 float32 elements, but data/0 holds 24 bytes");
    CHECK_FAILS(parse_tensor(6, 0, "J\xff\xff\xff\xff", "K\1", &st, &err), VTR_ERR_FORMAT,
                "tensor 'w'");
    CHECK_FAILS(parse_tensor(6, 0, "K\1K\1K\1K\1K\1K\1K\1K\1K\1", "K\1K\1K\1K\1K\1K\1K\1K\1K\1",
                             &st, &err),
                VTR_ERR_UNSUPPORTED, "a tensor of 9 dimensions");
    CHECK_FAILS(parse_tensor(6, 0, "K\2K\3", "K\3", &st, &err), VTR_ERR_UNSUPPORTED,
                "_rebuild_tensor_v2 with arguments other than");
    /* a storage that the archive lacks */
    size_t len;
    char *p = tensor_pickle(6, 0, "K\6", "K\1", 0, &len);
    part parts[1] = {{"archive/data.pkl", p, len}};
    unsigned char *z = make_zip(parts, 1, &len);
    CHECK_FAILS(vtr_pth_parse(z, len, &st, &err), VTR_ERR_FORMAT,
                "data.pkl: BINPERSID (0x51) at byte");
    CHECK(strstr(err.msg, "storage '0' has no entry data/0 in the archive"));
    free(z);
    free(p);
}

/* A pickle that would run code is refused where it names the function; nothing runs. */
TEST(pth_refuses_code_and_opcodes_outside_the_subset)
{
    vtr_error err;
    vtr_safetensors st;
    const char *flag = test_path("pwned");
    char evil[512];
    int n = snprintf(evil, sizeof evil, "\x80\x02" "cos\nsystem\n" "X%c%c%c%ctouch %s\x85R.",
                     (int)(6 + strlen(flag)) & 0xff, 0, 0, 0, flag);
    CHECK_FAILS(parse_pickle(evil, (size_t)n, &st, &err), VTR_ERR_UNSUPPORTED,
                "data.pkl: GLOBAL (0x63) at byte 2: os.system is not allowed");
    CHECK(access(flag, F_OK) != 0);
    CHECK_FAILS(parse_pickle("\x80\x02" "cbuiltins\neval\n", 0, &st, &err), VTR_ERR_UNSUPPORTED,
                "builtins.eval is not allowed");
    CHECK_FAILS(parse_pickle("\x80\x02" "ctorch\nDoubleStorage\n", 0, &st, &err),
                VTR_ERR_UNSUPPORTED, "storage type torch.DoubleStorage is not supported");
    /* protocol 4's way to name a global, and other opcodes a state_dict has no use for */
    CHECK_FAILS(parse_pickle("\x80\x04\x8c\2os\x8c\6system\x93", 0, &st, &err),
                VTR_ERR_UNSUPPORTED, "data.pkl: STACK_GLOBAL (0x93) at byte 14: not in the "
                "subset of pickle that torch.save writes for a state_dict");
    CHECK_FAILS(parse_pickle("\x80\x02(ios\nsystem\n.", 0, &st, &err), VTR_ERR_UNSUPPORTED,
                "INST (0x69) at byte 3");
    CHECK_FAILS(parse_pickle("\x80\x02]", 0, &st, &err), VTR_ERR_UNSUPPORTED,
                "EMPTY_LIST (0x5d) at byte 2");
    CHECK_FAILS(parse_pickle("\x80\x02\xff", 0, &st, &err), VTR_ERR_UNSUPPORTED,
                "an unknown opcode (0xff) at byte 2");
    /* REDUCE on what is not a function vtr knows */
    CHECK_FAILS(parse_pickle("\x80\x02" "ctorch\nFloatStorage\n)R.", 0, &st, &err),
                VTR_ERR_UNSUPPORTED, "REDUCE (0x52) at byte 23: calls a storage type");
    CHECK_FAILS(parse_pickle("\x80\x02}}R.", 0, &st, &err), VTR_ERR_UNSUPPORTED,
                "calls a dict");
    CHECK_FAILS(parse_pickle("\x80\x02" "ccollections\nOrderedDict\nK\1\x85R.", 0, &st, &err),
                VTR_ERR_UNSUPPORTED, "OrderedDict with arguments");
    CHECK_FAILS(parse_pickle("\x80\x02K\1}b.", 0, &st, &err), VTR_ERR_UNSUPPORTED,
                "BUILD (0x62) at byte 5: sets the state of an int to a dict");
    CHECK(st.count == 0 && !st.entries);
}

TEST(pth_refuses_malformed_pickles)
{
    vtr_error err;
    vtr_safetensors st;
    CHECK_OK(parse_pickle("\x80\x02}.", 0, &st, &err));
    CHECK_EQ_INT(st.count, 0);
    vtr_safetensors_close(&st);
    CHECK_FAILS(parse_pickle("\x80\x02K\1.", 0, &st, &err), VTR_ERR_FORMAT,
                "the object saved is an int, not a dict of tensors (a state_dict)");
    CHECK_FAILS(parse_pickle("\x80\x02}K\1K\2s.", 0, &st, &err), VTR_ERR_FORMAT,
                "a key of the state_dict is an int, not a name");
    CHECK_FAILS(parse_pickle("\x80\x02}\x8c\5modelK\2s.", 0, &st, &err), VTR_ERR_FORMAT,
                "'model' holds an int, not a tensor: vtr reads a state_dict");
    CHECK_FAILS(parse_pickle("\x80\x02}\x8c\1" "a}s\x8c\1" "a}s.", 0, &st, &err),
                VTR_ERR_FORMAT, "'a' holds a dict");
    CHECK_FAILS(parse_pickle("\x80\x02}}.", 0, &st, &err), VTR_ERR_FORMAT,
                "2 values and 0 marks left on the stack");
    CHECK_FAILS(parse_pickle("\x80\x02}.K", 0, &st, &err), VTR_ERR_FORMAT, "1 bytes after STOP");
    CHECK_FAILS(parse_pickle("\x80\x02h\0", 2 + 2, &st, &err), VTR_ERR_FORMAT,
                "BINGET (0x68) at byte 2: memo slot 0 is empty");
    CHECK_FAILS(parse_pickle("\x80\x02}q\1.", 0, &st, &err), VTR_ERR_FORMAT,
                "memo slot 1 skips slot 0");
    CHECK_FAILS(parse_pickle("\x80\x02s", 0, &st, &err), VTR_ERR_FORMAT, "the stack is empty");
    CHECK_FAILS(parse_pickle("\x80\x02}(K\1u.", 0, &st, &err), VTR_ERR_FORMAT,
                "an odd number of values (1)");
    CHECK_FAILS(parse_pickle("\x80\x02t", 0, &st, &err), VTR_ERR_FORMAT, "no MARK before it");
    CHECK_FAILS(parse_pickle("\x80\x02X\2\0\0\0\xc3(", 9, &st, &err), VTR_ERR_FORMAT,
                "not UTF-8 without NUL");
    CHECK_FAILS(parse_pickle("\x80\x02\x8a\x09", 0, &st, &err), VTR_ERR_UNSUPPORTED,
                "an integer of 9 bytes");
    CHECK_FAILS(parse_pickle("\x80\x01", 0, &st, &err), VTR_ERR_UNSUPPORTED, "protocol 1");
    CHECK_FAILS(parse_pickle("}\x80\x02", 0, &st, &err), VTR_ERR_UNSUPPORTED,
                "protocol 2 after the start");
}

TEST(pth_archive_errors)
{
    vtr_error err;
    vtr_safetensors st;
    size_t len;
    part no_pickle[1] = {{"archive/data/0", six, sizeof six}};
    unsigned char *z = make_zip(no_pickle, 1, &len);
    CHECK_FAILS(vtr_pth_parse(z, len, &st, &err), VTR_ERR_FORMAT, "no FOLDER/data.pkl");
    free(z);
    part two[2] = {{"a/data.pkl", "\x80\x02}.", 4}, {"b/data.pkl", "\x80\x02}.", 4}};
    z = make_zip(two, 2, &len);
    CHECK_FAILS(vtr_pth_parse(z, len, &st, &err), VTR_ERR_FORMAT, "two data.pkl");
    free(z);
    part big_endian[2] = {{"a/data.pkl", "\x80\x02}.", 4}, {"a/byteorder", "big", 3}};
    z = make_zip(big_endian, 2, &len);
    CHECK_FAILS(vtr_pth_parse(z, len, &st, &err), VTR_ERR_UNSUPPORTED, "byteorder 'big'");
    free(z);
    part little[2] = {{"a/data.pkl", "\x80\x02}.", 4}, {"a/byteorder", "little", 6}};
    z = make_zip(little, 2, &len);
    CHECK_OK(vtr_pth_parse(z, len, &st, &err));
    CHECK_EQ_INT(st.count, 0);
    vtr_safetensors_close(&st);
    /* compressed, duplicated */
    z[8] = 8; /* the local header's method: the directory's counts */
    size_t cd = len - 22 - 2 * 46 - strlen("a/data.pkl") - strlen("a/byteorder");
    z[cd + 10] = 8;
    CHECK_FAILS(vtr_pth_parse(z, len, &st, &err), VTR_ERR_UNSUPPORTED,
                "zip entry 'a/data.pkl' is compressed (method 8)");
    free(z);
    part dup[2] = {{"a/data.pkl", "\x80\x02}.", 4}, {"a/data.pkl", "\x80\x02}.", 4}};
    z = make_zip(dup, 2, &len);
    CHECK_FAILS(vtr_pth_parse(z, len, &st, &err), VTR_ERR_FORMAT,
                "zip archive has two entries named 'a/data.pkl'");
    free(z);
}

/* The legacy format is named, with how to convert it. */
TEST(tensor_file_refuses_the_legacy_format)
{
    vtr_error err;
    vtr_safetensors st;
    const char *path = test_path("legacy.pth");
    FILE *fp = fopen(path, "wb");
    fwrite("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 1, 15, fp);
    fclose(fp);
    CHECK_FAILS(vtr_tensor_file_open(path, &st, &err), VTR_ERR_UNSUPPORTED,
                "legacy.pth: a torch.save file of the format before PyTorch 1.6");
}

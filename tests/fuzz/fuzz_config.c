/* libFuzzer target for lib/config: the input is loaded as a YAML config file and also
 * applied as a --set value (to the key picked by its first byte). Beyond memory safety it
 * checks that every error is one non-empty line starting with the input's name, and that
 * whatever loaded dumps to YAML that loads back to the same dump. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config.h"

static const vtr_config_field schema[] = {
    {"seed", VTR_CONFIG_INT, "0", NULL},
    {"train.lr", VTR_CONFIG_FLOAT, "5e-4", NULL},
    {"train.max_violation", VTR_CONFIG_BOOL, "true", NULL},
    {"train.lr_decay_epochs", VTR_CONFIG_INT_LIST, "[15]", NULL},
    {"train.lr_factors", VTR_CONFIG_FLOAT_LIST, "[]", NULL},
    {"model.pooler", VTR_CONFIG_STRING, "gpo", NULL},
    {"model.gpo.d_pe", VTR_CONFIG_INT, "32", NULL},
    {"model.gpo.temperature", VTR_CONFIG_FLOAT, "0.1", NULL},
    {"data.splits", VTR_CONFIG_STRING_LIST, "[train, val, test]", NULL},
    {"data.features", VTR_CONFIG_STRING, NULL, NULL},
    {"train.clip", VTR_CONFIG_FLOAT, "2.0", NULL},
};
#define N_FIELDS (sizeof schema / sizeof schema[0])

static void check_error(vtr_status st, const vtr_error *err, const char *prefix)
{
    if (st == VTR_OK)
        return;
    if (!err->msg[0] || strchr(err->msg, '\n') || strncmp(err->msg, prefix, strlen(prefix))) {
        fprintf(stderr, "bad message (%s): \"%s\"\n", vtr_status_name(st), err->msg);
        abort();
    }
}

static void check_round_trip(const vtr_config *cfg)
{
    vtr_error err;
    char *first = NULL, *second = NULL;
    vtr_config *again = NULL;
    if (vtr_config_dump_string(cfg, &first, &err) != VTR_OK ||
        vtr_config_new(schema, N_FIELDS, &again, &err) != VTR_OK ||
        vtr_config_load_string(again, "dump.yaml", first, strlen(first), &err) != VTR_OK ||
        vtr_config_dump_string(again, &second, &err) != VTR_OK) {
        fprintf(stderr, "dump does not reload: %s\n--- dump:\n%s", err.msg,
                first ? first : "(none)");
        abort();
    }
    if (strcmp(first, second) != 0) {
        fprintf(stderr, "dump changed on reload:\n%s---\n%s", first, second);
        abort();
    }
    free(first);
    free(second);
    vtr_config_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vtr_error err;
    vtr_config *cfg = NULL;
    if (vtr_config_new(schema, N_FIELDS, &cfg, &err) != VTR_OK) {
        fprintf(stderr, "schema: %s\n", err.msg);
        abort();
    }
    vtr_status st = vtr_config_load_string(cfg, "fuzz.yaml", (const char *)data, size, &err);
    check_error(st, &err, "fuzz.yaml:");
    check_round_trip(cfg);

    if (size > 0) {
        const char *key = schema[data[0] % N_FIELDS].key;
        size_t klen = strlen(key);
        char *assignment = malloc(klen + size + 1);
        if (!assignment)
            abort();
        memcpy(assignment, key, klen);
        assignment[klen] = '=';
        memcpy(assignment + klen + 1, data + 1, size - 1);
        assignment[klen + size] = '\0'; /* the value stops at the first NUL, like argv */
        st = vtr_config_set(cfg, assignment, &err);
        check_error(st, &err, "--set: ");
        free(assignment);
        check_round_trip(cfg);
    }

    size_t n;
    (void)vtr_config_check_required(cfg, &err);
    (void)vtr_config_int_list(cfg, "train.lr_decay_epochs", &n);
    (void)vtr_config_string_list(cfg, "data.splits", &n);
    vtr_config_free(cfg);
    return 0;
}

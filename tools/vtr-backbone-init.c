/* vtr-backbone-init: write untrained ResNet weights, initialised as torchvision does, under
 * torchvision's names (features/backbone_init.h): the backbone of make demo, where no
 * pretrained weights can be downloaded. */
#include <getopt.h>
#include <stdio.h>

#include "features/backbone_init.h"
#include "lib/args.h"
#include "lib/log.h"
#include "lib/version.h"

static void usage(FILE *out)
{
    fputs("Usage: vtr-backbone-init [OPTION]... -o FILE\n"
          "Writes the weights of an untrained torchvision ResNet (weights=None): convolutions\n"
          "kaiming_normal_(fan_out, relu), batch norms weight 1, bias 0, running mean 0 and\n"
          "variance 1, the classifier as PyTorch's Linear; safetensors under torchvision's\n"
          "names, drawn from the seed (the same seed gives the same bytes), the architecture\n"
          "recorded in the metadata (\"arch\"): vtr-features and vtr-index read them with\n"
          "--weights alone. This is NOT a pretrained network: its features are fixed random\n"
          "projections of the pixels.\n"
          "\n"
          "  -a, --arch NAME   resnet18, resnet34, resnet50, resnet101 or resnet152 [resnet18]\n"
          "      --seed S      [0]\n"
          "  -o, --output FILE the safetensors file (written atomically)\n"
          "  -h, --help        this text\n"
          "      --version     the version\n"
          "\n"
          "Exit status: 0 written; 1 bad usage or the file could not be written.\n",
          out);
}

int main(int argc, char **argv)
{
    enum { OPT_SEED = 256, OPT_VERSION };
    static const struct option options[] = {
        {"arch", required_argument, NULL, 'a'},
        {"seed", required_argument, NULL, OPT_SEED},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    vtr_log_init("vtr-backbone-init", false);
    vtr_backbone_arch arch = VTR_RESNET18;
    long long seed = 0;
    const char *output = NULL;
    vtr_error err;
    vtr_error_clear(&err);
    int opt;
    while ((opt = getopt_long(argc, argv, "a:o:h", options, NULL)) != -1) {
        switch (opt) {
        case 'a':
            if (vtr_backbone_arch_parse(optarg, &arch, &err) != VTR_OK) {
                vtr_log_item_error(NULL, &err);
                return 1;
            }
            break;
        case OPT_SEED:
            if (vtr_parse_int(optarg, 0, INT64_MAX, &seed) != 0) {
                fprintf(stderr, "vtr-backbone-init: --seed: '%s' is not a number >= 0\n",
                        optarg);
                return 1;
            }
            break;
        case 'o': output = optarg; break;
        case 'h': usage(stdout); return 0;
        case OPT_VERSION: printf("vtr-backbone-init %s\n", vtr_version); return 0;
        default: fputs("Try 'vtr-backbone-init --help'.\n", stderr); return 1;
        }
    }
    if (!output || optind != argc) {
        fputs("vtr-backbone-init: name the output with -o FILE (see --help)\n", stderr);
        return 1;
    }
    if (vtr_backbone_init_write(output, arch, (uint64_t)seed, &err) != VTR_OK) {
        vtr_log_item_error(output, &err);
        return 1;
    }
    return 0;
}

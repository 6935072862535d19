/* vtr-backbone-init: backbone weights for vtr-features and vtr-index: an untrained ResNet,
 * initialised as torchvision does, under torchvision's names (features/backbone_init.h:
 * the backbone of make demo when nothing else is at hand), or a pretrained Keras CNN
 * converted from a TensorFlow.js layers model (features/tfjs_model.h). */
#include <getopt.h>
#include <stdio.h>

#include "features/backbone_init.h"
#include "features/tfjs_model.h"
#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/log.h"
#include "lib/version.h"

static void usage(FILE *out)
{
    fputs("Usage: vtr-backbone-init [-a ARCH] [--seed S] -o FILE\n"
          "  or:  vtr-backbone-init --tfjs MODEL.json [--mean R,G,B] [--std R,G,B] -o FILE\n"
          "Writes backbone weights that vtr-features and vtr-index read with --weights alone\n"
          "(the architecture is recorded in the file's metadata, \"arch\").\n"
          "\n"
          "Without --tfjs: an untrained torchvision ResNet (weights=None): convolutions\n"
          "kaiming_normal_(fan_out, relu), batch norms weight 1, bias 0, running mean 0 and\n"
          "variance 1, the classifier as PyTorch's Linear; safetensors under torchvision's\n"
          "names, drawn from the seed (the same seed gives the same bytes). This is NOT a\n"
          "pretrained network: its features are fixed random projections of the pixels.\n"
          "\n"
          "With --tfjs: a TensorFlow.js layers model (model.json and the weight files beside\n"
          "it, as tensorflowjs_converter writes them; uint8/uint16/float16-quantised weights\n"
          "are expanded to float32) converted to safetensors: the weights under their Keras\n"
          "names and the layer graph in the metadata. vtr runs Keras CNNs built of\n"
          "convolutions (depthwise too), batch norms, ReLU/ReLU6, additions, poolings and\n"
          "concatenations, up to the map before the classifier: MobileNetV2 and InceptionV3\n"
          "are recognised by name (pipeline/nsfwjs.sh fetches both from npm). --mean and --std\n"
          "record the normalisation the model expects, of pixel / 255 [0,0,0 and 1,1,1: the\n"
          "pixel / 255 of TF.js image models]; the input layer's size is recorded as the\n"
          "resize and crop.\n"
          "\n"
          "  -a, --arch NAME   resnet18, resnet34, resnet50, resnet101 or resnet152 [resnet18]\n"
          "      --seed S      [0]\n"
          "      --tfjs FILE   a TF.js layers model.json to convert\n"
          "      --mean R,G,B  with --tfjs [0,0,0]\n"
          "      --std R,G,B   with --tfjs [1,1,1]\n"
          "  -o, --output FILE the safetensors file (written atomically)\n"
          "  -h, --help        this text\n"
          "      --version     the version\n"
          "\n"
          "Exit status: 0 written; 1 bad usage, a model that cannot be read or run, or a file\n"
          "that could not be written.\n",
          out);
}

int main(int argc, char **argv)
{
    enum { OPT_SEED = 256, OPT_VERSION, OPT_TFJS, OPT_MEAN, OPT_STD };
    static const struct option options[] = {
        {"arch", required_argument, NULL, 'a'},
        {"seed", required_argument, NULL, OPT_SEED},
        {"tfjs", required_argument, NULL, OPT_TFJS},
        {"mean", required_argument, NULL, OPT_MEAN},
        {"std", required_argument, NULL, OPT_STD},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    vtr_log_init("vtr-backbone-init", false);
    vtr_backbone_arch arch = VTR_RESNET18;
    long long seed = 0;
    const char *output = NULL, *tfjs = NULL;
    const char *resnet_option = NULL, *tfjs_option = NULL; /* given, for the conflict check */
    float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    vtr_error err;
    vtr_error_clear(&err);
    int opt;
    while ((opt = getopt_long(argc, argv, "a:o:h", options, NULL)) != -1) {
        const char *bad = NULL;
        switch (opt) {
        case 'a':
            resnet_option = "--arch";
            if (vtr_backbone_arch_parse(optarg, &arch, &err) != VTR_OK ||
                arch > VTR_RESNET152) {
                fprintf(stderr, "vtr-backbone-init: --arch is resnet18, resnet34, resnet50, "
                        "resnet101 or resnet152 (other architectures come with --tfjs)\n");
                return 1;
            }
            break;
        case OPT_SEED:
            resnet_option = "--seed";
            if (vtr_parse_int(optarg, 0, INT64_MAX, &seed) != 0)
                bad = "--seed needs a number >= 0";
            break;
        case OPT_TFJS: tfjs = optarg; break;
        case OPT_MEAN:
            tfjs_option = "--mean";
            if (vtr_parse_floats(optarg, 3, mean) != 0)
                bad = "--mean needs R,G,B";
            break;
        case OPT_STD:
            tfjs_option = "--std";
            if (vtr_parse_floats(optarg, 3, std) != 0 || !(std[0] > 0) || !(std[1] > 0) ||
                !(std[2] > 0))
                bad = "--std needs three positive numbers R,G,B";
            break;
        case 'o': output = optarg; break;
        case 'h': usage(stdout); return 0;
        case OPT_VERSION:
            printf("vtr-backbone-init %s\n%s\n", vtr_version, vtr_blas_kernel_report());
            return 0;
        default: fputs("Try 'vtr-backbone-init --help'.\n", stderr); return 1;
        }
        if (bad) {
            fprintf(stderr, "vtr-backbone-init: %s, not '%s'\n", bad, optarg);
            return 1;
        }
    }
    if (!output || optind != argc) {
        fputs("vtr-backbone-init: name the output with -o FILE (see --help)\n", stderr);
        return 1;
    }
    if (tfjs ? resnet_option != NULL : tfjs_option != NULL) {
        fprintf(stderr, "vtr-backbone-init: %s %s --tfjs\n", tfjs ? resnet_option : tfjs_option,
                tfjs ? "is for an untrained ResNet, not with" : "goes with");
        return 1;
    }
    if (!tfjs) {
        if (vtr_backbone_init_write(output, arch, (uint64_t)seed, &err) != VTR_OK) {
            vtr_log_item_error(output, &err);
            return 1;
        }
        return 0;
    }
    vtr_tfjs_model m;
    if (vtr_tfjs_model_read(tfjs, &m, &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        return 1;
    }
    vtr_status st = vtr_tfjs_model_save(&m, tfjs, mean, std, output, &err);
    vtr_tfjs_model_free(&m);
    if (st != VTR_OK) {
        vtr_log_item_error(st == VTR_ERR_IO ? output : NULL, &err);
        return 1;
    }
    return 0;
}

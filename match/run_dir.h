/* The files of a training run's directory (what each holds: match/trainer.h and
 * match/run_record.h). vtr-train writes them; a checkpoint's readers look beside it for
 * the vocabulary (match/trained_model.h). */
#ifndef VTR_RUN_DIR_H
#define VTR_RUN_DIR_H

#define VTR_RUN_LAST "last.safetensors"
#define VTR_RUN_BEST "best.safetensors"
#define VTR_RUN_METRICS "metrics.jsonl"
#define VTR_RUN_CONFIG "config.yaml"
#define VTR_RUN_VOCAB "vocab.json"

#endif

# pipeline/vatex.mk: VATEX from its release -> per-clip ResNet features, a feature store
# and the English captions in the catalog (the work is pipeline/videos.mk's).
#
#   make -f pipeline/vatex.mk VATEX=/data/vatex WEIGHTS=resnet152.safetensors -j8
#
# The layout under VATEX:
#   vatex_training_v1.0.json, vatex_validation_v1.0.json, vatex_public_test_english_v1.1.json
#                       lists of {"videoID", "enCap", "chCap"}; the split of each file
#                       comes from its official name (docs/importers.md)
#   videos/VIDEOID.mp4  the 10-second clips, named by their videoID as the release names
#                       them: YOUTUBEID_START_END with 6-digit seconds, e.g.
#                       Ptf_2VRj-V0_000122_000132.mp4 (VIDEO_DIR to point elsewhere)
# Keys are the videoIDs, so captions, splits and features meet in the catalog. HGR's
# 1,500 / 1,500 division of the validation set is not in these files: import the HGR
# release's names (pipeline/released.mk) or give the split per file (docs/importers.md).
# Defaults: DATASET=vatex, OUT=out/vatex, DECODE_FLAGS=--every 16, ResNet-152 (the
# papers' VATEX features are the official I3D ones, which vtr does not compute).

ifeq ($(strip $(VATEX)),)
ifneq ($(filter-out list-targets failed clean-tmp,$(or $(MAKECMDGOALS),all)),)
$(error VATEX=DIR is required: the directory holding the vatex_*.json files and videos/)
endif
endif
DATASET ?= vatex
OUT ?= out/vatex
VIDEO_DIR ?= $(VATEX)/videos
VIDEOS ?= $(VIDEO_DIR)
ANNOTATION_LAYOUT := vatex
ANNOTATIONS ?= $(wildcard $(VATEX)/vatex_*.json)

include $(dir $(lastword $(MAKEFILE_LIST)))videos.mk

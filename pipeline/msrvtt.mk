# pipeline/msrvtt.mk: MSR-VTT from its release -> per-video ResNet features, a feature
# store and the annotations in the catalog (the work is pipeline/videos.mk's).
#
#   make -f pipeline/msrvtt.mk MSRVTT=/data/msrvtt WEIGHTS=resnet152.safetensors -j8
#
# The release's layout under MSRVTT:
#   TrainValVideo/video0.mp4 .. video7009.mp4      train_val_videos.zip (train + validate)
#   TestVideo/video7010.mp4 .. video9999.mp4       test_videos.zip
#   train_val_videodatainfo.json                   annotations (2016), 6513 train + 497 val
#   test_videodatainfo.json                        2990 test
# Keys are the video ids (video0 .. video9999): the annotation JSON's "video_id" and the
# file names agree, so the captions and splits meet the features in the catalog.
# Defaults: DATASET=msrvtt, OUT=out/msrvtt, HGR's sampling (DECODE_FLAGS=--every 16) and
# ResNet-152 (ARCH); every variable of videos.mk can be set.

ifeq ($(strip $(MSRVTT)),)
ifneq ($(filter-out list-targets failed clean-tmp,$(or $(MAKECMDGOALS),all)),)
$(error MSRVTT=DIR is required: the directory holding TrainValVideo/, TestVideo/ and the annotation JSON)
endif
endif
DATASET ?= msrvtt
OUT ?= out/msrvtt
VIDEOS ?= $(MSRVTT)/TrainValVideo $(MSRVTT)/TestVideo
ANNOTATION_LAYOUT := msrvtt
ANNOTATIONS ?= $(wildcard $(MSRVTT)/train_val_videodatainfo.json $(MSRVTT)/test_videodatainfo.json)

include $(dir $(lastword $(MAKEFILE_LIST)))videos.mk

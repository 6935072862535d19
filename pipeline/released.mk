# pipeline/released.mk: features others released -> feature stores and the catalog.
#
#   make -f pipeline/released.mk HGR=/data/hgr/MSRVTT DATASET=msrvtt
#   make -f pipeline/released.mk PRECOMP=/data/coco_precomp DATASET=coco IMPORT_FLAGS=--half
#
# One target per release, each an import by vtr-import into OUT/catalog.db (one
# transaction) and a new store (built beside its final name, then renamed; an earlier
# store is replaced), then a stamp OUT/stamps/NAME that makes the import happen again
# only when a source file changes. Layouts: docs/importers.md.
#
#   HGR              the HGR release's directory for one dataset (cshizhe/hgr_v2t), e.g.
#                    MSRVTT/: annotation/RET/ref_captions.json,
#                    public_split/{trn,val,tst}_names.npy,
#                    ordered_feature/SA/NAME/{trn,val,tst}_ft.hdf5 (MP/NAME/*.npy)
#   HGR_FEATURES     the feature directory NAME [the only one]
#   HGR_MEAN_POOLED  set to 1: the mean-pooled MP arrays, one row per video
#   HGR_STORE        [OUT/stores/DATASET-hgr]
#   PRECOMP          a SCAN / VSE precomp directory: {train,dev,test,testall}_ims.npy,
#                    _caps.txt [, _ids.txt]
#   CAPTIONS_PER_IMAGE  precomp caption lines per image [5]
#   PRECOMP_STORE    [OUT/stores/DATASET-precomp]
#   DATASET          the dataset's name in the catalog [released]
#   OUT              [out]; CATALOG [OUT/catalog.db]
#   IMPORT_FLAGS     more vtr-import options, e.g. --half, --keep-going
#   VTR_BIN          directory of the vtr programs [found on PATH]
#
# Goals: all (each release named) [default], hgr, precomp.

.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.SUFFIXES:

OUT ?= out
CATALOG ?= $(OUT)/catalog.db
DATASET ?= released
HGR_STORE ?= $(OUT)/stores/$(DATASET)-hgr
PRECOMP_STORE ?= $(OUT)/stores/$(DATASET)-precomp
CAPTIONS_PER_IMAGE ?= 5
IMPORT_FLAGS ?=
VTR = $(if $(VTR_BIN),$(VTR_BIN)/)

ifeq ($(strip $(HGR)$(PRECOMP)),)
$(error name a release: HGR=DIR (the HGR layout) and/or PRECOMP=DIR (SCAN precomp))
endif

hgr_sources := $(wildcard $(HGR)/annotation/RET/ref_captions.json $(HGR)/public_split/*_names.npy \
                 $(if $(HGR_MEAN_POOLED),$(HGR)/ordered_feature/MP/$(or $(HGR_FEATURES),*)/*.npy, \
                                         $(HGR)/ordered_feature/SA/$(or $(HGR_FEATURES),*)/*.hdf5))
precomp_sources := $(wildcard $(PRECOMP)/*_ims.npy $(PRECOMP)/*_caps.txt $(PRECOMP)/*_ids.txt)
hgr_flags := $(if $(HGR_FEATURES), --hgr-features $(HGR_FEATURES))$(if $(HGR_MEAN_POOLED), --hgr-mean-pooled)$(if $(IMPORT_FLAGS), $(IMPORT_FLAGS))
precomp_flags := $(if $(filter-out 5,$(CAPTIONS_PER_IMAGE)), --captions-per-image $(CAPTIONS_PER_IMAGE))$(if $(IMPORT_FLAGS), $(IMPORT_FLAGS))
HGR_STAMP := $(if $(HGR),$(OUT)/stamps/$(DATASET)-hgr)
PRECOMP_STAMP := $(if $(PRECOMP),$(OUT)/stamps/$(DATASET)-precomp)

.PHONY: all hgr precomp
all: $(HGR_STAMP) $(PRECOMP_STAMP)
hgr: $(HGR_STAMP)
precomp: $(PRECOMP_STAMP)

$(OUT)/stamps/$(DATASET)-hgr: $(hgr_sources)
	@test -n "$^" || { echo "HGR=$(HGR): no annotation/RET/ref_captions.json or features there" >&2; exit 1; }
	@mkdir -p $(@D) $(dir $(HGR_STORE))
	$(VTR)vtr-import hgr $(HGR) -c $(CATALOG) -d $(DATASET) --store $(HGR_STORE) --replace$(hgr_flags)
	@touch $@

# after the HGR import when both are named: they share the catalog
$(OUT)/stamps/$(DATASET)-precomp: $(precomp_sources) | $(HGR_STAMP)
	@test -n "$^" || { echo "PRECOMP=$(PRECOMP): no *_ims.npy or *_caps.txt there" >&2; exit 1; }
	@mkdir -p $(@D) $(dir $(PRECOMP_STORE))
	$(VTR)vtr-import precomp $(PRECOMP) -c $(CATALOG) -d $(DATASET) --store $(PRECOMP_STORE) --replace$(precomp_flags)
	@touch $@

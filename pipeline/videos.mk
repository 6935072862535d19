# pipeline/videos.mk: a video archive -> per-item CNN features -> one feature store.
#
#   make -f pipeline/videos.mk VIDEOS=videos/ WEIGHTS=resnet152.safetensors -j8 [-k]
#
# One target per video, OUT/features/KEY.npy (+ KEY.json): vtr-decode samples its frames
# into a temporary record file, vtr-features turns them into a feature set and writes
# the NPY pair atomically; the temporary frames are removed. Then vtr-import npy-dir
# builds one store from every OUT/features/*.npy (atomically, replacing the last one)
# and registers it in the catalog, after the dataset's annotations when a fragment
# names them (msrvtt.mk, vatex.mk). KEY is the file name without directory and
# extension, as vtr-decode names items.
#
# Restartable: a killed make leaves no target half-written (the programs write to
# temporary names and rename), and a rerun builds only what is missing or older than
# its video. A video removed from the source takes its item out of the store at the next
# run: its features are set aside in OUT/gone/ (not deleted) before the store is
# rebuilt. Parallel: make -j N runs N items at once. A failing item (a corrupt video)
# stops nothing: `all` builds every item it can, then the store from the items built,
# lists the failed ones at the end (their messages kept in OUT/failed/KEY.err; a failed
# item's earlier features are removed, so no stale features enter the store) and exits
# non-zero. EXCLUDE names videos to leave out. File names reach make and the shell: a name make cannot carry in a
# target (white space and : ; % # $ \ = * ? [ ] ( ) | and control characters) stops make
# at once with a message naming it; every other name (quotes, backticks, &, <, >, ...)
# reaches the recipes single-quoted, so no name is ever run as a command.
#
# Variables (VAR=value on the command line):
#   VIDEOS          directories (their VIDEO_EXTS files) and/or video files
#   VIDEO_LIST      a file of video paths, one a line (added to VIDEOS)
#   EXCLUDE         a file of videos to leave out, one key or path a line ('#' comments)
#   VIDEO_EXTS      the extensions taken from directories, in lower case (upper case too)
#                   [vtr-index's: mp4 m4v mov mkv webm avi mpg mpeg vob m2v ts mts m2ts
#                   mxf dv flv f4v wmv asf rm rmvb 3gp 3g2 ogv gif jpg jpeg png bmp webp
#                   tif tiff avif jxl heic heif; an image is a one-frame video]
#   WEIGHTS         backbone weights, safetensors with torchvision's names [required]
#   ARCH            resnet18 .. resnet152 [resnet152]
#   DECODE_FLAGS    vtr-decode sampling and geometry [--every 16]: HGR's one frame in 16
#   FEATURES_FLAGS  more vtr-features options, e.g. --device cuda --half --threads 4
#   OUT             output directory [out]
#   CATALOG         [OUT/catalog.db]
#   DATASET         the dataset's name in the catalog [videos]
#   STORE           the feature store [OUT/store]
#   IMPORT_FLAGS    more vtr-import options for the store, e.g. --half
#   VTR_BIN         directory of the vtr programs [found on PATH]
#   (from a dataset fragment) ANNOTATION_LAYOUT, ANNOTATIONS: vtr-import LAYOUT FILES...
#
# Goals:
#   all             every item it can build, then the store of those; failed items
#                   listed at the end, exit status non-zero when there are any [default]
#   items           every item's features
#   store           the store (and annotations) of the items built so far
#   annotations     the annotation import alone
#   list-targets    print the per-item targets, one a line (pipeline/slurm-array.sh)
#   failed          list the items whose last build failed, with their last message
#   clean-tmp       remove temporary frames left by a killed run

# the fragment make was given (-f), for the recursive call of `all`
VTR_FRAGMENT := $(firstword $(MAKEFILE_LIST))
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.SUFFIXES:

OUT ?= out
CATALOG ?= $(OUT)/catalog.db
DATASET ?= videos
STORE ?= $(OUT)/store
ARCH ?= resnet152
DECODE_FLAGS ?= --every 16
FEATURES_FLAGS ?=
IMPORT_FLAGS ?=
VIDEO_EXTS ?= mp4 m4v mov mkv webm avi mpg mpeg vob m2v ts mts m2ts mxf dv flv f4v wmv asf rm \
    rmvb 3gp 3g2 ogv gif jpg jpeg png bmp webp tif tiff avif jxl heic heif
VTR = $(if $(VTR_BIN),$(VTR_BIN)/)
define vtr_newline


endef

vtr_exts := $(sort $(VIDEO_EXTS) $(shell echo '$(VIDEO_EXTS)' | tr a-z A-Z))
vtr_dir_videos := $(foreach v,$(VIDEOS),$(if $(wildcard $(v)/.),$(sort $(foreach e,$(vtr_exts),$(wildcard $(v)/*.$(e))))))
vtr_listed := $(vtr_dir_videos) $(foreach v,$(VIDEOS),$(if $(wildcard $(v)/.),,$(v))) \
              $(if $(VIDEO_LIST),$(shell cat '$(VIDEO_LIST)'))
# EXCLUDE: keys or paths, one a line, '#' comments
vtr_excluded := $(if $(EXCLUDE),$(shell sed -e 's/\#.*//' '$(EXCLUDE)'))
vtr_videos := $(foreach v,$(vtr_listed),$(if $(filter $(v) $(basename $(notdir $(v))),$(vtr_excluded)),,$(v)))
# a name with a space comes back from a directory as several words, of which some are no file
vtr_split := $(firstword $(foreach v,$(vtr_dir_videos),$(if $(wildcard $(v)),,$(v))))
ifneq ($(vtr_split),)
$(error a video file name holds a space (make sees a piece of it: '$(vtr_split)'): make cannot build targets with spaces; rename such files, or index them with vtr-index)
endif
# the other characters make cannot carry in a target, found by grep in a file of the
# names (no name is ever part of a command line)
vtr_names_file := $(or $(TMPDIR),/tmp)/vtr-names.$(shell echo $$PPID)
$(file >$(vtr_names_file),$(subst $(subst ,, ),$(vtr_newline),$(strip $(vtr_videos))))
vtr_unsafe := $(shell LC_ALL=C grep -n '[]:;%\#$$\\=*?[()|[:cntrl:]]' '$(vtr_names_file)' | head -n 1; rm -f '$(vtr_names_file)')
ifneq ($(vtr_unsafe),)
$(error video $(word 1,$(subst :, ,$(vtr_unsafe))) of the list holds a character make cannot carry in a target (one of : ; % \# $$ \ = * ? [ ] ( ) | or a control character): '$(patsubst $(word 1,$(subst :, ,$(vtr_unsafe))):%,%,$(vtr_unsafe))'; rename such files, or index them with vtr-index)
endif
# a name single-quoted for the shell
vtr_q = '$(subst ','\'',$(1))'
vtr_key = $(basename $(notdir $(1)))
vtr_keys := $(foreach v,$(vtr_videos),$(call vtr_key,$(v)))
ifneq ($(words $(vtr_keys)),$(words $(sort $(vtr_keys))))
$(error two videos have the same key: $(sort $(foreach k,$(vtr_keys),$(if $(filter-out 1,$(words $(filter $(k),$(vtr_keys)))),$(k)))))
endif
$(foreach v,$(vtr_videos),$(eval vtr_video_of_$(call vtr_key,$(v)) := $(v)))

# what the goal needs, checked before anything runs
vtr_building := $(filter-out list-targets failed clean-tmp annotations,$(or $(MAKECMDGOALS),all))
ifneq ($(vtr_building),)
ifeq ($(strip $(WEIGHTS)),)
$(error WEIGHTS=FILE is required: the backbone's weights, safetensors with torchvision's names)
endif
ifeq ($(strip $(vtr_videos)),)
$(error no videos: set VIDEOS=DIR... or VIDEO_LIST=FILE (extensions: $(VIDEO_EXTS)))
endif
endif

FEATURES := $(vtr_keys:%=$(OUT)/features/%.npy)
STORE_STAMP := $(OUT)/stamps/store
ANNOTATIONS_STAMP := $(if $(ANNOTATIONS),$(OUT)/stamps/annotations)

# The sorted keys of the source, in OUT/stamps/keys, rewritten (atomically) only when they
# change, so that a removed video, which no prerequisite names any more, still makes the
# store out of date.
# OUT/stamps/built likewise holds the keys whose features exist: an item built or lost
# (deleted, failed) changes the store.
KEYS_STAMP := $(OUT)/stamps/keys
BUILT_STAMP := $(OUT)/stamps/built
vtr_built := $(wildcard $(FEATURES))
ifneq ($(vtr_building),)
# write_stamp(FILE,WORDS): FILE holds WORDS, one a line, rewritten only when they change
define write_stamp
$(shell mkdir -p $(OUT)/stamps)
$(file >$(1).$(shell echo $$PPID),$(subst $(subst ,, ),$(vtr_newline),$(sort $(2))))
$(shell cmp -s $(1).$(shell echo $$PPID) $(1) && rm -f $(1).$(shell echo $$PPID) || mv -f $(1).$(shell echo $$PPID) $(1))
endef
$(eval $(call write_stamp,$(KEYS_STAMP),$(vtr_keys)))
$(eval $(call write_stamp,$(BUILT_STAMP),$(notdir $(vtr_built))))
endif

.PHONY: all items store annotations list-targets failed clean-tmp

# Recursive makes: every item that can be built (-k), then the store of the items built
# (read anew: a failed item has no features), then the failures listed.
all:
	@st=0; $(MAKE) --no-print-directory -k -f $(VTR_FRAGMENT) items || st=$$?; \
	$(MAKE) --no-print-directory -f $(VTR_FRAGMENT) store || st=$$?; \
	if [ $$st -ne 0 ]; then $(MAKE) --no-print-directory -s -f $(VTR_FRAGMENT) failed >&2; fi; \
	exit $$st

items: $(FEATURES)
store: $(STORE_STAMP)
annotations: $(ANNOTATIONS_STAMP)

list-targets:
	@$(foreach t,$(FEATURES),printf '%s\n' $(call vtr_q,$(t));)

failed:
	@list=$$(for f in $(OUT)/failed/*.err; do [ -f "$$f" ] || continue; k=$${f##*/}; \
	    echo "  $${k%.err}: $$(grep . "$$f" | tail -n 1)"; done); \
	if [ -n "$$list" ]; then \
	    echo "failed items ($$(echo "$$list" | wc -l); messages in $(OUT)/failed/KEY.err):"; \
	    echo "$$list"; fi

clean-tmp:
	rm -rf $(OUT)/tmp

# One item: frames into a temporary record file, features into OUT/features (both
# programs write atomically), the frames removed. The messages of a failed item are
# kept in OUT/failed/KEY.err; a success removes that file.
.SECONDEXPANSION:
$(FEATURES): $(OUT)/features/%.npy: $$(vtr_video_of_$$*) $(WEIGHTS)
	@mkdir -p $(OUT)/features $(OUT)/tmp $(OUT)/failed
	@key=$(call vtr_q,$*); echo "item $$key"
	@key=$(call vtr_q,$*) video=$(call vtr_q,$<) target=$(call vtr_q,$@); \
	tmp="$(OUT)/tmp/$$key.$$$$.rec" log="$(OUT)/failed/$$key.log.$$$$"; \
	{ $(VTR)vtr-decode $(DECODE_FLAGS) -o "$$tmp" "$$video" && \
	  $(VTR)vtr-features -w $(WEIGHTS) -a $(ARCH) $(FEATURES_FLAGS) --out-dir $(OUT)/features "$$tmp"; \
	} 2>"$$log"; st=$$?; rm -f "$$tmp"; cat "$$log" >&2; \
	if [ $$st -eq 0 ] && [ -f "$$target" ]; then rm -f "$$log" "$(OUT)/failed/$$key.err"; \
	else [ $$st -ne 0 ] || echo "$$key: no features written" | tee -a "$$log" >&2; \
	     rm -f "$$target" "$(OUT)/features/$$key.json"; \
	     mv -f "$$log" "$(OUT)/failed/$$key.err"; exit 1; fi

# The annotations and the store change the catalog: they run one after the other.
$(OUT)/stamps/annotations: $(ANNOTATIONS)
	@mkdir -p $(@D)
	$(VTR)vtr-import $(ANNOTATION_LAYOUT) $(ANNOTATIONS) -c $(CATALOG) -d $(DATASET)
	@touch $@

# Features whose video is no longer in the source are set aside (OUT/gone/) and its
# failure messages dropped, then the store is rebuilt from the features that remain: the
# items built (a failed one has none).
$(STORE_STAMP): $(vtr_built) $(ANNOTATIONS_STAMP) $(KEYS_STAMP) $(BUILT_STAMP)
	@mkdir -p $(@D) $(dir $(STORE))
	@export LC_ALL=C; ls $(OUT)/features | sed -n 's/\.npy$$//p' | sort | \
	comm -23 - $(KEYS_STAMP) | while IFS= read -r k; do mkdir -p $(OUT)/gone && \
	    mv -f "$(OUT)/features/$$k.npy" $(OUT)/gone/ && \
	    { [ ! -f "$(OUT)/features/$$k.json" ] || mv -f "$(OUT)/features/$$k.json" $(OUT)/gone/; } && \
	    echo "set aside $$k: its video is gone (features in $(OUT)/gone/)"; done; \
	ls $(OUT)/failed 2>/dev/null | sed -n 's/\.err$$//p' | sort | comm -23 - $(KEYS_STAMP) | \
	while IFS= read -r k; do rm -f "$(OUT)/failed/$$k.err"; done
	$(VTR)vtr-import npy-dir $(OUT)/features -c $(CATALOG) -d $(DATASET) --store $(STORE) --replace $(IMPORT_FLAGS)
	@touch $@

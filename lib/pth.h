/* torch.save files (.pth, .pt) of a state_dict, read without PyTorch and without running
 * their pickle.
 *
 * Format (torch.save's default since PyTorch 1.6; torchvision's released weights, e.g.
 * resnet50-0676ba61.pth, are in it): a zip archive of stored entries (lib/zip.h) under
 * one folder P (any name): P/data.pkl, a pickle of the object saved; P/data/KEY, the raw
 * bytes of each storage; P/version; newer PyTorch adds P/byteorder. The older format (a
 * bare pickle stream, PyTorch < 1.6, e.g. resnet50-19c8e357.pth) is not read
 * (lib/tensor_file.h says how to convert it).
 *
 * The pickle: a small interpreter of the opcodes that torch.save (protocol 2) writes for
 * a state_dict: PROTO, STOP, MARK, EMPTY_DICT, SETITEM(S), EMPTY_TUPLE, TUPLE, TUPLE1-3,
 * (SHORT_)BINUNICODE, BININT, BININT1, BININT2, LONG1, BINFLOAT, NONE, NEWTRUE,
 * NEWFALSE, (LONG_)BINPUT, (LONG_)BINGET, GLOBAL, REDUCE, BUILD and BINPERSID. Any other
 * opcode is VTR_ERR_UNSUPPORTED naming it and its byte. GLOBAL takes only
 * collections.OrderedDict, torch._utils._rebuild_tensor_v2,
 * torch._utils._rebuild_parameter and the storage types torch.FloatStorage (float32),
 * HalfStorage, BFloat16Storage, ByteStorage (uint8), IntStorage (int32) and LongStorage
 * (int64); REDUCE "calls" only the first three, with the arguments torch.save gives them
 * (OrderedDict(), _rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
 * OrderedDict() [, metadata]), _rebuild_parameter(tensor, requires_grad, OrderedDict()));
 * BUILD only gives a dict its attributes (the _metadata of a state_dict: ignored). Nothing
 * named in the file is ever looked up or run: any other GLOBAL (os.system, ...) is refused
 * where it appears. BINPERSID takes ('storage', storage type, KEY, location, numel): the
 * entry P/data/KEY, which must hold exactly numel elements; the location (cpu, cuda:0)
 * does not matter, the bytes are the same.
 *
 * The object saved must be a dict of names to tensors (model.state_dict()): a checkpoint
 * that nests it ({"model": ...}) is refused naming the key that holds no tensor. Names
 * are non-empty UTF-8 without NUL bytes, unique. A tensor is a view of its storage that
 * must lie within it and be contiguous (row-major strides; a dimension of size 1 may have
 * any stride), of at most VTR_MAX_DIMS dimensions, else VTR_ERR_UNSUPPORTED naming it.
 * Storages are little-endian (a P/byteorder other than "little" is VTR_ERR_UNSUPPORTED).
 * Several tensors may share a storage.
 *
 * Bounded: the interpreter never recurses, and what it holds grows at most linearly with
 * the pickle.
 */
#ifndef VTR_PTH_H
#define VTR_PTH_H

#include "error.h"
#include "safetensors.h"

/* Parses a torch.save image held in memory into the table of lib/safetensors.h: entries
 * sorted by name, each tensor's data pointing into buf (no copy: buf must outlive out;
 * at any alignment in other files, 64-byte aligned storages in torch.save's), metadata
 * NULL. Release it with vtr_safetensors_close. On failure out is zeroed. Malformed input
 * is VTR_ERR_FORMAT, what is outside the subset above VTR_ERR_UNSUPPORTED, each one line
 * naming the opcode and its byte in data.pkl, or the tensor; VTR_ERR_NOMEM. */
vtr_status vtr_pth_parse(const void *buf, size_t len, vtr_safetensors *out, vtr_error *err);

#endif

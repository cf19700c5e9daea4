/* cz_safetensors.h - Hugging Face safetensors checkpoints, single-file and sharded.
 *
 * A `.safetensors` file is an 8-byte little-endian header length N, N bytes of a JSON object
 * mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (plus an
 * optional "__metadata__" object of strings), then the data section the offsets index
 * (huggingface/safetensors, README "Format"). A sharded checkpoint adds
 * `model.safetensors.index.json`, whose "weight_map" names the shard file of each tensor.
 *
 * Files are mapped read-only (mmap) and validated whole at open, the way the reference
 * implementation does: a header length inside the file and at most 100,000,000 bytes, a
 * well-formed JSON object, known dtypes (F32, BF16, F16; any other is an error naming it),
 * shapes of at most CZ_ST_MAX_DIMS dimensions, offsets inside the data section with
 * end - begin = product(shape) x dtype size, and tensors that tile the data section
 * exactly: none overlapping, no byte outside a tensor. Every message names the file, the
 * tensor and what was expected, e.g. `model.safetensors: tensor 'lm_head.weight': expected
 * shape (1000, 64), got (1000, 32)`. Tensor data stay in the mapping: readers copy them out
 * (a tensor's bytes need not be aligned to its element size). */
#ifndef CZ_SAFETENSORS_H
#define CZ_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"

/* Most dimensions of a tensor. */
#define CZ_ST_MAX_DIMS 8
/* Largest header length accepted (the reference implementation's limit). */
#define CZ_ST_HEADER_MAX 100000000u

/* Element types the engine reads. */
typedef enum cz_st_dtype {
    CZ_ST_F32 = 0,
    CZ_ST_BF16,
    CZ_ST_F16
} cz_st_dtype;

/* One tensor of a checkpoint. Valid while its checkpoint is open. */
typedef struct cz_st_tensor {
    const char *name;
    const char *file;               /* the file holding it, as opened (for messages) */
    cz_st_dtype dtype;
    uint32_t ndim;
    uint64_t shape[CZ_ST_MAX_DIMS];
    uint64_t nbytes;                /* product(shape) x dtype size */
    const uint8_t *data;            /* nbytes bytes inside the file's mapping */
} cz_st_tensor;

/* A checkpoint: one file or the shards of an index. */
typedef struct cz_safetensors cz_safetensors;

/* "F32", "BF16", "F16". Never NULL. */
const char *cz_st_dtype_name(cz_st_dtype dt);
/* Bytes per element: 4 or 2. */
size_t cz_st_dtype_size(cz_st_dtype dt);

/* Opens and validates one `.safetensors` file. CZ_EIO naming the path when it cannot be
 * opened or mapped, CZ_EFORMAT with the file, the tensor and what was expected when its
 * contents are malformed. On success *out is the checkpoint (cz_st_close frees it). */
cz_status cz_st_open(const char *path, cz_safetensors **out, cz_err *err);

/* Opens a sharded checkpoint from its index (`model.safetensors.index.json`): every shard
 * named in "weight_map" is opened and validated, and every tensor the map names must be
 * in its shard. Shard names are file names in the index's folder (no '/'). Only the
 * tensors of the map are visible. Errors as cz_st_open, naming the index or the shard. */
cz_status cz_st_open_index(const char *index_path, cz_safetensors **out, cz_err *err);

/* Opens the checkpoint of a Hugging Face model folder: `DIR/model.safetensors.index.json`
 * when it exists, else `DIR/model.safetensors`. CZ_ENOTFOUND when neither exists. */
cz_status cz_st_open_dir(const char *dir, cz_safetensors **out, cz_err *err);

/* Validates a whole file image `data[0..size)` (what cz_st_open maps) named `name` in
 * messages, without keeping it: the header parser's entry point for the fuzz harness. */
cz_status cz_st_check(const uint8_t *data, size_t size, const char *name, cz_err *err);

/* The tensor called `name`, or NULL. O(log n). */
const cz_st_tensor *cz_st_find(const cz_safetensors *st, const char *name);

/* The tensor called `name`, which must have `ndim` dimensions equal to shape[]: CZ_EINVAL
 * "FILE: tensor 'NAME': expected shape (64, 64), got (64, 32)" when it differs, and
 * CZ_ENOTFOUND "FILE: no tensor 'NAME' (expected shape (...))" when it is missing (FILE
 * being the index for a sharded checkpoint). */
cz_status cz_st_get(const cz_safetensors *st, const char *name, uint32_t ndim,
                    const uint64_t *shape, const cz_st_tensor **out, cz_err *err);

/* Tensors in name order: count, and the i-th. */
uint32_t cz_st_count(const cz_safetensors *st);
const cz_st_tensor *cz_st_at(const cz_safetensors *st, uint32_t i);
/* The path the checkpoint was opened from (a file or an index). */
const char *cz_st_path(const cz_safetensors *st);

/* Unmaps every file and frees the checkpoint. NULL is a no-op. */
void cz_st_close(cz_safetensors *st);

#endif

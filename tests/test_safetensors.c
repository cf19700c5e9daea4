/* test_safetensors.c - the safetensors reader: files written here byte by byte read back
 * with their dtypes, shapes and data; sharded checkpoints resolve through their index; and
 * every malformed file fails with a message naming the file and the tensor (truncated
 * header, header length beyond the file, offsets out of bounds, overlapping or leaving a
 * hole, a size that disagrees with the shape, an unsupported dtype, a missing tensor, a
 * wrong shape, a missing shard). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_safetensors.h"

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "%s/cz-st-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Writes DIR/name: the 8-byte length of `header`, `header`, then `data_len` bytes (0, 1,
 * 2, ...). Returns the path (static buffer). */
static const char *write_st(const char *name, const char *header, size_t data_len)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    uint64_t n = strlen(header);
    for (int i = 0; i < 8; i++)
        fputc((int)((n >> (8 * i)) & 0xff), f);
    fwrite(header, 1, n, f);
    for (size_t i = 0; i < data_len; i++)
        fputc((int)(i & 0xff), f);
    fclose(f);
    return path;
}

static void write_raw(const char *name, const void *bytes, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fwrite(bytes, 1, n, f);
    fclose(f);
}

/* Opens DIR/name expecting failure with `want`; the message must hold every string of the
 * NULL-terminated list. */
static void expect_fail(const char *name, cz_status want, ...)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cz_safetensors *st = NULL;
    cz_err err;
    cz_err_clear(&err);
    cz_status s = cz_st_open(path, &st, &err);
    cr_assert_eq(s, want, "%s: status %d, message: %s", name, s, err.msg);
    cr_assert_null(st);
    cr_assert(strstr(err.msg, name) != NULL, "message does not name the file: %s", err.msg);
    va_list ap;
    va_start(ap, want);
    for (const char *w = va_arg(ap, const char *); w; w = va_arg(ap, const char *))
        cr_assert(strstr(err.msg, w) != NULL, "'%s' not in: %s", w, err.msg);
    va_end(ap);
}

Test(safetensors, reads_dtypes_shapes_and_data, .init = make_dir, .fini = remove_dir)
{
    /* a (2, 3) F32 = 24 bytes, b (4,) BF16 = 8 bytes, c (2, 2) F16 = 8, an empty tensor;
     * listed out of offset order, with metadata and the spaces writers pad with */
    const char *h = "{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                    "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[32,32]},"
                    "\"c\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[32,40]}}   ";
    const char *path = write_st("model.safetensors", h, 40);
    cz_safetensors *st = NULL;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_st_open(path, &st, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(cz_st_count(st), 4);
    cr_assert_str_eq(cz_st_at(st, 0)->name, "a"); /* name order */
    cr_assert_str_eq(cz_st_at(st, 3)->name, "e");
    const cz_st_tensor *a = cz_st_find(st, "a"), *b = cz_st_find(st, "b");
    const cz_st_tensor *c = cz_st_find(st, "c"), *e = cz_st_find(st, "e");
    cr_assert(a && b && c && e);
    cr_assert_null(cz_st_find(st, "__metadata__"));
    cr_assert_null(cz_st_find(st, "d"));
    cr_assert_eq(a->dtype, CZ_ST_F32);
    cr_assert_eq(b->dtype, CZ_ST_BF16);
    cr_assert_eq(c->dtype, CZ_ST_F16);
    cr_assert_eq(a->ndim, 2);
    cr_assert(a->shape[0] == 2 && a->shape[1] == 3 && a->nbytes == 24);
    cr_assert(b->ndim == 1 && b->shape[0] == 4 && b->nbytes == 8);
    cr_assert_eq(e->nbytes, 0);
    cr_assert_eq(a->data[0], 0);
    cr_assert_eq(b->data[0], 24); /* the data section's byte i is i */
    cr_assert_eq(c->data[7], 39);
    cr_assert_str_eq(a->file, path);
    const cz_st_tensor *got = NULL;
    uint64_t shape[2] = {2, 3};
    cr_assert_eq(cz_st_get(st, "a", 2, shape, &got, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(got, a);
    cr_assert_str_eq(cz_st_dtype_name(CZ_ST_BF16), "BF16");
    cr_assert_eq(cz_st_dtype_size(CZ_ST_F16), 2);
    cz_st_close(st);
}

Test(safetensors, wrong_shape_and_missing_tensor, .init = make_dir, .fini = remove_dir)
{
    const char *path = write_st(
        "model.safetensors",
        "{\"model.layers.0.self_attn.q_proj.weight\":{\"dtype\":\"F32\",\"shape\":[64,32],"
        "\"data_offsets\":[0,8192]}}",
        8192);
    cz_safetensors *st = NULL;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_st_open(path, &st, &err), CZ_OK, "%s", err.msg);
    const cz_st_tensor *t = NULL;
    uint64_t want[2] = {64, 64};
    cr_assert_eq(cz_st_get(st, "model.layers.0.self_attn.q_proj.weight", 2, want, &t, &err),
                 CZ_EINVAL);
    char msg[1024];
    snprintf(msg, sizeof msg,
             "%s: tensor 'model.layers.0.self_attn.q_proj.weight': expected shape (64, 64), got "
             "(64, 32)",
             path);
    cr_assert_str_eq(err.msg, msg);
    cr_assert_null(t);
    uint64_t one[1] = {64};
    cr_assert_eq(cz_st_get(st, "model.norm.weight", 1, one, &t, &err), CZ_ENOTFOUND);
    snprintf(msg, sizeof msg, "%s: no tensor 'model.norm.weight' (expected shape (64,))", path);
    cr_assert_str_eq(err.msg, msg);
    cz_st_close(st);
}

Test(safetensors, truncated_header, .init = make_dir, .fini = remove_dir)
{
    write_raw("short.safetensors", "\x10\x00\x00", 3);
    expect_fail("short.safetensors", CZ_EFORMAT, "too short", NULL);
    write_raw("empty.safetensors", "", 0);
    expect_fail("empty.safetensors", CZ_EFORMAT, "0 bytes", NULL);
    /* a header cut short: the length says 60 bytes, the file holds 20 */
    char buf[28] = {60, 0, 0, 0, 0, 0, 0, 0};
    memcpy(buf + 8, "{\"a\":{\"dtype\":\"F32\",", 20);
    write_raw("cut.safetensors", buf, sizeof buf);
    expect_fail("cut.safetensors", CZ_EFORMAT, "header length 60 runs past the end", NULL);
}

Test(safetensors, header_length_beyond_file, .init = make_dir, .fini = remove_dir)
{
    unsigned char buf[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    write_raw("huge.safetensors", buf, sizeof buf);
    expect_fail("huge.safetensors", CZ_EFORMAT, "header length", "at most 100000000", NULL);
    unsigned char buf2[12] = {200, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    write_raw("long.safetensors", buf2, sizeof buf2);
    expect_fail("long.safetensors", CZ_EFORMAT, "header length 200 runs past the end", NULL);
}

Test(safetensors, malformed_header_json, .init = make_dir, .fini = remove_dir)
{
    write_st("notjson.safetensors", "{\"a\": [1, 2", 0);
    expect_fail("notjson.safetensors", CZ_EFORMAT, "not valid JSON", NULL);
    write_st("array.safetensors", "[1, 2]", 0);
    expect_fail("array.safetensors", CZ_EFORMAT, "JSON object", NULL);
    write_st("entry.safetensors", "{\"w\": 5}", 0);
    expect_fail("entry.safetensors", CZ_EFORMAT, "tensor 'w'", NULL);
    write_st("key.safetensors",
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4);
    expect_fail("key.safetensors", CZ_EFORMAT, "tensor 'w'", "'x'", NULL);
    write_st("noshape.safetensors", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4);
    expect_fail("noshape.safetensors", CZ_EFORMAT, "tensor 'w'", "'shape'", NULL);
    write_st("negdim.safetensors",
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4);
    expect_fail("negdim.safetensors", CZ_EFORMAT, "tensor 'w'", "shape", NULL);
    write_st("meta.safetensors", "{\"__metadata__\":{\"a\":1}}", 0);
    expect_fail("meta.safetensors", CZ_EFORMAT, "__metadata__", NULL);
    write_st("dup.safetensors",
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             8);
    expect_fail("dup.safetensors", CZ_EFORMAT, "key 'w' appears twice", NULL);
}

Test(safetensors, offsets_out_of_bounds, .init = make_dir, .fini = remove_dir)
{
    write_st("oob.safetensors",
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 12);
    expect_fail("oob.safetensors", CZ_EFORMAT, "tensor 'w'", "runs past the end", NULL);
    write_st("back.safetensors",
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 12);
    expect_fail("back.safetensors", CZ_EFORMAT, "tensor 'w'", "before begin", NULL);
}

Test(safetensors, overlapping_and_holes, .init = make_dir, .fini = remove_dir)
{
    write_st("overlap.safetensors",
             "{\"first\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"second\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
             12);
    expect_fail("overlap.safetensors", CZ_EFORMAT, "tensor 'second'", "overlap tensor 'first'",
                NULL);
    write_st("hole.safetensors",
             "{\"first\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"second\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
             12);
    expect_fail("hole.safetensors", CZ_EFORMAT, "belong to no tensor", "'second'", NULL);
    write_st("tail.safetensors",
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 9);
    expect_fail("tail.safetensors", CZ_EFORMAT, "holds 9 bytes", NULL);
}

Test(safetensors, size_disagrees_with_shape, .init = make_dir, .fini = remove_dir)
{
    write_st("size.safetensors",
             "{\"lm_head.weight\":{\"dtype\":\"BF16\",\"shape\":[3,4],\"data_offsets\":[0,48]}}",
             48);
    expect_fail("size.safetensors", CZ_EFORMAT, "tensor 'lm_head.weight'", "expected 24",
                "(3, 4)", NULL);
}

Test(safetensors, unsupported_dtype, .init = make_dir, .fini = remove_dir)
{
    write_st("i64.safetensors",
             "{\"position_ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16);
    expect_fail("i64.safetensors", CZ_EFORMAT, "tensor 'position_ids'", "dtype 'I64'",
                "F32, BF16 or F16", NULL);
    write_st("q4.safetensors", "{\"w\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,1]}}",
             1);
    expect_fail("q4.safetensors", CZ_EFORMAT, "tensor 'w'", "'Q4'", NULL);
}

Test(safetensors, check_in_memory)
{
    uint8_t img[64] = {0};
    const char *h = "{\"w\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}";
    size_t n = strlen(h);
    img[0] = (uint8_t)n;
    memcpy(img + 8, h, n);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_st_check(img, 8 + n + 4, "mem", &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(cz_st_check(img, 8 + n + 3, "mem", &err), CZ_EFORMAT);
    cr_assert_eq(cz_st_check(img, 4, "mem", &err), CZ_EFORMAT);
    img[12] = 0; /* a NUL byte inside the header */
    cr_assert_eq(cz_st_check(img, 8 + n + 4, "mem", &err), CZ_EFORMAT);
}

/* ---- sharded checkpoints ----------------------------------------------------------------- */

static void write_shards(void)
{
    write_st("model-00001-of-00002.safetensors",
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
             12);
    write_st("model-00002-of-00002.safetensors",
             "{\"c\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]}}", 6);
}

static void write_index(const char *map)
{
    char text[2048];
    snprintf(text, sizeof text, "{\"metadata\": {\"total_size\": 18}, \"weight_map\": {%s}}",
             map);
    write_raw("model.safetensors.index.json", text, strlen(text));
}

Test(safetensors, sharded_index, .init = make_dir, .fini = remove_dir)
{
    write_shards();
    write_index("\"a\": \"model-00001-of-00002.safetensors\", "
                "\"c\": \"model-00002-of-00002.safetensors\", "
                "\"b\": \"model-00001-of-00002.safetensors\"");
    cz_safetensors *st = NULL;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_st_open_dir(dir, &st, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(cz_st_count(st), 3);
    const cz_st_tensor *c = cz_st_find(st, "c");
    cr_assert_not_null(c);
    cr_assert_eq(c->dtype, CZ_ST_BF16);
    cr_assert(strstr(c->file, "model-00002-of-00002.safetensors") != NULL);
    cr_assert(strstr(cz_st_path(st), "model.safetensors.index.json") != NULL);
    uint64_t two[1] = {2};
    const cz_st_tensor *t = NULL;
    cr_assert_eq(cz_st_get(st, "c", 1, two, &t, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "model-00002-of-00002.safetensors: tensor 'c': expected shape "
                              "(2,), got (3,)") != NULL,
              "%s", err.msg);
    cr_assert_eq(cz_st_get(st, "d", 1, two, &t, &err), CZ_ENOTFOUND);
    cr_assert(strstr(err.msg, "model.safetensors.index.json: no tensor 'd'") != NULL, "%s",
              err.msg);
    cz_st_close(st);
}

Test(safetensors, sharded_errors, .init = make_dir, .fini = remove_dir)
{
    write_shards();
    cz_safetensors *st = NULL;
    cz_err err;
    char index[512];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);

    /* a shard that is not there */
    write_index("\"a\": \"model-00001-of-00002.safetensors\", "
                "\"z\": \"model-00003-of-00003.safetensors\"");
    cr_assert_eq(cz_st_open_index(index, &st, &err), CZ_ENOTFOUND);
    cr_assert(strstr(err.msg, "model.safetensors.index.json") &&
                  strstr(err.msg, "shard 'model-00003-of-00003.safetensors' is missing"),
              "%s", err.msg);
    cr_assert_null(st);

    /* a tensor its shard does not hold */
    write_index("\"a\": \"model-00001-of-00002.safetensors\", "
                "\"c\": \"model-00001-of-00002.safetensors\"");
    cr_assert_eq(cz_st_open_index(index, &st, &err), CZ_EFORMAT);
    cr_assert(strstr(err.msg, "tensor 'c' is not in its shard") &&
                  strstr(err.msg, "model-00001-of-00002.safetensors"),
              "%s", err.msg);

    /* a shard outside the folder, and no weight_map */
    write_index("\"a\": \"../x.safetensors\"");
    cr_assert_eq(cz_st_open_index(index, &st, &err), CZ_EFORMAT);
    cr_assert(strstr(err.msg, "tensor 'a'") != NULL, "%s", err.msg);
    write_raw("model.safetensors.index.json", "{\"metadata\": {}}", 16);
    cr_assert_eq(cz_st_open_index(index, &st, &err), CZ_EFORMAT);
    cr_assert(strstr(err.msg, "weight_map") != NULL, "%s", err.msg);

    /* a broken shard: its own message, naming the shard */
    write_st("model-00002-of-00002.safetensors",
             "{\"c\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
    write_index("\"c\": \"model-00002-of-00002.safetensors\"");
    cr_assert_eq(cz_st_open_index(index, &st, &err), CZ_EFORMAT);
    cr_assert(strstr(err.msg, "model-00002-of-00002.safetensors: tensor 'c'") != NULL, "%s",
              err.msg);
}

Test(safetensors, open_dir_without_checkpoint, .init = make_dir, .fini = remove_dir)
{
    cz_safetensors *st = NULL;
    cz_err err;
    cr_assert_eq(cz_st_open_dir(dir, &st, &err), CZ_ENOTFOUND);
    cr_assert(strstr(err.msg, "no model.safetensors") != NULL, "%s", err.msg);
    char path[512];
    snprintf(path, sizeof path, "%s/nothing.safetensors", dir);
    cr_assert_eq(cz_st_open(path, &st, &err), CZ_ENOTFOUND);
    cr_assert(strstr(err.msg, "nothing.safetensors") != NULL, "%s", err.msg);
}

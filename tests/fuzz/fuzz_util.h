/* fuzz_util.h - what the libFuzzer harnesses of tests/fuzz share: the per-process scratch
 * files the trace readers read their input from, the reader check every trace harness runs,
 * and the bounds that keep a fuzzed experiment config small enough to parse (and, for the
 * simulation harness, to run) in milliseconds. See docs/testing.md.
 *
 * A harness treats every status but CZ_OK as an expected rejection of bad input; a bug is
 * an abort: a failed CZ_ASSERT, a sanitizer report, a leak, or one of the property checks
 * below (a trace that does not read back equal from cadenza's own format, a failed read
 * that changed the workload, a run that ends with CZ_EINTERNAL). */
#ifndef CZ_FUZZ_UTIL_H
#define CZ_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cz_sim.h"
#include "cz_traces.h"

/* libFuzzer's entry point, defined by each harness; its optional custom mutator; and its
 * own mutator, which a custom one may call. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

/* Prints "fuzz: <what>: <message>" to stderr and aborts, so libFuzzer saves the input. */
_Noreturn void cz_fuzz_fail(const char *what, const char *msg);

/* Path of this process's scratch file `tag` ("trace", "roundtrip"): a file named
 * cz-fuzz-<tag>-<pid> in $TMPDIR when set, else /dev/shm when it is a writable folder,
 * else /tmp. The same path for the life of the process (the string is owned here); the
 * caller removes the file once the input is done with, so only a crash leaves it. */
const char *cz_fuzz_scratch(const char *tag);

/* Replaces the contents of the file at `path` with data[0..size). Aborts (cz_fuzz_fail)
 * when it cannot: a harness without its input file would test nothing. */
void cz_fuzz_write_file(const char *path, const uint8_t *data, size_t size);

/* A NUL-terminated copy of data[0..size) (caller frees); bytes after an embedded NUL are
 * kept but unseen by string functions, as they would be after reading a file. */
char *cz_fuzz_text(const uint8_t *data, size_t size);

/* The trace harnesses' body: writes the input to the scratch file (removed at the end)
 * and reads it as `format` with the default options and, for ShareGPT, BurstGPT and
 * detection, with the other options (multi-turn, no filter, an output length for prompts
 * without a reply, BurstGPT's new-input-only; best-effort class). A read that succeeds must survive the
 * statistics, a round trip through cadenza's JSONL that reads back equal
 * (cz_workload_equal), the transforms, and a request cap that is honoured. A read that
 * fails must fail again when appended to a non-empty workload and leave it as it was. */
int cz_fuzz_trace(const uint8_t *data, size_t size, cz_trace_format format);

/* Resource bounds of a fuzzed experiment config, checked on the JSON before it is parsed:
 * the workload's synthetic requests and stream count at most `max_generated` each (a
 * config may ask for 10^8 requests, which is an allocation the fuzzer would report, not a
 * bug). False when the config asks for more. */
bool cz_fuzz_config_bounded(const cJSON *cfg, double max_generated);

/* Checks the contract of a failed call (st != CZ_OK): a status of cz_status, recorded in
 * `err` with a message. Aborts naming `what` otherwise; does nothing on CZ_OK. */
void cz_fuzz_check_err(const char *what, cz_status st, const cz_err *err);

/* Parses `cfg` as an experiment config (cz_config_parse, named "fuzz.json", relative
 * paths against cz_fuzz_base_dir()) into *c and *wl (initialised by the caller, freed by
 * it whatever the outcome). A failure must carry its status and a message in the error
 * (the contract of cz_err); otherwise the harness aborts. Returns the parser's status. */
cz_status cz_fuzz_config_parse(const cJSON *cfg, cz_config *c, cz_workload *wl);

/* Structure-aware mutation of a JSON input, for the config harnesses' custom mutators:
 * half the time, and whenever the input is not JSON, libFuzzer's own byte mutation;
 * otherwise one change to the parsed tree, which keeps the input a JSON document so most
 * mutants reach the config parser and the simulator rather than the JSON parser: a
 * number set to a neighbour or a boundary value (0, 1, -1, 2^32, 1e12...), a string
 * replaced by a word of the config's vocabulary or byte-mutated, a boolean flipped, a
 * member or an element removed or duplicated, a member of the vocabulary added, or a
 * value replaced by one of another type. Returns the new size (at most max_size). */
size_t cz_fuzz_mutate_json(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

/* The folder relative trace paths of fuzzed configs resolve against: the source tree's
 * experiments/ (as for the built-in default config), so the shipped traces and the
 * corpora's slices can be named. */
const char *cz_fuzz_base_dir(void);

#endif

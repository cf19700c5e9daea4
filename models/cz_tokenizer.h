/* cz_tokenizer.h - text to token ids and back for a Hugging Face checkpoint folder, and the
 * chat templates of the models the engine serves (docs/tokenizer.md).
 *
 * Reads `tokenizer.json` (the Hugging Face `tokenizers` format) as Llama-3 and Qwen2, Qwen2.5
 * and Qwen3 ship it: a byte-level BPE model (GPT-2's bytes-to-unicode mapping, `model.vocab`,
 * `model.merges` as "a b" strings or ["a", "b"] pairs, `ignore_merges`, an optional
 * `unk_token`), no normalizer, a pre-tokenizer that is either ByteLevel (with GPT-2's regex
 * when `use_regex` is set) or a Sequence of Split stages (a regex or a literal, behaviour
 * "Isolated") ending in ByteLevel, added tokens (special or not) matched in the raw text
 * before pre-tokenization, longest match first, and a ByteLevel decoder. The regexes run on
 * PCRE2 (UTF and Unicode properties, JIT when the library has it), translated where
 * Oniguruma, which `tokenizers` uses, reads them differently (`\s` is Unicode White_Space,
 * `^` and `$` match at line breaks). Anything else (another model type or normalizer, a
 * pre-tokenizer stage, split behaviour or decoder outside that list, added tokens with
 * `lstrip`, `rstrip` or `single_word`) is refused with CZ_EFORMAT naming the file and the
 * field, never approximated. `tokenizer_config.json`, when present, gives the BOS and EOS
 * tokens, `add_bos_token` and the chat template the built-in renderers are picked by.
 *
 * A loaded tokenizer is immutable: any number of threads may encode and decode with one
 * tokenizer at once (each call keeps its own state; a stream's decode state is the caller's
 * cz_detok). */
#ifndef CZ_TOKENIZER_H
#define CZ_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"

typedef struct cz_tokenizer cz_tokenizer;

/* A caller-owned, growable list of token ids: encoding appends to it (ids[0..n), capacity
 * cap). Start it zeroed ({0}); cz_tok_ids_free releases it; setting n = 0 reuses it. */
typedef struct cz_tok_ids {
    int32_t *ids;
    size_t n;
    size_t cap;
} cz_tok_ids;

/* Frees ids->ids and zeroes *ids. NULL is a no-op. */
void cz_tok_ids_free(cz_tok_ids *ids);

/* Loads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json (and
 * DIR/chat_template.jinja when the config has no "chat_template"). On success *out is the
 * tokenizer (cz_tokenizer_free frees it). CZ_ENOTFOUND when DIR has no tokenizer.json;
 * CZ_EFORMAT naming the file and the field (e.g. "ckpt/tokenizer.json: field
 * 'model.merges[7]': ...") for malformed or unsupported contents; CZ_EIO when a file
 * cannot be read. On failure *out is untouched and nothing is leaked. */
cz_status cz_tokenizer_load(const char *dir, cz_tokenizer **out, cz_err *err);

/* The byte-level fallback for checkpoints without a tokenizer (model cards with random
 * weights): token id = byte value, so `vocab` (the model's vocabulary size) must be at least
 * 256; NULL when it is not. Ids from 256 to vocab-1 decode to nothing. No BOS, no EOS (both
 * -1), the plain chat template. Caller frees with cz_tokenizer_free. */
cz_tokenizer *cz_tokenizer_bytes(uint32_t vocab);

/* Frees a tokenizer. NULL is a no-op. */
void cz_tokenizer_free(cz_tokenizer *t);

/* Encodes text[0..len) (UTF-8; NUL bytes are ordinary characters) and appends its ids to
 * *out, as `tokenizers` encodes with add_special_tokens=False: no BOS is added (the caller
 * prepends cz_tokenizer_bos when cz_tokenizer_add_bos says so; chat templates carry their
 * own). Special tokens written in the text are matched as tokens. Safe to call from several
 * threads on one tokenizer: the working memory (PCRE2 match data, the BPE symbols and merge
 * queue) is allocated per call and freed before it returns, so a call costs a few small
 * allocations. CZ_EINVAL "text: invalid UTF-8 at byte offset N" for malformed input;
 * CZ_ERANGE naming the byte offset when a pre-tokenizer regex exceeds PCRE2's match limits.
 * On failure *out may hold the ids of a prefix of the text (out->n is still consistent). */
cz_status cz_tokenizer_encode(const cz_tokenizer *t, const char *text, size_t len,
                              cz_tok_ids *out, cz_err *err);

/* The end-of-sequence token (tokenizer_config.json "eos_token"), or -1. */
int32_t cz_tokenizer_eos(const cz_tokenizer *t);
/* The beginning-of-sequence token (tokenizer_config.json "bos_token", else the special
 * token tokenizer.json's TemplateProcessing post-processor starts a sequence with), or -1. */
int32_t cz_tokenizer_bos(const cz_tokenizer *t);
/* Whether a prompt encoded without a chat template starts with cz_tokenizer_bos:
 * tokenizer_config.json "add_bos_token" when set, else whether tokenizer.json's
 * post-processor adds one (Llama-3: yes; Qwen: no). Always false without a BOS token. */
bool cz_tokenizer_add_bos(const cz_tokenizer *t);
/* The number of token ids: 1 + the largest id of the vocabulary and the added tokens (the
 * fallback's: its `vocab`). */
uint32_t cz_tokenizer_vocab(const cz_tokenizer *t);
/* One line for logs: "tokenizer.json (byte-level BPE, 128256 tokens)" or "byte-level
 * fallback (no tokenizer.json)". Owned by the tokenizer. */
const char *cz_tokenizer_describe(const cz_tokenizer *t);
/* The id of the token written `token` (an added token or a vocabulary entry, in its
 * byte-level spelling: " hi" is "Ġhi"), or -1. */
int32_t cz_tokenizer_token_id(const cz_tokenizer *t, const char *token);
/* Whether `id` is a special added token (false for ids out of range). */
bool cz_tokenizer_is_special(const cz_tokenizer *t, int32_t id);

/* Streaming decode state of one sequence: the bytes of a UTF-8 character that the ids so far
 * have only begun. Plain data, owned by the caller; a zeroed one ({0}) is a new sequence
 * that skips special tokens. */
typedef struct cz_detok {
    unsigned char pend[4];  /* the bytes of an incomplete character */
    uint8_t n_pend;
    bool keep_special;      /* false (the default): special tokens decode to nothing */
} cz_detok;

/* Starts a sequence. skip_special: special tokens decode to nothing (vLLM's default,
 * skip_special_tokens=True, and that of a zeroed cz_detok). */
void cz_detok_init(cz_detok *d, bool skip_special);

/* The most bytes one cz_tokenizer_decode or cz_tokenizer_decode_flush call writes,
 * the terminating NUL included: the size of `out` to pass them. */
size_t cz_tokenizer_decode_max(const cz_tokenizer *t);

/* Decodes one id of a stream: writes to out[0..cap) the text that is now complete, as
 * valid UTF-8 and NUL-terminated, and returns its length (0 when the id completes no
 * character, is skipped, or is out of range: such ids decode to nothing). The bytes of a
 * character split over several tokens are held in *d until it is complete; bytes that can
 * never form a character become U+FFFD, as `tokenizers`' decoder (String::from_utf8_lossy)
 * turns them, so the concatenated output equals cz_tokenizer_decode_all of the same ids.
 * cap must be at least cz_tokenizer_decode_max(t) (a smaller one is a bug: CZ_ASSERT). */
size_t cz_tokenizer_decode(const cz_tokenizer *t, cz_detok *d, int32_t id, char *out,
                           size_t cap);

/* Ends a stream: an incomplete character still held becomes U+FFFD in out (NUL-terminated;
 * returns its length, 0 or 3) and *d is ready for a new sequence. */
size_t cz_tokenizer_decode_flush(const cz_tokenizer *t, cz_detok *d, char *out, size_t cap);

/* The text of ids[0..n) (caller frees; never NULL), as cz_tokenizer_decode then
 * cz_tokenizer_decode_flush give it. */
char *cz_tokenizer_decode_all(const cz_tokenizer *t, const int32_t *ids, size_t n,
                              bool skip_special);

/* The chat templates built in (no Jinja engine): each renders exactly what the model
 * family's own Jinja template renders for plain-text system, user and assistant messages. */
typedef enum cz_chat_template {
    CZ_CHAT_PLAIN = 0, /* no known template: "role: content\n\n" per message, then
                          "assistant: " as the generation prompt */
    CZ_CHAT_LLAMA3,    /* Meta-Llama-3-Instruct: bos text, headers, "\n\n", trimmed content */
    CZ_CHAT_LLAMA31,   /* Llama-3.1/3.2/3.3-Instruct: the above with its system block
                          ("Cutting Knowledge Date: December 2023", "Today Date: 26 Jul 2024") */
    CZ_CHAT_CHATML,    /* Qwen2.5: ChatML, default system "You are Qwen, created by Alibaba
                          Cloud. You are a helpful assistant." */
    CZ_CHAT_QWEN2,     /* Qwen2: ChatML, default system "You are a helpful assistant." */
    CZ_CHAT_QWEN3      /* Qwen3: ChatML without a default system, <think> handling of
                          assistant turns after the last user turn */
} cz_chat_template;

/* "plain", "llama3", "llama31", "chatml", "qwen2", "qwen3". Never NULL. */
const char *cz_chat_template_name(cz_chat_template kind);

/* The template named `name` (one of cz_chat_template_name's); CZ_EINVAL listing them
 * otherwise. */
cz_status cz_chat_template_parse(const char *name, cz_chat_template *out, cz_err *err);

/* The template for this tokenizer: from the chat template text of tokenizer_config.json
 * (or chat_template.jinja) when it has one that is recognised ("<|start_header_id|>": a
 * Llama-3 template, LLAMA31 when it holds "Cutting Knowledge Date"; "<|im_start|>": ChatML,
 * QWEN2 or QWEN3 by their default system message or <think> handling, else CHATML), else from
 * the added tokens ("<|start_header_id|>": LLAMA3; "<|im_start|>": CHATML), else PLAIN. */
cz_chat_template cz_tokenizer_chat(const cz_tokenizer *t);

/* One message of a conversation. A NULL content reads as "". */
typedef struct cz_chat_msg {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content;
} cz_chat_msg;

/* Renders msgs[0..n) with template `kind` into *out (NUL-terminated, caller frees), with the
 * generation prompt (the assistant header) appended when add_generation_prompt is set. The
 * text holds the special tokens as text (Llama-3's "<|begin_of_text|>" included): encode it
 * with cz_tokenizer_encode and add no BOS. CZ_EINVAL "messages[i]: role 'x': expected
 * system, user or assistant" for another role, and for an empty list. */
cz_status cz_chat_render(cz_chat_template kind, const cz_chat_msg *msgs, size_t n,
                         bool add_generation_prompt, char **out, cz_err *err);

#endif

/* cz_hfconfig.h - a Hugging Face checkpoint folder's config.json as a stage card.
 *
 * Reads the `config.json` of a decoder-only checkpoint of one of the architectures the
 * engine runs (docs/models.md): LlamaForCausalLM (Llama 2 and 3, with Llama 3.1's "llama3"
 * RoPE scaling), Qwen2ForCausalLM (biases on q, k and v), Qwen3ForCausalLM (RMSNorm on each
 * head of q and k, an explicit head_dim) and Qwen3MoeForCausalLM (router softmax, top-k,
 * optional renormalisation). The result is a stage card of kind "ar" whose dimensions and
 * architecture fields (cz_stage_arch) are the config's, its `params` counted exactly from
 * the module shapes, validated by the card parser like any card. Keys that change the
 * forward pass in ways the engine does not implement (another activation, MLP biases,
 * sliding-window layers, dense layers between MoE ones) are errors naming the key, not
 * silently ignored; keys that do not (token ids, dropout, initializer range) are ignored. */
#ifndef CZ_HFCONFIG_H
#define CZ_HFCONFIG_H

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_models.h"

/* The architectures cz_hf_config reads. */
typedef enum cz_hf_arch {
    CZ_HF_LLAMA = 0,
    CZ_HF_QWEN2,
    CZ_HF_QWEN3,
    CZ_HF_QWEN3_MOE
} cz_hf_arch;

/* "LlamaForCausalLM", ... Never NULL. */
const char *cz_hf_arch_name(cz_hf_arch a);

/* Parses the config object `j` (named `where` in messages, e.g. "ckpt/config.json") into a
 * one-stage model card: *out->stages[0] named "llm", the card named `name` (a checkpoint's
 * folder name), *arch the architecture. Missing required keys, values of the wrong type or
 * range and unsupported features fail with CZ_EINVAL "<where>: field '<key>': expected
 * ...". */
cz_status cz_hf_config_parse(const cJSON *j, const char *where, const char *name,
                             cz_model_card *out, cz_hf_arch *arch, cz_err *err);

/* As cz_hf_config_parse, but returns the card as JSON (*card_out, the caller's to delete;
 * NULL on failure), in the schema of the shipped cards (docs/models.md), checked by the card
 * parser: what `cadenza card` writes. */
cz_status cz_hf_config_card(const cJSON *j, const char *where, const char *name,
                            cJSON **card_out, cz_hf_arch *arch, cz_err *err);

/* The name of the card of the config.json at `config_path`: its folder's last component,
 * cut to fit; "checkpoint" when the path names no folder ("config.json", "./x.json"). */
void cz_hf_card_name(const char *config_path, char name[CZ_NAME_MAX]);

/* Reads DIR/config.json (cz_hf_config_parse, the card named after DIR's last component).
 * CZ_ENOTFOUND when the folder has no config.json, CZ_EIO / CZ_EFORMAT when it cannot be
 * read or parsed. */
cz_status cz_hf_config_load(const char *dir, cz_model_card *out, cz_hf_arch *arch, cz_err *err);

#endif

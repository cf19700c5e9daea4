/* test_hfconfig.c - Hugging Face config.json files as stage cards: the published configs of
 * Llama-3-8B, Qwen2.5-0.5B and Qwen3-Omni's thinker (a Qwen3-MoE text model) give the
 * parameter counts of their shipped cards exactly; architecture fields land where the
 * forward pass reads them; and bad values fail naming config.json and the key. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_hfconfig.h"
#include "cz_json.h"

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "%s/cz-hf-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static cz_status load(const char *config, cz_model_card *m, cz_hf_arch *arch, cz_err *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(config, f);
    fclose(f);
    cz_err_clear(err);
    return cz_hf_config_load(dir, m, arch, err);
}

/* meta-llama/Meta-Llama-3-8B config.json (the keys the engine reads, and some it ignores) */
static const char llama3_8b[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, "
    "\"attention_dropout\": 0.0, \"bos_token_id\": 128000, \"eos_token_id\": 128001, "
    "\"hidden_act\": \"silu\", \"hidden_size\": 4096, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 14336, \"max_position_embeddings\": 8192, \"model_type\": "
    "\"llama\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32, "
    "\"num_key_value_heads\": 8, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, "
    "\"rope_scaling\": null, \"rope_theta\": 500000.0, \"tie_word_embeddings\": false, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.0.dev0\", "
    "\"use_cache\": true, \"vocab_size\": 128256}";

Test(hfconfig, llama3_8b_matches_its_card, .init = make_dir, .fini = remove_dir)
{
    cz_model_card m;
    cz_hf_arch arch;
    cz_err err;
    cr_assert_eq(load(llama3_8b, &m, &arch, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(arch, CZ_HF_LLAMA);
    cr_assert_str_eq(cz_hf_arch_name(arch), "LlamaForCausalLM");
    cr_assert_eq(m.n_stages, 1);
    const cz_stage_card *s = &m.stages[0];
    cr_assert_eq(s->kind, CZ_STAGE_AR);
    cr_assert_eq(s->params, 8030261248.0);
    cr_assert_eq(s->active_params, 8030261248.0);
    cr_assert(s->layers == 32 && s->hidden == 4096 && s->heads == 32 && s->kv_heads == 8 &&
              s->head_dim == 128 && s->intermediate == 14336 && s->vocab == 128256);
    cr_assert(!s->tied_embeddings);
    cr_assert_eq(s->arch.rope_theta, 500000.0);
    cr_assert_eq(s->arch.rope_type, CZ_ROPE_DEFAULT);
    cr_assert_eq(s->arch.norm_eps, 1e-5);
    cr_assert(!s->arch.qkv_bias && !s->arch.o_bias && !s->arch.qk_norm);
    /* the card is named after the folder */
    cr_assert(strncmp(m.name, "cz-hf-", 6) == 0, "%s", m.name);
    cz_model_card card;
    cr_assert_eq(cz_model_card_load("llama-3-8b", &card, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(card.stages[0].params, s->params);
    /* the context limit, the shipped card's too */
    cr_assert_eq(s->max_position_embeddings, 8192);
    cr_assert_eq(card.stages[0].max_position_embeddings, 8192);
    /* the folder and its config.json load as cards by path */
    cz_model_card by_dir, by_file;
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    cr_assert_eq(cz_model_card_load(dir, &by_dir, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(cz_model_card_load(path, &by_file, &err), CZ_OK, "%s", err.msg);
    cr_assert(by_dir.stages[0].params == s->params && by_file.stages[0].params == s->params);
    cr_assert_str_eq(by_file.name, m.name);
}

Test(hfconfig, llama31_rope_scaling, .init = make_dir, .fini = remove_dir)
{
    cz_model_card m;
    cz_hf_arch arch;
    cz_err err;
    const char *cfg =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, "
        "\"intermediate_size\": 128, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
        "\"num_key_value_heads\": 2, \"vocab_size\": 1000, \"rope_theta\": 500000.0, "
        "\"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": "
        "1.0, \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, "
        "\"tie_word_embeddings\": true}";
    cr_assert_eq(load(cfg, &m, &arch, &err), CZ_OK, "%s", err.msg);
    const cz_stage_card *s = &m.stages[0];
    cr_assert_eq(s->arch.rope_type, CZ_ROPE_LLAMA3);
    cr_assert_eq(s->arch.rope_factor, 32.0);
    cr_assert_eq(s->arch.rope_low_freq_factor, 1.0);
    cr_assert_eq(s->arch.rope_high_freq_factor, 4.0);
    cr_assert_eq(s->arch.rope_original_max_pos, 8192);
    cr_assert(s->tied_embeddings);
    cr_assert_eq(s->arch.norm_eps, 1e-6); /* rms_norm_eps absent: LlamaConfig's 1e-6 */
    /* 1000 x 64 + 2 x (4 x 64 x 64 / 2 x 2 ... ) by hand: embed 64000, attention
     * 64 x 64 + 2 x 64 x 32 + 64 x 64 = 12288, MLP 3 x 64 x 128 = 24576, norms 128 */
    cr_assert_eq(s->params, 64000.0 + 2 * (12288.0 + 24576.0 + 128.0) + 64.0);
    /* transformers 5 spells it rope_parameters, with the theta inside */
    const char *v5 =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, "
        "\"intermediate_size\": 128, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
        "\"vocab_size\": 1000, \"rope_parameters\": {\"rope_theta\": 250000.0, \"rope_type\": "
        "\"linear\", \"factor\": 2.0}}";
    cr_assert_eq(load(v5, &m, &arch, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(m.stages[0].arch.rope_theta, 250000.0);
    cr_assert_eq(m.stages[0].arch.rope_type, CZ_ROPE_LINEAR);
    cr_assert_eq(m.stages[0].arch.rope_factor, 2.0);
    cr_assert_eq(m.stages[0].kv_heads, 4); /* num_key_value_heads defaults to the heads */
}

Test(hfconfig, qwen2_biases_and_qwen3_norms, .init = make_dir, .fini = remove_dir)
{
    cz_model_card m;
    cz_hf_arch arch;
    cz_err err;
    /* Qwen/Qwen2.5-0.5B config.json */
    const char *qwen25 =
        "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, "
        "\"bos_token_id\": 151643, \"eos_token_id\": 151643, \"hidden_act\": \"silu\", "
        "\"hidden_size\": 896, \"initializer_range\": 0.02, \"intermediate_size\": 4864, "
        "\"max_position_embeddings\": 32768, \"max_window_layers\": 24, \"model_type\": "
        "\"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24, "
        "\"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, "
        "\"sliding_window\": 32768, \"tie_word_embeddings\": true, \"torch_dtype\": "
        "\"bfloat16\", \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": "
        "151936}";
    cr_assert_eq(load(qwen25, &m, &arch, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(arch, CZ_HF_QWEN2);
    cr_assert(m.stages[0].arch.qkv_bias && !m.stages[0].arch.o_bias);
    cr_assert(!m.stages[0].arch.qk_norm);
    cr_assert_eq(m.stages[0].params, 494032768.0); /* CosyVoice2's card notes */

    const char *qwen3 =
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": 64, \"head_dim\": 32, "
        "\"intermediate_size\": 96, \"num_attention_heads\": 4, \"num_hidden_layers\": 1, "
        "\"num_key_value_heads\": 1, \"vocab_size\": 50}";
    cr_assert_eq(load(qwen3, &m, &arch, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(arch, CZ_HF_QWEN3);
    const cz_stage_card *s = &m.stages[0];
    cr_assert(s->arch.qk_norm && !s->arch.qkv_bias);
    cr_assert_eq(s->head_dim, 32);
    /* embed 3200 + head 3200 + q 64 x 128 + k, v 64 x 32 each + o 128 x 64 + norms
     * 2 x 64 + q/k norms 2 x 32 + MLP 3 x 64 x 96 + final 64 */
    cr_assert_eq(s->params, 6400.0 + 8192 + 4096 + 8192 + 128 + 64 + 18432 + 64);
}

Test(hfconfig, qwen3_moe_matches_the_omni_thinker, .init = make_dir, .fini = remove_dir)
{
    cz_model_card m;
    cz_hf_arch arch;
    cz_err err;
    /* Qwen3-Omni-30B-A3B's thinker_config.text_config, as a Qwen3-MoE config */
    const char *cfg =
        "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"decoder_sparse_step\": 1, "
        "\"head_dim\": 128, \"hidden_size\": 2048, \"intermediate_size\": 768, "
        "\"mlp_only_layers\": [], \"moe_intermediate_size\": 768, \"norm_topk_prob\": true, "
        "\"num_attention_heads\": 32, \"num_experts\": 128, \"num_experts_per_tok\": 8, "
        "\"num_hidden_layers\": 48, \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06, "
        "\"rope_theta\": 1000000, \"tie_word_embeddings\": false, \"vocab_size\": 152064}";
    cr_assert_eq(load(cfg, &m, &arch, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(arch, CZ_HF_QWEN3_MOE);
    const cz_stage_card *s = &m.stages[0];
    cz_model_card omni;
    cr_assert_eq(cz_model_card_load("qwen3-omni", &omni, &err), CZ_OK, "%s", err.msg);
    const cz_stage_card *th = cz_model_card_stage(&omni, "thinker");
    cr_assert_eq(s->params, th->params);
    cr_assert_eq(s->active_params, th->active_params);
    cr_assert(s->experts == 128 && s->experts_active == 8 && s->expert_intermediate == 768);
    cr_assert_eq(s->intermediate, 0);
    cr_assert_eq(s->arch.shared_expert_intermediate, 0);
    cr_assert(s->arch.norm_topk_prob && s->arch.qk_norm);
}

/* Bad configs: the message names config.json and the key. */
Test(hfconfig, bad_values, .init = make_dir, .fini = remove_dir)
{
    static const struct {
        const char *patch, *key;
    } cases[] = {
        {"\"architectures\": [\"GPT2LMHeadModel\"]", "'architectures'"},
        {"\"architectures\": \"LlamaForCausalLM\"", "'architectures'"},
        {"\"hidden_act\": \"gelu\"", "'hidden_act'"},
        {"\"mlp_bias\": true", "'mlp_bias'"},
        {"\"use_sliding_window\": true", "'use_sliding_window'"},
        {"\"num_key_value_heads\": 3", "'num_key_value_heads'"},
        {"\"hidden_size\": \"64\"", "'hidden_size'"},
        {"\"vocab_size\": 0", "'vocab_size'"},
        {"\"rms_norm_eps\": -1", "'rms_norm_eps'"},
        {"\"rope_theta\": 0", "'rope_theta'"},
        {"\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}", "'rope_type'"},
        {"\"rope_scaling\": {\"type\": \"linear\"}", "'factor'"},
        {"\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 4, "
         "\"high_freq_factor\": 2}",
         "'high_freq_factor'"},
        {"\"rope_scaling\": 3", "'rope_scaling'"},
        {"\"head_dim\": 15", "'head_dim'"},
        {"\"tie_word_embeddings\": 1", "'tie_word_embeddings'"},
    };
    for (size_t i = 0; i < CZ_ARRAY_LEN(cases); i++) {
        /* the base config without the patched key (a key named twice is an error), then
         * the patch */
        static const char *const base[] = {
            "\"architectures\": [\"LlamaForCausalLM\"]", "\"hidden_size\": 64",
            "\"intermediate_size\": 128", "\"num_attention_heads\": 4",
            "\"num_hidden_layers\": 2", "\"num_key_value_heads\": 2", "\"vocab_size\": 100"};
        char cfg[2048];
        size_t len = (size_t)snprintf(cfg, sizeof cfg, "{%s", cases[i].patch);
        const char *pk_end = strchr(cases[i].patch + 1, '"');
        size_t pk_len = (size_t)(pk_end - cases[i].patch) + 1;
        for (size_t b = 0; b < CZ_ARRAY_LEN(base); b++)
            if (strncmp(base[b], cases[i].patch, pk_len) != 0)
                len += (size_t)snprintf(cfg + len, sizeof cfg - len, ", %s", base[b]);
        snprintf(cfg + len, sizeof cfg - len, "}");
        cz_model_card m;
        cz_hf_arch arch;
        cz_err err;
        cr_assert_eq(load(cfg, &m, &arch, &err), CZ_EINVAL, "case %zu passed: %s", i,
                     cases[i].patch);
        cr_assert(strstr(err.msg, "config.json") && strstr(err.msg, cases[i].key), "case %zu: %s",
                  i, err.msg);
    }
    /* a required key missing, and MoE layouts the engine does not run */
    cz_model_card m;
    cz_hf_arch arch;
    cz_err err;
    cr_assert_eq(load("{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64}", &m,
                      &arch, &err),
                 CZ_EINVAL);
    cr_assert(strstr(err.msg, "config.json") && strstr(err.msg, "'vocab_size'"), "%s", err.msg);
    const char *moe =
        "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"hidden_size\": 64, "
        "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 100, "
        "\"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, "
        "\"mlp_only_layers\": [0], \"intermediate_size\": 128}";
    cr_assert_eq(load(moe, &m, &arch, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "'mlp_only_layers'") != NULL, "%s", err.msg);
    cr_assert_eq(load("[1]", &m, &arch, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "config.json") != NULL, "%s", err.msg);
    cr_assert_eq(load("{\"a\": ", &m, &arch, &err), CZ_EFORMAT);
    cr_assert(strstr(err.msg, "config.json") != NULL, "%s", err.msg);
    /* no config at all */
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    cr_assert_eq(cz_hf_config_load(dir, &m, &arch, &err), CZ_ENOTFOUND);
    cr_assert(strstr(err.msg, "config.json") != NULL, "%s", err.msg);
}

/* fuzz_model.c: libFuzzer target of moects__model_load (cases/model.c, cases/json_file.c): registry
 * files (cases/models) and raw Hugging Face config.json of any family, bare NaN/Infinity included.
 * Seeds: cases/models, cases/sources/hf-configs, fuzz/corpus/model. A loaded model must satisfy the
 * loader's own bounds (cases_internal.h): every size positive and at most its MOECTS__MAX_*; an
 * activation of the enum (or 0 from a raw config), its limit and alpha positive FP32 values. */
#include <float.h>

#include "cases_internal.h"
#include "fuzz_util.h"
#include "moects_cases.h"

static void check_model(const moects_model *m)
{
    int ok = m->hidden_size > 0 && m->hidden_size <= MOECTS__MAX_WIDTH && m->moe_intermediate_size > 0 &&
             m->moe_intermediate_size <= MOECTS__MAX_WIDTH && m->routed_experts > 0 &&
             m->routed_experts <= MOECTS__MAX_EXPERTS && m->experts_per_token > 0 &&
             m->experts_per_token <= m->routed_experts && m->experts_per_token <= MOECTS__MAX_TOPK &&
             m->shared_experts >= 0 && m->latent_size >= 0 && m->latent_size <= MOECTS__MAX_WIDTH &&
             memchr(m->name, 0, sizeof m->name) && memchr(m->source, 0, sizeof m->source) &&
             (int)m->activation >= 0 && (int)m->activation <= MOECTS_ACT_SITU &&
             (!m->has_activation_limit || (m->activation_limit > 0 && m->activation_limit <= FLT_MAX)) &&
             (!m->has_activation_alpha || (m->activation_alpha > 0 && m->activation_alpha <= FLT_MAX));
    if (!ok) {
        fprintf(stderr, "fuzz: model %s loaded out of bounds: H %lld I %lld E %lld k %lld latent %lld\n", m->name,
                (long long)m->hidden_size, (long long)m->moe_intermediate_size, (long long)m->routed_experts,
                (long long)m->experts_per_token, (long long)m->latent_size);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path("config.json");
    fuzz_write(path, data, size);
    moects_model m;
    char err[1024] = "";
    if (moects__model_load(path, &m, err, sizeof err) == 0) check_model(&m);
    else fuzz_check_err(err, path);
    return 0;
}

/* cz_models_int.h - internals shared by cz_cards.c and cz_cost.c: how a stage card's
 * parameter counts split into lookup tables, LM head, routed experts and the rest. */
#ifndef CZ_MODELS_INT_H
#define CZ_MODELS_INT_H

#include "cz_models.h"

/* Parameters of one routed expert summed over the layers: a gated MLP (gate, up, down) of
 * 3 x hidden x expert_intermediate per layer. 0 for a dense stage. */
double cz__stage_expert_params(const cz_stage_card *s);
/* Parameters of the LM head counted apart from the embedding tables: vocab x hidden for an
 * AR stage with untied embeddings, else 0 (tied heads are inside embed_params). */
double cz__stage_head_params(const cz_stage_card *s);
/* Parameters every token multiplies through, outside the lookup tables and the LM head:
 * active_params - embed_params - head. Positive for any card that parsed. */
double cz__stage_body_params(const cz_stage_card *s);

#endif

/* cz_sched_fcfs.c - the FCFS scheduler (vLLM V1's default). Admission order is the
 * waiting queue's FIFO order, kept by the serving core; the policy's one decision is the
 * preemption victim: the running request admitted last. */
#include "cz_policies.h"

#include <string.h>

static uint32_t fcfs_pick_victim(const cz_sched_view *v)
{
    CZ_ASSERT(v->n_running > 0);
    return v->last_admitted;
}

const cz_sched_ops cz_sched_fcfs = {
    .name = "fcfs",
    .pick_victim = fcfs_pick_victim,
};

static const cz_sched_ops *const schedulers[] = {&cz_sched_fcfs};

cz_status cz_policy_scheduler_find(const char *name, const cz_sched_ops **out, cz_err *err)
{
    for (size_t i = 0; i < CZ_ARRAY_LEN(schedulers); i++) {
        if (strcmp(schedulers[i]->name, name) == 0) {
            *out = schedulers[i];
            return CZ_OK;
        }
    }
    return cz_err_set(err, CZ_ENOTFOUND, "unknown scheduler '%s' (known: fcfs)", name);
}

/* cz_policies.h - the policy library: pure scheduling decisions selected by name.
 *
 * Each policy is a table of functions over read-only views of the serving core's state
 * (cz_server.h); none does I/O, reads a clock or allocates per decision. */
#ifndef CZ_POLICIES_H
#define CZ_POLICIES_H

#include "cz_base.h"
#include "cz_server.h"

/* First-come-first-served, vLLM V1's default policy: requests are admitted in arrival
 * order and, when the KV pool runs out, the most recently admitted running request is
 * preempted (vLLM V1 Scheduler: `self.running.pop()` under SchedulingPolicy.FCFS). */
extern const cz_sched_ops cz_sched_fcfs;

/* Looks a scheduler up by name ("fcfs"). CZ_ENOTFOUND naming the known ones otherwise. */
cz_status cz_policy_scheduler_find(const char *name, const cz_sched_ops **out, cz_err *err);

#endif

/* kvferryctl_plan.h: `kvferryctl plan`, the offline planner (no daemon): builds both instances
 * from preset specs, plans a request and prints the writers, their bytes and copy-op counts as
 * a table or as JSON. Exit 0 ok, 1 usage error, 2 the plan was refused. */
#ifndef KVF_CTL_PLAN_H
#define KVF_CTL_PLAN_H

/* argv[0] == "plan". */
int ctl_plan_main(int argc, char **argv);

#endif

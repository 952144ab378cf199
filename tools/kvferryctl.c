/* kvferryctl.c: minimal front end that dispatches `plan` to ctl_plan_main. The full kvferryctl
 * (daemon commands over the control socket) replaces this file at merge. */
#include <stdio.h>
#include <string.h>

#include "kvferryctl_plan.h"

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "plan") == 0)
        return ctl_plan_main(argc - 1, argv + 1);
    fprintf(stderr, "usage: kvferryctl plan --ctx SPEC --gen SPEC [options] (plan --help)\n");
    return 1;
}

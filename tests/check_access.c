/* check_access.c: access.* lists resolved to ids, and the peer checks (own uid and root always
 * admins; allow by uid, by gid against primary and supplementary groups; admin lists; a
 * decision made again once the lists' generation moves on). */
#include <errno.h>
#include <grp.h>
#include <pwd.h>

#include "access.h"
#include "accessutil.h"
#include "testutil.h"

START_TEST(access_own_uid_and_root_are_always_admins)
{
    struct access a;
    tu_access_load("log.level: info\n", &a);
    struct peer_cred self = {.pid = 1, .uid = getuid(), .gid = getgid(), .admin = false};
    struct peer_cred root = {.pid = 1, .uid = 0, .gid = 0, .admin = false};
    ck_assert(access_check(&a, &self));
    ck_assert(self.admin);
    ck_assert(access_check(&a, &root));
    ck_assert(root.admin);
    access_done(&a);
}
END_TEST

START_TEST(access_other_uid_refused_by_default_and_allowed_by_number_or_name)
{
    struct access a;
    struct peer_cred p = {.pid = 1, .uid = 65534, .gid = 65533, .admin = false};
    if (getuid() == 65534) {
        printf("SKIP access_other_uid...: running as uid 65534\n");
        return;
    }
    tu_access_load("log.level: info\n", &a);
    ck_assert(!access_check(&a, &p));
    access_done(&a);
    tu_access_load("access.allow_uids: [65534]\n", &a);
    ck_assert(access_check(&a, &p));
    ck_assert(!p.admin);
    access_done(&a);
    struct passwd *pw = getpwuid(65534);
    if (pw) {
        char y[128];
        snprintf(y, sizeof(y), "access.allow_uids: [%s]\n", pw->pw_name);
        tu_access_load(y, &a);
        ck_assert(access_check(&a, &p));
        access_done(&a);
    }
    tu_access_load("access.admin_uids: [65534]\n", &a);
    ck_assert(access_check(&a, &p));
    ck_assert(p.admin);
    access_done(&a);
}
END_TEST

START_TEST(access_gid_matches_primary_group_from_passwd_not_only_the_credential)
{
    struct passwd *pw = getpwuid(65534);
    if (!pw || getuid() == 65534) {
        printf("SKIP access_gid...: no passwd entry for uid 65534\n");
        return;
    }
    char y[128];
    snprintf(y, sizeof(y), "access.allow_gids: [%u]\n", (unsigned)pw->pw_gid);
    struct access a;
    tu_access_load(y, &a);
    /* the credential carries another gid; the passwd primary group still matches */
    struct peer_cred p = {
        .pid = 1, .uid = 65534, .gid = pw->pw_gid == 12345 ? 12346 : 12345, .admin = false};
    ck_assert(access_check(&a, &p));
    ck_assert(!p.admin);
    /* a gid nobody has is no match */
    access_done(&a);
    tu_access_load("access.allow_gids: [54321]\n", &a);
    ck_assert(!access_check(&a, &p));
    /* ... unless the process runs with it (SO_PEERGROUPS), though the database does not say so */
    p.groups[0] = 7, p.groups[1] = 54321, p.n_groups = 2;
    ck_assert(access_check(&a, &p));
    ck_assert(!p.admin);
    p.n_groups = 0;
    access_done(&a);
    snprintf(y, sizeof(y), "access.admin_gids: [%u]\n", (unsigned)pw->pw_gid);
    tu_access_load(y, &a);
    ck_assert(access_check(&a, &p));
    ck_assert(p.admin);
    access_done(&a);
}
END_TEST

START_TEST(access_unknown_user_or_group_name_is_einval_naming_the_key)
{
    struct kvf_config c;
    struct access a;
    char err[CFG_ERR_MAX];
    const char *y = "access.admin_gids: [no-such-group-kvf]\n";
    ck_assert_int_eq(cfg_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err)), 0);
    ck_assert_int_eq(access_resolve(&c, &a, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "access.admin_gids"));
    ck_assert_ptr_nonnull(strstr(err, "no-such-group-kvf"));
    cfg_free(&c);
    access_done(NULL);
}
END_TEST

START_TEST(access_current_decides_again_when_the_lists_generation_moves_on)
{
    if (getuid() == 65534) {
        printf("SKIP access_current...: running as uid 65534\n");
        return;
    }
    struct access a;
    struct peer_cred p = {.pid = 1, .uid = 65534, .gid = 65533};
    tu_access_load("access.admin_uids: [65534]\n", &a);
    ck_assert(access_check(&a, &p));
    ck_assert(p.admin);
    access_done(&a);
    tu_access_load("access.allow_uids: [65534]\n", &a); /* a reload: generation 0 again here */
    ck_assert(access_current(&a, &p));
    ck_assert(p.admin); /* same generation: the decision stands, nothing looked up */
    a.generation = 1;
    ck_assert(access_current(&a, &p));
    ck_assert(!p.admin);
    access_done(&a);
    tu_access_load("log.level: info\n", &a);
    a.generation = 2;
    ck_assert(!access_current(&a, &p));
    ck_assert(!p.allowed);
    ck_assert(!access_current(&a, &p));
    access_done(&a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("access");
    TCase *t = tcase_create("peers");
    tcase_add_test(t, access_own_uid_and_root_are_always_admins);
    tcase_add_test(t, access_other_uid_refused_by_default_and_allowed_by_number_or_name);
    tcase_add_test(t, access_gid_matches_primary_group_from_passwd_not_only_the_credential);
    tcase_add_test(t, access_unknown_user_or_group_name_is_einval_naming_the_key);
    tcase_add_test(t, access_current_decides_again_when_the_lists_generation_moves_on);
    suite_add_tcase(s, t);
    return tu_run(s);
}

/* check_rails.c: the rail choice (lib/rails.h) over node descriptions (lib/topo.h): a DGX H100
 * drawn from NVIDIA's published pairing (tests/topo/dgx-h100.txt) gives each GPU its PIX NIC;
 * without a GPU's own NIC it falls back to the least used NIC of its NUMA node; the distance
 * classes PIX, PXB, PHB, NODE and SYS; the machine it runs on, read live; the sysfs reader over
 * a tree this test builds; and every limit and malformed line refused with its line number. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rails.h"
#include "testutil.h"
#include "topo.h"

static struct topo t;
static struct rails r;
static char err[256];

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    static char buf[TOPO_MAX_DEVICES * (TOPO_LINE_MAX + 1)];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static const char *topo_dir(char *buf, size_t len)
{
    snprintf(buf, len, "%s", __FILE__);
    char *slash = strrchr(buf, '/');
    snprintf(slash ? slash + 1 : buf, len - (size_t)(slash ? slash + 1 - buf : 0), "topo");
    return buf;
}

static const struct topo_dev *by_name(const char *name)
{
    for (uint32_t i = 0; i < t.n; i++)
        if (strcmp(t.dev[i].name, name) == 0)
            return &t.dev[i];
    return NULL;
}

static const struct rails_gpu *rail_of(const char *gpu_bdf)
{
    for (uint32_t i = 0; i < r.n_gpus; i++)
        if (strcmp(t.dev[r.gpu[i].gpu].bdf, gpu_bdf) == 0)
            return &r.gpu[i];
    return NULL;
}

START_TEST(each_dgx_h100_gpu_takes_the_nic_nvidia_pairs_it_with)
{
    char dir[512], path[600];
    snprintf(path, sizeof path, "%s/dgx-h100.txt", topo_dir(dir, sizeof dir));
    ck_assert_msg(topo_parse(slurp(path), &t, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(rails_choose(&t, &r), 0);
    ck_assert_uint_eq(r.n_gpus, 8);
    ck_assert_uint_eq(r.n_nics, 12);
    /* DGX H100 User Guide, Table 6: GPU -> RDMA device */
    static const char *const want[8][2] = {
        {"0000:1b:00.0", "mlx5_0"}, {"0000:43:00.0", "mlx5_3"},  {"0000:52:00.0", "mlx5_4"},
        {"0000:61:00.0", "mlx5_5"}, {"0000:9d:00.0", "mlx5_6"},  {"0000:c3:00.0", "mlx5_9"},
        {"0000:d1:00.0", "mlx5_10"}, {"0000:df:00.0", "mlx5_11"}};
    for (int i = 0; i < 8; i++) {
        const struct rails_gpu *g = rail_of(want[i][0]);
        ck_assert_ptr_nonnull(g);
        ck_assert_str_eq(t.dev[g->nic].name, want[i][1]);
        ck_assert_int_eq(g->dist, TOPO_PIX);
    }
    uint32_t nics[TOPO_MAX_DEVICES];
    uint32_t n = rails_numa_nics(&t, 1, nics, TOPO_MAX_DEVICES);
    ck_assert_uint_eq(n, 6); /* 4 compute + the storage card's 2 ports on node 1 */
    for (uint32_t i = 0; i < n; i++)
        ck_assert_int_eq(t.dev[nics[i]].numa, 1);
}
END_TEST

START_TEST(a_gpu_whose_own_nic_is_gone_takes_the_least_used_nic_of_its_node)
{
    char dir[512], path[600];
    snprintf(path, sizeof path, "%s/dgx-h100.txt", topo_dir(dir, sizeof dir));
    char *text = slurp(path);
    char *line = strstr(text, "nic 0000:5e:00.0"); /* GPU 3's mlx5_5 */
    ck_assert_ptr_nonnull(line);
    line[0] = '#';
    ck_assert_msg(topo_parse(text, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(rails_choose(&t, &r), 0);
    const struct rails_gpu *g = rail_of("0000:61:00.0");
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(g->dist, TOPO_NODE);
    ck_assert_int_eq(t.dev[g->nic].numa, 0);
    /* the storage ports serve no GPU yet; the compute NICs of node 0 serve one each */
    ck_assert_str_eq(t.dev[g->nic].name, "mlx5_1");
    ck_assert_ptr_nonnull(by_name("mlx5_2"));
}
END_TEST

static topo_dist_t dist_of(const char *a_path, int a_numa, const char *b_path, int b_numa)
{
    char text[2048];
    const char *a_bdf = strrchr(a_path, '/') + 1, *b_bdf = strrchr(b_path, '/') + 1;
    snprintf(text, sizeof text, "gpu %s numa=%d path=%s\nnic %s numa=%d path=%s name=n0\n", a_bdf,
             a_numa, a_path, b_bdf, b_numa, b_path);
    ck_assert_msg(topo_parse(text, &t, err, sizeof err) == 0, "%s", err);
    topo_dist_t d = topo_distance(&t.dev[0], &t.dev[1]);
    ck_assert_int_eq(topo_distance(&t.dev[1], &t.dev[0]), d);
    return d;
}

START_TEST(distance_classes_follow_where_the_chains_part)
{
    const char *sw = "pci0000:15/0000:15:01.0/0000:16:00.0";
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/0000:17:00.0/0000:18:00.0", sw);
    snprintf(b, sizeof b, "%s/0000:17:01.0/0000:19:00.0", sw);
    ck_assert_int_eq(dist_of(a, 0, b, 0), TOPO_PIX);
    snprintf(b, sizeof b, "%s/0000:17:01.0/0000:20:00.0/0000:21:00.0/0000:22:00.0", sw);
    ck_assert_int_eq(dist_of(a, 0, b, 0), TOPO_PXB); /* a second switch below the first */
    ck_assert_int_eq(dist_of(a, 0, "pci0000:15/0000:15:02.0/0000:30:00.0", 0), TOPO_PHB);
    ck_assert_int_eq(dist_of(a, 0, "pci0000:40/0000:40:01.0/0000:41:00.0", 0), TOPO_NODE);
    ck_assert_int_eq(dist_of(a, 0, "pci0000:80/0000:80:01.0/0000:81:00.0", 1), TOPO_SYS);
    ck_assert_int_eq(dist_of(a, -1, "pci0000:80/0000:80:01.0/0000:81:00.0", -1), TOPO_SYS);
    ck_assert_str_eq(topo_dist_to_string(TOPO_PXB), "PXB");
}
END_TEST

/* The machine the test runs on, read live from /sys (no GPU and no RDMA NIC on the CI VM; the
 * GPU machine's one H100 through scripts/device-check): the reader's text parses, and the choice
 * is total: each GPU has a rail, or there is no NIC at all. */
START_TEST(this_machines_description_parses_and_the_choice_is_total)
{
    char *text = NULL;
    ck_assert_msg(topo_sysfs_describe("/sys", &text, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(topo_parse(text, &t, err, sizeof err) == 0, "%s\n%s", err, text);
    free(text);
    uint32_t gpus = 0, nics = 0;
    for (uint32_t k = 0; k < t.n; k++)
        *(t.dev[k].kind == TOPO_GPU ? &gpus : &nics) += 1;
    int rc = rails_choose(&t, &r);
    ck_assert_int_eq(rc, nics ? 0 : -ENODEV);
    ck_assert_uint_eq(r.n_gpus, nics ? gpus : 0);
    for (uint32_t i = 0; i < r.n_gpus; i++)
        ck_assert_int_lt(r.gpu[i].dist, TOPO__COUNT);
}
END_TEST

/* The GPU machine of these sessions, read there (tests/topo/h100-vm-device.txt): one GPU on no
 * NUMA node, no RDMA NIC. No rail exists, and the refusal says so rather than inventing one. */
START_TEST(the_h100_vm_read_there_has_one_gpu_and_no_rail)
{
    char dir[1024], path[1100];
    snprintf(path, sizeof path, "%s/h100-vm-device.txt", topo_dir(dir, sizeof dir));
    ck_assert_msg(topo_parse(slurp(path), &t, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_int_eq(t.dev[0].kind, TOPO_GPU);
    ck_assert_int_eq(t.dev[0].numa, -1);
    ck_assert_str_eq(t.dev[0].bdf, "0000:00:06.0");
    ck_assert_int_eq(rails_choose(&t, &r), -ENODEV);
    ck_assert_uint_eq(r.n_gpus, 0);
}
END_TEST

static void put(const char *dir, const char *file, const char *text)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(the_sysfs_reader_describes_gpus_and_rdma_nics_only)
{
    char root[] = "/tmp/kvferry-topo-XXXXXX", p[512], q[1024], cmd[1200];
    ck_assert_ptr_nonnull(mkdtemp(root));
    const char *devs[3][4] = {
        /* bdf, chain below devices/, vendor, class */
        {"0000:18:00.0", "pci0000:15/0000:15:01.0/0000:18:00.0", "0x15b3", "0x020700"},
        {"0000:1b:00.0", "pci0000:15/0000:15:02.0/0000:1b:00.0", "0x10de", "0x030200"},
        {"0000:00:03.0", "pci0000:00/0000:00:03.0", "0x1af4", "0x020000"}, /* virtio-net */
    };
    snprintf(p, sizeof p, "%s/bus/pci/devices", root);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    ck_assert_int_eq(system(cmd), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/devices/%s", root, devs[i][1]);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
        ck_assert_int_eq(system(cmd), 0);
        put(p, "vendor", devs[i][2]);
        put(p, "class", devs[i][3]);
        put(p, "numa_node", i == 1 ? "1\n" : "-1\n");
        if (i == 0) {
            snprintf(q, sizeof q, "%s/infiniband/mlx5_0", p);
            snprintf(cmd, sizeof cmd, "mkdir -p '%s'", q);
            ck_assert_int_eq(system(cmd), 0);
        }
        snprintf(q, sizeof q, "%s/bus/pci/devices/%s", root, devs[i][0]);
        ck_assert_int_eq(symlink(p, q), 0);
    }
    char *text = NULL;
    ck_assert_msg(topo_sysfs_describe(root, &text, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(text, "nic 0000:18:00.0 numa=-1 path=pci0000:15/0000:15:01.0/0000:18:00.0 "
                           "name=mlx5_0\n"
                           "gpu 0000:1b:00.0 numa=1 path=pci0000:15/0000:15:02.0/0000:1b:00.0\n");
    ck_assert_msg(topo_parse(text, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(rails_choose(&t, &r), 0);
    ck_assert_int_eq(r.gpu[0].dist, TOPO_PHB);
    free(text);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_lt(topo_sysfs_describe(root, &text, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "bus/pci/devices"));
}
END_TEST

static void refused(const char *text, const char *what)
{
    ck_assert_int_eq(topo_parse(text, &t, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, what) != NULL, "'%s' does not say '%s'", err, what);
}

START_TEST(bad_descriptions_are_refused_with_the_line_and_what_is_wrong)
{
    refused("# ok\nfpga 0000:18:00.0 numa=0 path=pci0000:15/0000:18:00.0\n",
            "line 2: kind must be gpu or nic");
    refused("gpu 18:00.0 numa=0 path=pci0000:15/18:00.0\n", "not a PCI address");
    refused("gpu 0000:18:00.0 numa=0\n", "path= is missing");
    refused("gpu 0000:18:00.0 path=pci0000:15/0000:15:01.0/0000:19:00.0\n", "device's own address");
    refused("gpu 0000:18:00.0 path=0000:15:01.0/0000:18:00.0\n", "root complex");
    refused("gpu 0000:18:00.0 path=pci0000:15//0000:18:00.0\n", "empty component");
    refused("gpu 0000:18:00.0 numa=x path=pci0000:15/0000:18:00.0\n", "numa must be");
    refused("gpu 0000:18:00.0 speed=1 path=pci0000:15/0000:18:00.0\n", "unknown field");
    refused("gpu 0000:18:00.0 path=pci0000:15/0000:18:00.0\n"
            "nic 0000:18:00.0 path=pci0000:15/0000:18:00.0\n",
            "line 2: 0000:18:00.0 is listed twice");
    char deep[1024] = "gpu 0000:18:00.0 path=pci0000:15";
    for (int i = 0; i < TOPO_DEPTH_MAX; i++)
        strcat(deep, "/0000:15:01.0");
    strcat(deep, "/0000:18:00.0\n");
    refused(deep, "deeper than");
    static char big[TOPO_LINE_MAX + 64];
    memset(big, 'a', sizeof big - 2);
    big[sizeof big - 2] = '\n';
    refused(big, "longer than");
    static char many[(TOPO_MAX_DEVICES + 1) * 64];
    size_t off = 0;
    for (int i = 0; i <= TOPO_MAX_DEVICES; i++)
        off += (size_t)snprintf(many + off, sizeof many - off,
                                "gpu 0000:%02x:%02x.0 path=pci0000:00/0000:%02x:%02x.0\n", i / 32,
                                i % 32, i / 32, i % 32);
    refused(many, "more than 256 devices");
    many[0] = '#'; /* 256 devices: the limit itself is fine */
    ck_assert_msg(topo_parse(many, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(t.n, TOPO_MAX_DEVICES);
    ck_assert_int_eq(rails_choose(&t, &r), -ENODEV);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rails");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, each_dgx_h100_gpu_takes_the_nic_nvidia_pairs_it_with);
    tcase_add_test(tc, a_gpu_whose_own_nic_is_gone_takes_the_least_used_nic_of_its_node);
    tcase_add_test(tc, distance_classes_follow_where_the_chains_part);
    tcase_add_test(tc, the_h100_vm_read_there_has_one_gpu_and_no_rail);
    tcase_add_test(tc, this_machines_description_parses_and_the_choice_is_total);
    tcase_add_test(tc, the_sysfs_reader_describes_gpus_and_rdma_nics_only);
    tcase_add_test(tc, bad_descriptions_are_refused_with_the_line_and_what_is_wrong);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

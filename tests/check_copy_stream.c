/* check_copy_stream.c: the streaming run copy (copy_stream.h): every kernel this CPU runs copies
 * exactly the bytes memcpy does, at any source and destination alignment and any length (under
 * one vector, across the 64-byte head, under and over four 4 KiB stretches, the tail), and
 * writes nothing outside its destination; kernels are set by name, unknown and unsupported
 * names refused. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "copy_stream.h"
#include "testutil.h"

#define GUARD 256
#define MAXLEN (9 * 4096 + 700)

static const uint64_t lens[] = {0,     1,     15,    63,    64,    65,        255,
                                256,   257,   4095,  4096,  4097,      3 * 4096 + 17,
                                16383, 16384, 16385, 16448, 2 * 16384 + 4095, MAXLEN};
static const unsigned offs[] = {0, 1, 7, 16, 33, 63};

static bool untouched(const uint8_t *a, const uint8_t *b)
{
    for (; a < b; a++)
        if (*a != 0xa5)
            return false;
    return true;
}

/* One kernel at every (source offset, destination offset, length): the destination equals the
 * source, and the guard bytes around it are untouched. */
static void check_kernel(const char *name)
{
    ck_assert_int_eq(copy_stream_kernel_set(name), 0);
    ck_assert_str_eq(copy_stream_kernel(), name);
    uint8_t *src = malloc(MAXLEN + 2 * GUARD), *dst = malloc(MAXLEN + 2 * GUARD);
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(dst);
    for (size_t i = 0; i < MAXLEN + 2 * GUARD; i++)
        src[i] = (uint8_t)(i * 131 + (i >> 9));
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
        for (size_t a = 0; a < sizeof(offs) / sizeof(offs[0]); a++)
            for (size_t b = 0; b < sizeof(offs) / sizeof(offs[0]); b++) {
                uint64_t n = lens[l];
                const uint8_t *s = src + GUARD + offs[a];
                uint8_t *d = dst + GUARD + offs[b];
                memset(dst, 0xa5, MAXLEN + 2 * GUARD);
                copy_stream_run(d, s, n);
                copy_stream_fence();
                ck_assert_msg(memcmp(d, s, n) == 0, "%s: %llu bytes, src +%u, dst +%u differ",
                              name, (unsigned long long)n, offs[a], offs[b]);
                ck_assert_msg(untouched(dst, d) && untouched(d + n, dst + MAXLEN + 2 * GUARD),
                              "%s: %llu bytes, src +%u, dst +%u: wrote outside", name,
                              (unsigned long long)n, offs[a], offs[b]);
            }
    free(src);
    free(dst);
}

START_TEST(copy_stream_every_kernel_copies_exactly_at_any_alignment_and_length)
{
    const char *was = copy_stream_kernel();
    bool ok;
    int ran = 0;
    for (uint32_t i = 0; copy_stream_kernel_at(i, &ok); i++)
        if (ok) {
            check_kernel(copy_stream_kernel_at(i, NULL));
            ran++;
        }
    ck_assert_int_ge(ran, 1); /* memcpy at least */
    ck_assert_int_eq(copy_stream_kernel_set(was), 0);
}
END_TEST

START_TEST(copy_stream_kernel_set_refuses_unknown_and_unsupported_names)
{
    const char *was = copy_stream_kernel();
    ck_assert_int_eq(copy_stream_kernel_set("avx1024"), -EINVAL);
    ck_assert_int_eq(copy_stream_kernel_set(""), -EINVAL);
    ck_assert_str_eq(copy_stream_kernel(), was); /* a refused name changes nothing */
    bool ok;
    const char *name;
    uint32_t i;
    for (i = 0; (name = copy_stream_kernel_at(i, &ok)); i++)
        ck_assert_int_eq(copy_stream_kernel_set(name), ok ? 0 : -ENOTSUP);
    ck_assert_ptr_null(copy_stream_kernel_at(i, &ok));
    ck_assert_int_eq(copy_stream_kernel_set("memcpy"), 0); /* everywhere */
    ck_assert_int_eq(copy_stream_kernel_set(was), 0);
    /* the default is the first this CPU supports */
    for (uint32_t j = 0; (name = copy_stream_kernel_at(j, &ok)); j++)
        if (ok) {
            ck_assert_str_eq(was, name);
            break;
        }
}
END_TEST

static Suite *copy_stream_suite(void)
{
    Suite *s = suite_create("copy_stream");
    TCase *tc = tcase_create("kernels");
    tcase_add_test(tc, copy_stream_every_kernel_copies_exactly_at_any_alignment_and_length);
    tcase_add_test(tc, copy_stream_kernel_set_refuses_unknown_and_unsupported_names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(copy_stream_suite()); }

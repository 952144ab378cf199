/* check_laycache.c: the per-peer cache of generation layouts (daemon/engine/engine_laycache.h):
 * the sender sends a layout until the peer answered a flow that carried it and names it
 * afterwards, evicts the least recently used slot past WIRE_LAYOUT_SLOTS ids, and the receiver decodes what is sent, answers a reference
 * only from a slot holding that id, and never keeps a layout that failed to decode. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "engine_laycache.h"
#include "preset.h"
#include "testutil.h"

static struct layout gen[4];

/* The JSON of generation rank 0 of a tiny model, with tokens_per_block `tpb`. */
static char *gen_json(uint32_t tpb)
{
    struct preset_spec s;
    char err[256];
    ck_assert_msg(preset_parse("tiny", &s, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(preset_build(&s, "g", ROLE_GENERATION, -1, gen, err, sizeof err) == 0, "%s",
                  err);
    gen[0].tokens_per_block = tpb;
    json_t *o = layout_to_jobj(&gen[0]);
    char *j = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    ck_assert_ptr_nonnull(j);
    return j;
}

/* Places id with a fresh flow and, when it had to be sent, answers that flow. */
static bool place_answered(struct laycache *c, uint64_t id, uint32_t *slot)
{
    static uint64_t flow = 1000;
    bool held = laycache_place(c, id, ++flow, slot);
    if (!held)
        laycache_answered(c, flow);
    return held;
}

START_TEST(laycache_sender_sends_once_and_evicts_the_least_recently_used)
{
    struct laycache c = {0};
    uint32_t slot, first;
    ck_assert(!laycache_place(&c, 10, 1, &first)); /* first time: send */
    ck_assert(!laycache_place(&c, 10, 2, &slot));  /* flow 1 not answered yet: sent again */
    ck_assert_uint_eq(slot, first);
    laycache_answered(&c, 1); /* an older carrier's answer is no proof of the latest */
    ck_assert(!laycache_place(&c, 10, 3, &slot));
    laycache_answered(&c, 3);
    ck_assert(laycache_place(&c, 10, 4, &slot)); /* answered: a reference, same slot */
    ck_assert_uint_eq(slot, first);
    for (uint64_t id = 11; id < 10 + WIRE_LAYOUT_SLOTS; id++) /* fill the other slots */
        ck_assert(!place_answered(&c, id, &slot));
    ck_assert(place_answered(&c, 10, &slot)); /* 10 used last: 11 is now the oldest */
    ck_assert(place_answered(&c, 10 + WIRE_LAYOUT_SLOTS - 1, &slot));
    uint32_t s11 = WIRE_LAYOUT_SLOTS;
    for (uint32_t i = 0; i < WIRE_LAYOUT_SLOTS; i++)
        if (c.sent_id[i] == 11)
            s11 = i;
    ck_assert(!place_answered(&c, 99, &slot)); /* one id past the limit: evicts 11 */
    ck_assert_uint_eq(slot, s11);
    ck_assert(!place_answered(&c, 11, &slot)); /* 11 is sent again */
    ck_assert(place_answered(&c, 99, &slot));
    laycache_forget(&c, slot); /* a failed send: 99 goes again */
    ck_assert(!place_answered(&c, 99, &slot));
    laycache_forget(&c, WIRE_LAYOUT_SLOTS); /* out of range: ignored */
    /* a layout still on its way is not evicted while an answered slot is there */
    struct laycache d = {0};
    uint32_t pending;
    ck_assert(!laycache_place(&d, 1, 50, &pending)); /* never answered, the oldest */
    for (uint64_t id = 2; id <= WIRE_LAYOUT_SLOTS; id++)
        ck_assert(!place_answered(&d, id, &slot));
    ck_assert(!place_answered(&d, 77, &slot));
    ck_assert_uint_ne(slot, pending);
    laycache_clear(&c);
    laycache_clear(&d);
}
END_TEST

START_TEST(laycache_receiver_keeps_what_was_sent_and_refuses_stale_references)
{
    struct laycache c = {0};
    char *j16 = gen_json(16), *j32 = gen_json(32), err[300];
    bool decoded;
    struct wire_recv_req q = {.gen_json = j16, .gen_json_len = (uint32_t)strlen(j16),
                              .layout_id = 5, .layout_slot = 2};
    const struct layout *l = laycache_take(&c, &q, &decoded, err, sizeof err);
    ck_assert_msg(l && decoded, "%s", err);
    ck_assert_uint_eq(l->tokens_per_block, 16);
    const struct layout *flow = l; /* a flow keeps its reference past what follows */
    q.gen_json = NULL, q.gen_json_len = 0; /* a reference to it */
    l = laycache_take(&c, &q, &decoded, err, sizeof err);
    ck_assert(l && !decoded);
    ck_assert_ptr_eq(l, flow); /* shared, not copied */
    ck_assert_uint_eq(l->tokens_per_block, 16);
    laycache_unref(l);
    q.layout_id = 6; /* an id the slot does not hold: refused, never the old layout */
    ck_assert_ptr_null(laycache_take(&c, &q, &decoded, err, sizeof err));
    ck_assert_msg(strstr(err, "layout 6 is not held in slot 2 (it holds 5)"), "%s", err);
    q.layout_slot = 3; /* an empty slot */
    ck_assert_ptr_null(laycache_take(&c, &q, &decoded, err, sizeof err));
    q.layout_slot = WIRE_LAYOUT_SLOTS; /* out of range */
    ck_assert_ptr_null(laycache_take(&c, &q, &decoded, err, sizeof err));
    /* a re-registered rank (new id) replaces the slot with its new layout */
    q = (struct wire_recv_req){.gen_json = j32, .gen_json_len = (uint32_t)strlen(j32),
                               .layout_id = 7, .layout_slot = 2};
    l = laycache_take(&c, &q, &decoded, err, sizeof err);
    ck_assert_msg(l && decoded, "%s", err);
    ck_assert_uint_eq(l->tokens_per_block, 32);
    ck_assert_ptr_ne(l, flow);
    ck_assert_uint_eq(flow->tokens_per_block, 16); /* the flow's layout was not overwritten */
    laycache_unref(l);
    q.layout_id = 5, q.gen_json = NULL, q.gen_json_len = 0;
    ck_assert_ptr_null(laycache_take(&c, &q, &decoded, err, sizeof err));
    /* a layout that fails to decode empties the slot: the old id is refused after it */
    q = (struct wire_recv_req){.gen_json = "{\"instance\":1}", .gen_json_len = 14,
                               .layout_id = 8, .layout_slot = 2};
    ck_assert_ptr_null(laycache_take(&c, &q, &decoded, err, sizeof err));
    ck_assert(!decoded);
    q.layout_id = 7, q.gen_json = NULL, q.gen_json_len = 0;
    ck_assert_ptr_null(laycache_take(&c, &q, &decoded, err, sizeof err));
    /* every slot filled (the limit), each answered from its own */
    for (uint32_t s = 0; s < WIRE_LAYOUT_SLOTS; s++) {
        q = (struct wire_recv_req){.gen_json = s % 2 ? j32 : j16,
                                   .gen_json_len = (uint32_t)strlen(s % 2 ? j32 : j16),
                                   .layout_id = 100 + s, .layout_slot = s};
        l = laycache_take(&c, &q, &decoded, err, sizeof err);
        ck_assert(l && decoded);
        laycache_unref(l);
    }
    for (uint32_t s = 0; s < WIRE_LAYOUT_SLOTS; s++) {
        q = (struct wire_recv_req){.layout_id = 100 + s, .layout_slot = s};
        l = laycache_take(&c, &q, &decoded, err, sizeof err);
        ck_assert(l && !decoded);
        ck_assert_uint_eq(l->tokens_per_block, s % 2 ? 32 : 16);
        laycache_unref(l);
    }
    laycache_clear(&c);
    ck_assert_uint_eq(flow->tokens_per_block, 16); /* still the flow's after the peer's loss */
    laycache_unref(flow);
    q = (struct wire_recv_req){.layout_id = 100, .layout_slot = 0}; /* a reconnected peer */
    ck_assert_ptr_null(laycache_take(&c, &q, &decoded, err, sizeof err));
    free(j16);
    free(j32);
}
END_TEST

/* RECV_REQ's layout reference on the wire: the JSON may be empty (the layout the receiver holds
 * in layout_slot); the id is never 0 and the slot is below WIRE_LAYOUT_SLOTS, both ways. */
START_TEST(laycache_wire_reference_is_checked_both_ways)
{
    struct wire_msg m = {.type = WIRE_RECV_REQ};
    struct wire_recv_req *q = &m.u.recv_req;
    snprintf(q->ctx_instance, sizeof q->ctx_instance, "ctx-a");
    q->ctx_dp_rank = -1;
    q->layout_id = 77;
    q->layout_slot = WIRE_LAYOUT_SLOTS - 1;
    q->path = WIRE_PATH_BOUNCE;
    q->extent_bytes = 4096;
    void *out = NULL;
    size_t olen = 0;
    ck_assert_int_eq(wire_encode(&m, &out, &olen), 0);
    struct wire_msg d;
    ck_assert_int_eq(wire_decode(out, olen, &d), 0);
    ck_assert_uint_eq(d.u.recv_req.gen_json_len, 0);
    ck_assert_uint_eq(d.u.recv_req.layout_id, 77);
    ck_assert_uint_eq(d.u.recv_req.layout_slot, WIRE_LAYOUT_SLOTS - 1);
    wire_msg_done(&d);
    /* decode refuses what encode would: patch the slot (after the empty blob), then the id */
    size_t at = WIRE_HDR_BYTES + 8 + 2 + strlen("ctx-a") + 8 + 4 + 4 + 4 + 8;
    ((uint8_t *)out)[at] = WIRE_LAYOUT_SLOTS;
    ck_assert_int_eq(wire_decode(out, olen, &d), -EBADMSG);
    ((uint8_t *)out)[at] = 0;
    memset((uint8_t *)out + at - 8, 0, 8);
    ck_assert_int_eq(wire_decode(out, olen, &d), -EBADMSG);
    free(out);
    void *o2 = NULL;
    q->layout_slot = WIRE_LAYOUT_SLOTS; /* one past the last slot */
    ck_assert_int_eq(wire_encode(&m, &o2, &olen), -EINVAL);
    q->layout_slot = 0;
    q->layout_id = 0;
    ck_assert_int_eq(wire_encode(&m, &o2, &olen), -EINVAL);
}
END_TEST

static Suite *laycache_suite(void)
{
    Suite *s = suite_create("laycache");
    TCase *t = tcase_create("cache");
    tcase_add_test(t, laycache_sender_sends_once_and_evicts_the_least_recently_used);
    tcase_add_test(t, laycache_receiver_keeps_what_was_sent_and_refuses_stale_references);
    tcase_add_test(t, laycache_wire_reference_is_checked_both_ways);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run(laycache_suite()); }

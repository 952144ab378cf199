/* engine_clock.c: the engine's clock, its tick's start and the limits every part reads
 * (engine_int.h): the bottom of the engine, calling nothing in it, so that any part may. */
#include <string.h>
#include <uv.h>

#include "daemon.h"
#include "engine_int.h"

uint64_t engine_now(const struct engine *e)
{
    uv_update_time(&e->d->loop); /* fresh: deadlines from the cached time came early */
    return uv_now(&e->d->loop);
}

uint32_t engine_window(const struct engine *e)
{
    int64_t w = e->d->cfg.arena_window;
    return w < 1 ? 1 : w > (int64_t)ENGINE_MAX_CREDITS ? ENGINE_MAX_CREDITS : (uint32_t)w;
}

/* The tick runs every ENGINE_TICK_MS while flows live; armed later only for a part's due time
 * (engine.c), so a kick brings it back within one period. */
void engine_kick_tick(struct engine *e)
{
    if (!e->tick_inited || e->stopping)
        return;
    if (!uv_is_active((uv_handle_t *)&e->tick) || uv_timer_get_due_in(&e->tick) > ENGINE_TICK_MS)
        uv_timer_start(&e->tick, e->tick_cb, ENGINE_TICK_MS, ENGINE_TICK_MS);
}

void engine_due(struct engine *e, engine_part_t part, uint64_t at_ms)
{
    if (at_ms == 0)
        at_ms = ENGINE_DUE_NEXT;
    if (!e->due[part] || at_ms < e->due[part])
        e->due[part] = at_ms;
    engine_kick_tick(e);
}

uint64_t engine_next_due(const struct engine *e)
{
    uint64_t next = 0;
    for (int p = 0; p < EPART__COUNT; p++)
        if (e->due[p] && (!next || e->due[p] < next))
            next = e->due[p];
    return next;
}

int engine_is_self(const struct engine *e, const char *addr)
{
    return e && e->self_addr[0] && strcmp(e->self_addr, addr) == 0;
}

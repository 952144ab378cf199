/* preset_models.c: the geometry table of docs/DESIGN.md §9 (preset_models.h). */
#include <stddef.h>
#include <string.h>

#include "preset.h"
#include "preset_models.h"

static const struct preset_model models[] = {
    {"tiny", 8, 4, 32, 3},
    {"kimi-linear-48b", 27, 32, 128, 4},
    {"kimi-k3", 93, 96, 128, 4},
};

const char *const preset_models[] = {"tiny", "kimi-linear-48b", "kimi-k3", NULL};

const struct preset_model *preset_model_find(const char *name)
{
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
        if (strcmp(models[i].name, name) == 0)
            return &models[i];
    return NULL;
}

/* client_info.c: what a binding asks the library before it talks to a daemon: its ABI version
 * (kvferry.h KVF_ABI_VERSION) and its version string. */
#include "kvferry.h"

uint32_t kvf_abi_version(void) { return KVF_ABI_VERSION; }

const char *kvf_version(void) { return KVF_VERSION; }

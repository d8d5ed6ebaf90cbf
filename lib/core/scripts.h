/* SPDX-License-Identifier: MIT */
/* scripts.h - the Lua scripts the library sends, and their SHA-1s for EVALSHA.
 *
 * Each script is a file of lib/core/lua/, which says what it does and what its KEYS and ARGV are;
 * the build turns them into `redlock__script_<name>` (lib/core/lua/generate.py: the C string and
 * its SHA-1), so the text and its name cannot drift apart. test/integration/test_scripts.c checks
 * each SHA-1 against SCRIPT LOAD on a real server. Compare-and-X is done server-side so that no
 * other client's command can slip between the comparison and the change. */
#ifndef REDLOCK_SCRIPTS_H
#define REDLOCK_SCRIPTS_H

#include <stddef.h>

typedef struct redlock__script {
    const char *name;
    const char *source;
    size_t source_len;
    const char *sha1; /* 40 lowercase hex digits */
} redlock__script;

/* redlock__script_<name> for each lib/core/lua/<name>.lua, REDLOCK__SCRIPTS and redlock__scripts[]
 * (every script, in the order the handshake loads them: handshake.c, and the tool's check). */
#include "scripts_gen.h"

#endif

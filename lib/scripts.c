/* scripts.c - the Lua scripts. Compare-and-X is done server-side so that no other client's
 * command can slip between the comparison and the change. */
#include "scripts.h"

#define EXTEND_SOURCE                                                                              \
    "local v = redis.call(\"get\", KEYS[1])\n"                                                     \
    "if v == ARGV[1] then\n"                                                                       \
    "    return redis.call(\"pexpire\", KEYS[1], ARGV[2])\n"                                       \
    "end\n"                                                                                        \
    "if v == false and ARGV[3] == \"1\" then\n"                                                    \
    "    redis.call(\"set\", KEYS[1], ARGV[1], \"px\", ARGV[2])\n"                                 \
    "    return 1\n"                                                                               \
    "end\n"                                                                                        \
    "return 0\n"

#define RELEASE_SOURCE                                                                             \
    "if redis.call(\"get\", KEYS[1]) == ARGV[1] then\n"                                            \
    "    return redis.call(\"del\", KEYS[1])\n"                                                    \
    "end\n"                                                                                        \
    "return 0\n"

#define INSPECT_SOURCE "return {redis.call(\"get\", KEYS[1]), redis.call(\"pttl\", KEYS[1])}\n"

const redlock__script redlock__script_extend = {
    "extend",
    EXTEND_SOURCE,
    sizeof(EXTEND_SOURCE) - 1,
    "e8d0177eea86a7a2517ed17a5fc662d1c3f5b5df",
};

const redlock__script redlock__script_release = {
    "release",
    RELEASE_SOURCE,
    sizeof(RELEASE_SOURCE) - 1,
    "4123ec057c25a9feb4eb12cb191520152206624e",
};

const redlock__script redlock__script_inspect = {
    "inspect",
    INSPECT_SOURCE,
    sizeof(INSPECT_SOURCE) - 1,
    "a41269ff9fe0f625b1fdfc6ecb6b59dddf8a816c",
};

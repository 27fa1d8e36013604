#include "_fake_defines.h"
#include "_fake_typedefs.h"
#define offsetof(type, member) ((size_t)&((type *)0)->member)

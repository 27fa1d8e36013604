#include "_fake_defines.h"
#define assert(e) ((void)0)

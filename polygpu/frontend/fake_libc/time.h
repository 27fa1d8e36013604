#include "_fake_defines.h"
#include "_fake_typedefs.h"
#define CLOCKS_PER_SEC 1000000
clock_t clock(void);
time_t time(time_t *);

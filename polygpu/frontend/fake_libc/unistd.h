#include "_fake_defines.h"
#include "_fake_typedefs.h"
int usleep(unsigned int);
unsigned int sleep(unsigned int);

#include "_fake_defines.h"
#include "_fake_typedefs.h"
#define va_start(ap, last) ((void)0)
#define va_arg(ap, type) (*(type *)0)
#define va_end(ap) ((void)0)

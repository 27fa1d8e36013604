#include "_fake_defines.h"
#include "_fake_typedefs.h"
#define INT32_MAX 2147483647
#define INT32_MIN (-2147483647 - 1)
#define INT64_MAX 9223372036854775807LL
#define INT64_MIN (-9223372036854775807LL - 1)
#define UINT32_MAX 4294967295U

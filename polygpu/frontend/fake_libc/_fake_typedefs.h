#ifndef POLYGPU_FAKE_TYPEDEFS_H
#define POLYGPU_FAKE_TYPEDEFS_H
typedef unsigned long size_t;
typedef long ssize_t;
typedef long ptrdiff_t;
typedef int wchar_t;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
typedef long long intmax_t;
typedef unsigned long long uintmax_t;
typedef struct _polygpu_FILE FILE;
typedef long time_t;
typedef long clock_t;
typedef int va_list;
#endif

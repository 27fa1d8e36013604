/* polygpu fake libc: shared definitions.  pycparser parses standard C only, so the
   fake headers declare just enough (typedefs, prototypes, macros) for kernels to
   preprocess and parse; they are never compiled. */
#ifndef POLYGPU_FAKE_DEFINES_H
#define POLYGPU_FAKE_DEFINES_H
#define NULL 0
#define __attribute__(x)
#define __extension__
#define __restrict restrict
#define __restrict__ restrict
#define __inline inline
#define __inline__ inline
#define __asm__(x)
#define __const const
#endif

#include "_fake_defines.h"
#include "_fake_typedefs.h"
#define EOF (-1)
extern FILE *stdin;
extern FILE *stdout;
extern FILE *stderr;
int printf(const char *, ...);
int fprintf(FILE *, const char *, ...);
int sprintf(char *, const char *, ...);
int snprintf(char *, size_t, const char *, ...);
int scanf(const char *, ...);
int fscanf(FILE *, const char *, ...);
int puts(const char *);
int putchar(int);
FILE *fopen(const char *, const char *);
int fclose(FILE *);
int fflush(FILE *);
size_t fread(void *, size_t, size_t, FILE *);
size_t fwrite(const void *, size_t, size_t, FILE *);

#include "_fake_defines.h"
#include "_fake_typedefs.h"
#define RAND_MAX 2147483647
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
void *malloc(size_t);
void *calloc(size_t, size_t);
void *realloc(void *, size_t);
void free(void *);
int posix_memalign(void **, size_t, size_t);
void exit(int);
void abort(void);
int abs(int);
long labs(long);
int atoi(const char *);
double atof(const char *);
long strtol(const char *, char **, int);
double strtod(const char *, char **);
int rand(void);
void srand(unsigned int);
double drand48(void);
char *getenv(const char *);

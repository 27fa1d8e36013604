#include "_fake_defines.h"
int omp_get_thread_num(void);
int omp_get_num_threads(void);
int omp_get_max_threads(void);
double omp_get_wtime(void);

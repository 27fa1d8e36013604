/* All-pairs L1 (Manhattan) distances between the rows of m1 (n1 x d) and of m2 (n2 x d):
   D[i][j] = sum_k |m1[i][k] - m2[j][k]| (Sarje & Aluru, Parallel Computing 2013, p = 1). */
#ifndef DATA_TYPE
#define DATA_TYPE float
#define FABS fabsf
#endif

void l1dist(int n1, int n2, int d, DATA_TYPE m1[n1][d], DATA_TYPE m2[n2][d],
            DATA_TYPE D[n1][n2]) {
#pragma scop
  for (int i = 0; i < n1; i++)
    for (int j = 0; j < n2; j++) {
      D[i][j] = 0;
      for (int k = 0; k < d; k++)
        D[i][j] += FABS(m1[i][k] - m2[j][k]);
    }
#pragma endscop
}

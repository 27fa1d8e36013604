/* All-pairs Euclidean distances between the rows of m1 (n1 x d) and of m2 (n2 x d), the
   textbook way: a scalar temporary for the difference, the square root at the end. */
#ifndef DATA_TYPE
#define DATA_TYPE float
#define SQRT sqrtf
#endif

void l2dist(int n1, int n2, int d, DATA_TYPE m1[n1][d], DATA_TYPE m2[n2][d],
            DATA_TYPE D[n1][n2]) {
  DATA_TYPE t;
#pragma scop
  for (int i = 0; i < n1; i++)
    for (int j = 0; j < n2; j++) {
      D[i][j] = 0;
      for (int k = 0; k < d; k++) {
        t = m1[i][k] - m2[j][k];
        D[i][j] += t * t;
      }
      D[i][j] = SQRT(D[i][j]);
    }
#pragma endscop
}

/* All-pairs L_p distances (eq. 3 of Sarje & Aluru): D[i][j] = (sum_k |m1[i][k] - m2[j][k]|^p)^(1/p).
   The exponent is a compile-time constant (-D P=3) or, with -D P=p, the float parameter p. */
#ifndef DATA_TYPE
#define DATA_TYPE float
#define FABS fabsf
#define POW powf
#endif
#ifndef P
#define P 3
#endif

void lpdist(int n1, int n2, int d, DATA_TYPE p, DATA_TYPE m1[n1][d], DATA_TYPE m2[n2][d],
            DATA_TYPE D[n1][n2]) {
#pragma scop
  for (int i = 0; i < n1; i++)
    for (int j = 0; j < n2; j++) {
      D[i][j] = 0;
      for (int k = 0; k < d; k++)
        D[i][j] += POW(FABS(m1[i][k] - m2[j][k]), P);
      D[i][j] = POW(D[i][j], 1.0f / P);
    }
#pragma endscop
}

#include <math.h>
/* Seed 003's chain F = ||A B c|| (D E + D) over ni instances. */
void map_chain(int ni, float A[ni][3][3], float B[ni][3][3], float c[ni][3],
               float D[ni][5][5], float E[ni][5][5], float F[ni][5][5]) {
  float M1[ni][3][3];
  float v1[ni][3];
  float s1[ni];
  float M2[ni][5][5];
  float M3[ni][5][5];
#pragma scop
  for (int e = 0; e < ni; e++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) {
        M1[e][i][j] = 0;
        for (int k = 0; k < 3; k++)
          M1[e][i][j] += A[e][i][k] * B[e][k][j];
      }
  for (int e = 0; e < ni; e++)
    for (int i = 0; i < 3; i++) {
      v1[e][i] = 0;
      for (int k = 0; k < 3; k++)
        v1[e][i] += M1[e][i][k] * c[e][k];
    }
  for (int e = 0; e < ni; e++) {
    s1[e] = 0;
    for (int i = 0; i < 3; i++)
      s1[e] += v1[e][i] * v1[e][i];
    s1[e] = sqrtf(s1[e]);
  }
  for (int e = 0; e < ni; e++)
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++) {
        M2[e][i][j] = 0;
        for (int k = 0; k < 5; k++)
          M2[e][i][j] += D[e][i][k] * E[e][k][j];
      }
  for (int e = 0; e < ni; e++)
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++)
        M3[e][i][j] = M2[e][i][j] + D[e][i][j];
  for (int e = 0; e < ni; e++)
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++)
        F[e][i][j] = M3[e][i][j] * s1[e];
#pragma endscop
}

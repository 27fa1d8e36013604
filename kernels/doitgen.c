/* doitgen: multiresolution kernel A[r][q][:] = A[r][q][:] C4 for every (r, q), a batch
   of vector-matrix products done in place through a buffer.  The buffer has one row
   per (r, q), sum[nr][nq][np], because polygpu does not privatise: with the classic
   one-row sum[np], every (r, q) would reuse the same row and serialise the batch. */
void doitgen(int nr, int nq, int np, float a[nr][nq][np], float c4[np][np],
             float sum[nr][nq][np])
{
#pragma scop
  for (int r = 0; r < nr; r++)
    for (int q = 0; q < nq; q++) {
      for (int p = 0; p < np; p++) {
        sum[r][q][p] = 0.0f;
        for (int s = 0; s < np; s++)
          sum[r][q][p] += a[r][q][s] * c4[s][p];
      }
      for (int p = 0; p < np; p++)
        a[r][q][p] = sum[r][q][p];
    }
#pragma endscop
}

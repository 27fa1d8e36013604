/* row_buffer: each row of a squared into a local row buffer, then smoothed along the row
   from it (a three-point mean) into b -- the textbook way of writing it, with the buffer
   declared in the function: a region-local temporary (docs/input-language.md, local
   arrays), privatised per row, never seen by the caller. */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif

void row_buffer(int n, int m, DATA_TYPE a[n][m], DATA_TYPE b[n][m])
{
  DATA_TYPE t[m];
#pragma scop
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < m; j++)
      t[j] = a[i][j] * a[i][j];
    for (int j = 1; j < m - 1; j++)
      b[i][j] = (t[j - 1] + t[j] + t[j + 1]) / 3;
  }
#pragma endscop
}

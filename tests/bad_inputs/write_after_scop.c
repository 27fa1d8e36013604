// expect: after #pragma scop writes 'b' (an array argument): only the #pragma scop region is compiled
void f(int n, float a[n], float b[n])
{
  int i;
#pragma scop
  for (i = 0; i < n; i++)
    b[i] = a[i];
#pragma endscop
  for (i = 0; i < n; i++)
    b[i] *= 2; // <- error
}

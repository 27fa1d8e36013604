// expect: before #pragma scop writes 'a' (an array argument): only the #pragma scop region is compiled
void f(int n, float a[n], float b[n])
{
  int i;
  a[0] = 1.0f; // <- error
#pragma scop
  for (i = 0; i < n; i++)
    b[i] = a[i];
#pragma endscop
}

// expect: non-affine expression (i * i)
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i * i; j++) // <- error
      a[i] += 1;
#pragma endscop
}

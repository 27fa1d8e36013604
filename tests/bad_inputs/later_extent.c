// expect: uses parameter 'n', which comes later
void f(float a[n], // <- error
       int n)
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 0;
#pragma endscop
}

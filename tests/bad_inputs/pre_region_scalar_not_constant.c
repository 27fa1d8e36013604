// expect: 'eps' is initialised before #pragma scop with 'a[0]', which reads an array
void f(int n, float a[n], float b[n])
{
  float eps = a[0]; // <- error
#pragma scop
  for (int i = 0; i < n; i++)
    b[i] = a[i] + eps;
#pragma endscop
}

// expect: call to 'g': only pure math functions are allowed
float g(float x);
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 2 * g(a[i]); // <- error
#pragma endscop
}

// expect: pointer dereference
void f(int n, float a[n], float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    b[i] = *(a + i); // <- error
#pragma endscop
}

// expect: parameter 'a_sh': the name is that of the shared-memory copy polygpu may make of array 'a'
void f(int n, float a[n],
       float a_sh[n]) // <- error
{
#pragma scop
  for (int i = 0; i < n; i++)
    a_sh[i] = a[i];
#pragma endscop
}

// expect: parameter 'n' has type 'unsigned int'
void f(unsigned int n, // <- error
       float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 0;
#pragma endscop
}

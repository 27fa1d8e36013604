// expect: parameter 'new': the name is a C++ keyword
void f(int n,
       float new[n], // <- error
       float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    b[i] = new[i];
#pragma endscop
}

// expect: assignment to loop iterator 'i'
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    a[i] = 0;
    i = i + 1; // <- error
  }
#pragma endscop
}

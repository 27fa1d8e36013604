// expect: iterator 'i' used outside its loop
void f(int n, float a[n])
{
  int i;
#pragma scop
  for (i = 0; i < n; i++)
    a[i] = 0;
  a[0] = i; // <- error
#pragma endscop
}
